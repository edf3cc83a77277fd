package import APNs
import FCM
package import Foundation
package import NIOCore
import _CryptoExtras

/// A service account the simulator accepts: the public half of its key, with the ids Google knows it by.
package struct FCMSimulatorAccount: Sendable, Hashable {
    /// The project the account may send for: the `{project}` of `messages:send`.
    package var projectID: String
    /// The key id: the assertion's `kid` (`private_key_id` in the file).
    package var keyID: String
    /// The account's address: the assertion's `iss` (`client_email` in the file).
    package var clientEmail: String
    /// The RSA public key, PEM, that verifies the account's assertions.
    package var publicKeyPEM: String

    /// An account with these parts.
    ///
    /// - Throws: when `publicKeyPEM` is not an RSA public key of at least 2,048 bits.
    package init(projectID: String, keyID: String, clientEmail: String, publicKeyPEM: String) throws {
        _ = try _RSA.Signing.PublicKey(pemRepresentation: publicKeyPEM)
        self.projectID = projectID
        self.keyID = keyID
        self.clientEmail = clientEmail
        self.publicKeyPEM = publicKeyPEM
    }

    /// The account of a whole service-account file, its public key derived from the file's private key.
    ///
    /// - Throws: `FCMCredentialError` when the file is not a usable service account.
    package init(serviceAccountJSON: Data) throws {
        let account = try FCMServiceAccount(json: serviceAccountJSON)
        try self.init(
            projectID: account.projectID, keyID: account.privateKeyID, clientEmail: account.clientEmail,
            publicKeyPEM: account.publicKeyPEM)
    }
}

/// Misbehaviour the simulator injects; changed on a running simulator with ``FCMSimulator/updateFaults(_:)``.
///
/// The per-token answers win over the random ones. Counts (`goawayAfter`, `dropConnectionAfter`) are per connection
/// and count requests whose body was completely received, token requests included; the action happens right after
/// the N-th request is answered.
package struct FCMSimulatorFaults: Sendable {
    /// Registration tokens answered 404 UNREGISTERED (the app was uninstalled).
    package var unregisteredTokens: Set<String> = []
    /// Registration tokens answered 400 INVALID_ARGUMENT "The registration token is not a valid FCM registration
    /// token".
    package var invalidTokens: Set<String> = []
    /// Registration tokens answered 403 SENDER_ID_MISMATCH (they belong to another project).
    package var senderIDMismatchTokens: Set<String> = []
    /// Registration tokens answered 401 THIRD_PARTY_AUTH_ERROR (the project's APNs credential is refused).
    package var thirdPartyAuthErrorTokens: Set<String> = []
    /// Probability (0...1) that a valid message is answered 429 QUOTA_EXCEEDED.
    package var rate429: Double = 0
    /// Probability (0...1) that a valid message is answered 500 INTERNAL.
    package var rate500: Double = 0
    /// Probability (0...1) that a valid message is answered 503 UNAVAILABLE.
    package var rate503: Double = 0
    /// The `Retry-After` seconds of the random 429s.
    package var retryAfter429 = 1
    /// The `Retry-After` seconds of the random 503s; nil sends none (Google often does not).
    package var retryAfter503: Int?
    /// Messages a project may send per minute (Google's default: 600,000); beyond it 429 QUOTA_EXCEEDED with
    /// `Retry-After` until the minute, which starts at its first message, is over.
    package var messagesPerMinute = 600_000
    /// After this many requests a connection sends GOAWAY (NO_ERROR) whose last stream id is the N-th request's
    /// stream, answers the streams up to it, leaves later streams unanswered, and closes.
    package var goawayAfter: Int?
    /// After this many requests a connection closes its TCP connection without GOAWAY or TLS close_notify, leaving
    /// every pending stream unanswered.
    package var dropConnectionAfter: Int?
    /// Delay before each answer is sent: Google's round trip.
    package var latency: TimeAmount = .zero
    /// Up to this much more delay, drawn uniformly for each answer, so that answers come back out of order.
    package var latencyJitter: TimeAmount = .zero
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced to connections accepted from now on (Google's front ends: 100).
    package var maxConcurrentStreams = 100

    /// No faults.
    package init() {}
}

/// Everything a simulator needs: where to listen, the accounts it accepts, its clock, and its faults.
package struct FCMSimulatorConfiguration: Sendable {
    /// The address to bind.
    package var host = "127.0.0.1"
    /// The TCP port; 0 picks a free one (read it back with ``FCMSimulator/port``).
    package var port = 0
    /// Where the simulator's CA (`ca.pem`, `ca-key.pem`) lives; an existing CA there is reused.
    package var certificateDirectory: String
    /// The service accounts accepted from the start (more with ``FCMSimulator/makeServiceAccount(projectID:clientEmail:)``
    /// and ``FCMSimulator/addAccount(_:)``).
    package var accounts: [FCMSimulatorAccount] = []
    /// The clock assertions and access tokens are judged by, and messages are stamped with: tests move it to expire
    /// tokens.
    package var clock: any APNsClock = SystemClock()
    /// How long an access token is valid, in seconds (Google: 3599).
    package var accessTokenLifetime = 3_599
    /// The faults to inject from the start.
    package var faults = FCMSimulatorFaults()
    /// Seed of the random faults; nil seeds from the system's generator. Each connection draws from its own
    /// generator, seeded from this and its connection id.
    package var seed: UInt64?
    /// Keep the last ``recordLimit`` `messages:send` requests for ``FCMSimulator/receivedMessages()``.
    package var recordMessages = true
    /// How many messages are kept (the oldest are dropped first).
    package var recordLimit = 10_000

    /// A configuration with defaults for everything but the certificate directory.
    package init(certificateDirectory: String) {
        self.certificateDirectory = certificateDirectory
    }
}

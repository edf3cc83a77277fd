package import APNs
package import Crypto
package import NIOCore

/// A provider-token key the simulator accepts: the public half of an APNs `.p8` key with its ids.
package struct APNsSimulatorKey: Sendable {
    /// The 10-character key id (the JWT header's `kid`).
    package var keyID: String
    /// The team the key belongs to (the JWT claims' `iss` must equal it).
    package var teamID: String
    /// The public key as X9.63 bytes (Crypto's key type is not `Sendable`).
    private var publicKeyBytes: [UInt8]

    /// The public key that verifies the token's ES256 signature.
    package var publicKey: P256.Signing.PublicKey {
        get {
            // The bytes came from a valid key.
            try! P256.Signing.PublicKey(x963Representation: publicKeyBytes)
        }
        set { publicKeyBytes = Array(newValue.x963Representation) }
    }

    /// A key with these parts.
    package init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKeyBytes = Array(publicKey.x963Representation)
    }

    /// The key that verifies the tokens `signingKey` makes.
    package init(_ signingKey: APNsSigningKey) {
        self.init(keyID: signingKey.keyID, teamID: signingKey.teamID, publicKey: signingKey.publicKey)
    }

    /// A key from PEM text: Apple's `.p8` private key (PKCS#8 `PRIVATE KEY`) or a P-256 `PUBLIC KEY`.
    package init(keyID: String, teamID: String, pem: String) throws {
        if pem.contains("-----BEGIN PUBLIC KEY-----") {
            self.init(keyID: keyID, teamID: teamID, publicKey: try P256.Signing.PublicKey(pemRepresentation: pem))
        } else {
            self.init(try APNsSigningKey(pem: pem, keyID: keyID, teamID: teamID))
        }
    }
}

/// Misbehaviour the simulator injects; can be changed on a running simulator with
/// ``APNsSimulator/updateFaults(_:)``.
///
/// Counts (`goawayAfter`, `dropConnectionAfter`, `stallAfter`) are per connection and count requests
/// whose body was completely received; the action happens right after the N-th request is answered.
package struct APNsSimulatorFaults: Sendable {
    /// Device tokens answered with 410 Unregistered, with the `timestamp` (milliseconds since 1970) to report.
    package var unregisteredTokens: [String: Int64] = [:]
    /// Whether a token's first eight hex digits choose its answer (``ScriptedToken``), so that a client's tests can
    /// meet every outcome through a relay on the simulator. On under `pushrelay serve --apns-simulator` and
    /// `pushrelay apns-sim`.
    package var scriptedTokens = false
    /// Probability (0...1) that a valid request is answered 429 TooManyRequests.
    package var rate429: Double = 0
    /// Probability (0...1) that a valid request is answered 500 InternalServerError.
    package var rate500: Double = 0
    /// Probability (0...1) that a valid request is answered 503 ServiceUnavailable.
    package var rate503: Double = 0
    /// After this many requests a connection sends GOAWAY (NO_ERROR, `{"reason":"Shutdown"}`) whose last
    /// stream id is the N-th request's stream, answers the streams up to it, leaves later streams
    /// unanswered, and closes.
    package var goawayAfter: Int?
    /// Every N-th stream opened on a connection is reset with REFUSED_STREAM without being processed.
    package var refuseStreamEvery: Int?
    /// After this many requests a connection closes its TCP connection without GOAWAY or TLS close_notify,
    /// leaving every pending stream unanswered.
    package var dropConnectionAfter: Int?
    /// After this many requests a connection stops reading and writing anything, PING ACKs included,
    /// while its TCP connection stays open.
    package var stallAfter: Int?
    /// Delay before each response is sent (a scheduled task on the connection's event loop): Apple's round
    /// trip, which a relay far from it waits for on every request.
    package var latency: TimeAmount = .zero
    /// Up to this much more delay, drawn uniformly for each response, so that answers do not come back in the
    /// order the requests went out.
    package var latencyJitter: TimeAmount = .zero

    /// No faults.
    package init() {}
}

/// Everything a simulator needs: where to listen, what it accepts, and which faults it injects.
package struct APNsSimulatorConfiguration: Sendable {
    /// The address to bind.
    package var host: String = "127.0.0.1"
    /// The TCP port; 0 picks a free one (read it back with ``APNsSimulator/port``).
    package var port: Int = 0
    /// Where the simulator's CA (`ca.pem`, `ca-key.pem`) lives; an existing CA there is reused.
    package var certificateDirectory: String
    /// The provider-token keys accepted; a token with any other `kid` is InvalidProviderToken.
    package var keys: [APNsSimulatorKey] = []
    /// The bundle ids (topics without push-type suffix) accepted; empty accepts any.
    package var topics: [String] = []
    /// The clock provider tokens are judged by (their age, the 20-minute rule) and requests are stamped with.
    package var clock: any APNsClock = SystemClock()
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced after a connection's first successful request
    /// (until then it is 1, as at APNs). Set it low to test a small stream limit.
    package var maxConcurrentStreams: Int = 1000
    /// The faults to inject from the start.
    package var faults = APNsSimulatorFaults()
    /// Seed of the random faults; nil seeds from the system's generator. Each connection draws from its
    /// own generator, seeded from this and its connection id, so a run is repeatable per connection.
    package var seed: UInt64?
    /// Check that each payload parses as a JSON object (with `JSONSerialization`). When false only a cheap
    /// check is made: after trimming whitespace the payload starts with `{` and ends with `}`. Parsing
    /// costs about a tenth of the simulator's throughput with small payloads.
    package var strictJSON: Bool = true
    /// Keep the last ``recordLimit`` requests for ``APNsSimulator/receivedRequests()``.
    package var recordRequests: Bool = false
    /// How many requests are kept when ``recordRequests`` is set (the oldest are dropped first).
    package var recordLimit: Int = 10_000
    /// Append one JSON line per answered request to this file. Written on the event loop: meant for
    /// debugging, not for load tests.
    package var requestLogPath: String?

    /// A configuration with defaults for everything but the certificate directory.
    package init(certificateDirectory: String) {
        self.certificateDirectory = certificateDirectory
    }
}

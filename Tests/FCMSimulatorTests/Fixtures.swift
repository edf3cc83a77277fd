import APNs
import FCM
import Foundation
import NIOPosix
import Synchronization
import _CryptoExtras

@testable import FCMSimulator

/// A wall clock that only moves when a test moves it.
final class TestClock: APNsClock {
    private let date: Mutex<Date>

    /// A clock standing at `start`.
    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        date = Mutex(start)
    }

    /// The time the test set.
    func now() -> Date { date.withLock { $0 } }

    /// Moves the clock on by `seconds`.
    func advance(seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }
}

/// An account's key and the JWTs a test signs with it, good or deliberately wrong.
struct TestAccount {
    /// The private key.
    let key: _RSA.Signing.PrivateKey
    /// What the simulator knows of it.
    let account: FCMSimulatorAccount

    /// A fresh account of `project`.
    init(project: String = "dispo-4f2a1", keyID: String = "3f9c0e1d2b7a") throws {
        key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        account = try FCMSimulatorAccount(
            projectID: project, keyID: keyID, clientEmail: "relay@\(project).iam.gserviceaccount.com",
            publicKeyPEM: key.publicKey.pemRepresentation)
    }

    /// A JWT of `header` and `claims` (JSON objects' fields), signed RS256 with `signer` (default: this key).
    func jwt(header: [String: Any], claims: [String: Any], signer: _RSA.Signing.PrivateKey? = nil) throws -> String {
        let headerJSON = try JSONSerialization.data(withJSONObject: header, options: .sortedKeys)
        let claimsJSON = try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys)
        let input = Base64URL.encode(Array(headerJSON)) + "." + Base64URL.encode(Array(claimsJSON))
        let signature = try (signer ?? key).signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// A good assertion issued at `now`, with `overriding` claims (nil removes one).
    func assertion(at now: Date, overriding: [String: Any?] = [:], kid: String? = nil) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": account.clientEmail, "scope": FCMAccessAssertion.scope, "aud": FCMAccessAssertion.audience,
            "iat": iat, "exp": iat + 3600,
        ]
        for (name, value) in overriding { claims[name] = value }
        return try jwt(header: ["alg": "RS256", "typ": "JWT", "kid": kid ?? account.keyID], claims: claims)
    }
}

/// The form body of a JWT-bearer grant.
func grantBody(_ assertion: String, grantType: String = TokenGrantVerifier.grantType) -> [UInt8] {
    let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
    let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text }
    return Array("grant_type=\(encode(grantType))&assertion=\(encode(assertion))".utf8)
}

/// A simulator on a fresh CA folder, shut down (and its folder removed) after `body`.
func withSimulator(
    configure: (inout FCMSimulatorConfiguration) -> Void = { _ in }, _ body: (FCMSimulator) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-sim-\(UUID().uuidString)").path
    var configuration = FCMSimulatorConfiguration(certificateDirectory: directory)
    configuration.seed = 7
    configure(&configuration)
    let simulator = try await FCMSimulator.start(
        configuration: configuration, group: MultiThreadedEventLoopGroup.singleton)
    do {
        try await body(simulator)
    } catch {
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
        throw error
    }
    try await simulator.shutdown()
    try? FileManager.default.removeItem(atPath: directory)
}

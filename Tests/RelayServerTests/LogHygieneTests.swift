import APNs
import Crypto
import Foundation
import Logging
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Synchronization
import Testing

extension RelayServerSuites {
    /// At trace level, the relay logs no secret: no credential, no master key, no private key, and no whole
    /// device token (a prefix at most).
    @Suite struct LogHygieneTests {
        @Test func traceLogsHoldNoSecretsAndNoWholeTokens() async throws {
            let lines = CapturedLines()
            var logger = Logger(label: "pushrelay") { _ in CapturingLogHandler(lines: lines) }
            logger.logLevel = .trace
            let signing = P256.Signing.PrivateKey()
            let pem = signing.pemRepresentation
            let key = try APNsSigningKey(privateKey: signing, keyID: "HYGIENEK01", teamID: "CIRCLTEAM1")
            let live = randomToken()
            let secrets = CapturedLines()
            try await RelayHarness.with(simulatorKeys: [key], logger: logger) { relay in
                try await relay.store.addSigningKey(
                    tenant: "circl", p8PEM: pem, keyID: "HYGIENEK01", teamID: "CIRCLTEAM1", masterKey: relay.masterKey
                )
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: live))
                _ = try await client.registerDevice(registration(user: "gone", token: RelayHarness.deadToken))
                let result = try await client.send(circlMessage(to: ["ada", "gone"]))
                #expect(result.outcomes.count == 2)
                #expect(result.outcomes.contains { $0.outcome == "dead_token" })
                await client.close()
                let wrong = "prk_" + String(repeating: "W", count: 43)
                let intruder = relay.client("circl", credential: wrong)
                let refused = await errorCode { try await intruder.ping() }
                #expect(refused == .authenticationFailed)
                await intruder.close()
                for secret in [relay.credentials["circl"]!, wrong, relay.masterKey.base64] { secrets.append(secret) }
            }
            let forbidden =
                secrets.all + [live, RelayHarness.deadToken, "BEGIN PRIVATE KEY", "BEGIN EC PRIVATE KEY"]
                + pemBodyLines(pem)
            let captured = lines.all
            #expect(captured.count > 10, "the scenario should have logged at trace level")
            for line in captured {
                for secret in forbidden where line.contains(secret) {
                    Issue.record("a log line holds a secret (\(secret.prefix(8))…): \(line)")
                }
            }
        }
    }
}

/// The base64 lines of a PEM's body, long enough to identify the key.
private func pemBodyLines(_ pem: String) -> [String] {
    pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 32 }
}

/// Every line logged through a ``CapturingLogHandler`` (or any strings a test collects from several tasks).
final class CapturedLines: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    var all: [String] {
        lines.withLock { $0 }
    }
}

/// A log handler that keeps each line, its message and all its metadata, as text.
struct CapturingLogHandler: LogHandler {
    let lines: CapturedLines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    func log(event: LogEvent) {
        var all = metadata
        if let explicit = event.metadata { all.merge(explicit) { _, new in new } }
        let rendered = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let error = event.error.map { " error=\(String(reflecting: $0))" } ?? ""
        lines.append("\(event.level) \(event.source) \(event.message) [\(rendered)]\(error)")
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}

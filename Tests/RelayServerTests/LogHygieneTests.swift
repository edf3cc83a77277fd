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
                // A backend that swapped its tenant and its secret: the secret is neither echoed nor logged.
                let swapped = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let answer = try #require(
                    await swapped.hello(tenant: relay.credentials["circl"]!, credential: "circl"))
                let error = try answer.decode(Pushrelay_V1_Error.self)
                #expect(error.code == .authenticationFailed)
                #expect(!error.message.contains(relay.credentials["circl"]!))
                await swapped.close()
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

extension RelayServerSuites {
    /// Log lines about a request carry its tenant, connection and request id (`c3/17`: connection and the
    /// frame's request id); lines about a job carry its id.
    @Suite struct StructuredLogTests {
        @Test func requestAndJobLinesCarryTheirIDs() async throws {
            let lines = CapturedLines()
            var logger = Logger(label: "pushrelay") { _ in CapturingLogHandler(lines: lines) }
            logger.logLevel = .debug
            try await RelayHarness.with(logger: logger) { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                let sent = try await client.send(circlMessage(to: ["ada"]))
                #expect(sent.job.delivered == 1)
                #expect(await errorCode { try await client.listDevices(userID: "") } == .invalidArgument)
                #expect(await errorCode { try await client.cancelJob(jobID: sent.jobID) } == nil)
                await client.close()
            }
            let entries = lines.entries
            let answered = entries.filter { $0.message == "request answered" }
            #expect(
                Set(answered.compactMap { $0.metadata["method"] })
                    == ["hello", "register_device", "send", "list_devices", "cancel_job", "goodbye"])
            #expect(answered.contains { $0.metadata["outcome"] == "INVALID_ARGUMENT" })
            let requestLines = entries.filter {
                ["request answered", "authenticated", "job accepted", "job cancel asked"].contains($0.message)
            }
            #expect(requestLines.count >= 7)
            for entry in requestLines {
                #expect(entry.metadata["tenant"] == "circl", "\(entry)")
                #expect(entry.metadata["connection"]?.hasPrefix("c") == true, "\(entry)")
                let request = entry.metadata["request"] ?? ""
                #expect(request.wholeMatch(of: /c[0-9]+\/[0-9]+/) != nil, "\(entry)")
            }
            let jobLines = entries.filter {
                ["job accepted", "job cancel asked", "job planned"].contains($0.message)
            }
            #expect(Set(jobLines.map(\.message)) == ["job accepted", "job cancel asked", "job planned"])
            for entry in jobLines {
                #expect(entry.metadata["job"] != nil, "\(entry)")
                #expect(entry.metadata["tenant"] == "circl", "\(entry)")
            }
        }
    }
}

/// The base64 lines of a PEM's body, long enough to identify the key.
func pemBodyLines(_ pem: String) -> [String] {
    pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 32 }
}

/// One line logged through a ``CapturingLogHandler``: its message and all its metadata as text.
struct CapturedEntry: Sendable {
    var message: String
    var metadata: [String: String]
}

/// Every line logged through a ``CapturingLogHandler`` (or any strings a test collects from several tasks).
final class CapturedLines: Sendable {
    private let lines = Mutex<[String]>([])
    private let structured = Mutex<[CapturedEntry]>([])

    func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    func append(_ entry: CapturedEntry) {
        structured.withLock { $0.append(entry) }
    }

    var all: [String] {
        lines.withLock { $0 }
    }

    /// The logged lines with their metadata, in the order they were logged.
    var entries: [CapturedEntry] {
        structured.withLock { $0 }
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
        lines.append(CapturedEntry(message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}

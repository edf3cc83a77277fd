import APNs
import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import RelayServer
import RelayStore
import Synchronization
import Testing

extension RelayServerSuites {
    /// The operators' HTTP port: health, readiness through its closure, the Prometheus exposition, 404.
    @Suite struct OperatorHTTPTests {
        @Test func healthzAnswersOk() async throws {
            try await withOperatorServer { port, group in
                let response = try await httpGet(port: port, path: "/healthz", group: group)
                #expect(response.status == 200)
                #expect(response.body == "ok\n")
            }
        }

        @Test func readyzFollowsTheReadinessCheck() async throws {
            let reason = SharedReason()
            try await withOperatorServer(readiness: { reason.value }) { port, group in
                let ready = try await httpGet(port: port, path: "/readyz", group: group)
                #expect(ready.status == 200)
                reason.value = "the database does not answer"
                let notReady = try await httpGet(port: port, path: "/readyz", group: group)
                #expect(notReady.status == 503)
                #expect(notReady.body.contains("not ready: the database does not answer"))
            }
        }

        @Test func readyzNamesItsWarningsAndStaysReady() async throws {
            let reason = SharedReason()
            let warnings = ["tenant dispo fcm: SENDER_ID_MISMATCH for 2 notifications since ..."]
            try await withOperatorServer(readiness: { reason.value }, warnings: { warnings }) { port, group in
                let ready = try await httpGet(port: port, path: "/readyz", group: group)
                #expect(ready.status == 200)
                #expect(ready.body == "ready\nwarning: \(warnings[0])\n")
                reason.value = "the database does not answer"
                let notReady = try await httpGet(port: port, path: "/readyz", group: group)
                #expect(notReady.status == 503)
                #expect(notReady.body == "not ready: the database does not answer\nwarning: \(warnings[0])\n")
            }
        }

        @Test func aTenantsPoolThatIsDownLeavesTheRelayReadyAndShowsInTheStatus() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                _ = try await client.send(circlMessage(to: ["ada"]))
                await client.close()
                let readiness = relay.readiness
                try await withOperatorServer(
                    readiness: { await readiness.notReadyReason() }, status: { await readiness.status().json() }
                ) { port, group in
                    #expect(try await httpGet(port: port, path: "/readyz", group: group).status == 200)
                    // APNs goes away for circl: delivery health, not readiness.
                    try await relay.simulator.shutdown()
                    _ = await eventually {
                        await readiness.status().tenants.first { $0.tenant == "circl" }?.environments
                            .first { $0.environment == "production" }?.state == "unreachable"
                    }
                    let ready = try await httpGet(port: port, path: "/readyz", group: group)
                    #expect(ready.status == 200)
                    let status = try await httpGet(port: port, path: "/status", group: group)
                    #expect(status.status == 200)
                    #expect(status.headers["content-type"] == "application/json")
                    let decoder = JSONDecoder()
                    decoder.keyDecodingStrategy = .convertFromSnakeCase
                    decoder.dateDecodingStrategy = .iso8601
                    let document = try decoder.decode(RelayStatus.self, from: Data(status.body.utf8))
                    #expect(document.ready)
                    let circl = try #require(document.tenants.first { $0.tenant == "circl" })
                    let production = try #require(circl.environments.first { $0.environment == "production" })
                    #expect(production.state == "unreachable")
                    #expect(production.keyProblem == nil)
                }
            }
        }

        @Test func aRelayWithoutTheMasterKeyItsTenantsNeedOrWithTheWrongOneIsNotReadyAndNamesThem() async throws {
            try await RelayHarness.with { relay in
                let signing = P256.Signing.PrivateKey()
                try await relay.store.addSigningKey(
                    tenant: "circl", p8PEM: signing.pemRepresentation, keyID: "LOCKEDKEY1", teamID: "CIRCLTEAM1",
                    masterKey: relay.masterKey)
                #expect(await relay.readiness.notReadyReason() == nil)
                let locked = PoolRegistry(
                    store: relay.store, masterKey: nil, target: APNsTarget(connectionsPerPool: 1), group: relay.group,
                    logger: quietLogger)
                let reason = try #require(await locked.sealedKeysProblem())
                #expect(reason.contains("no master key") && reason.contains("circl"))
                #expect(!reason.contains("argus"))
                let wrong = PoolRegistry(
                    store: relay.store, masterKey: MasterKey.generate(), target: APNsTarget(connectionsPerPool: 1),
                    group: relay.group, logger: quietLogger)
                let wrongReason = try #require(await wrong.sealedKeysProblem())
                #expect(wrongReason.contains("does not open") && wrongReason.contains("circl"))
            }
        }

        @Test func metricsExposeSwiftMetricsThroughTheRegistry() async throws {
            let registry = PrometheusCollectorRegistry()
            let factory = PrometheusMetricsFactory(registry: registry)
            Counter(
                label: "pushrelay_requests_total", dimensions: [("method", "send"), ("outcome", "ok")], factory: factory
            ).increment(by: 3)
            Metrics.Timer(label: "pushrelay_apns_latency_seconds", factory: factory).recordMilliseconds(12)
            try await withOperatorServer(registry: registry) { port, group in
                let response = try await httpGet(port: port, path: "/metrics", group: group)
                #expect(response.status == 200)
                #expect(response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
                #expect(response.body.contains(#"pushrelay_requests_total{method="send",outcome="ok"} 3"#))
                #expect(response.body.contains("pushrelay_apns_latency_seconds_count 1"))
            }
        }

        @Test func otherPathsAreNotFound() async throws {
            try await withOperatorServer { port, group in
                let response = try await httpGet(port: port, path: "/nothing-here", group: group)
                #expect(response.status == 404)
            }
        }
    }
}

/// A readiness reason tests change while the server runs.
private final class SharedReason: Sendable {
    private let reason = Mutex<String?>(nil)

    var value: String? {
        get { reason.withLock { $0 } }
        set { reason.withLock { $0 = newValue } }
    }
}

/// Runs `body` with an operator server on a free port of 127.0.0.1.
private func withOperatorServer(
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    readiness: @escaping OperatorHTTPServer.Readiness = { nil },
    warnings: @escaping OperatorHTTPServer.Warnings = { [] },
    status: @escaping OperatorHTTPServer.Status = { Array("{}".utf8) },
    _ body: (Int, any EventLoopGroup) async throws -> Void
) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let server = try await OperatorHTTPServer.start(
        host: "127.0.0.1", port: 0, registry: registry, readiness: readiness, warnings: warnings, status: status,
        group: group, logger: quietLogger
    )
    do {
        try await body(server.port, group)
    } catch {
        await server.shutdown()
        try await group.shutdownGracefully()
        throw error
    }
    await server.shutdown()
    try await group.shutdownGracefully()
}

/// An HTTP answer as a test reads it: status, headers by lowercased name, body as text.
struct HTTPAnswer {
    var status: Int
    var headers: [String: String]
    var body: String
}

/// Sends a hand-written `GET path HTTP/1.1` to 127.0.0.1:`port` and reads until the server closes.
func httpGet(port: Int, path: String, group: any EventLoopGroup) async throws -> HTTPAnswer {
    let channel = try await ClientBootstrap(group: group)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    var received = ByteBuffer()
    try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        for try await var chunk in inbound {
            received.writeBuffer(&chunk)
        }
    }
    let text = String(buffer: received)
    let parts = text.components(separatedBy: "\r\n\r\n")
    let lines = parts[0].components(separatedBy: "\r\n")
    let status = Int(lines[0].split(separator: " ")[1]) ?? 0
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return HTTPAnswer(status: status, headers: headers, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
}

import Foundation
import NIOCore
import PushRelayClient
import PushRelayProtocol
import RelayServer
import ServiceLifecycle
import Testing

extension RelayServerSuites {
    /// Graceful shutdown: GOODBYE on every connection, in-flight requests answered, nothing new taken.
    @Suite struct ShutdownTests {
        @Test func shutdownAnswersInFlightRequestsAfterGoodbye() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                let watcher = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await watcher.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                // APNs answers slowly, so the send is still in flight when the shutdown begins.
                relay.simulator.updateFaults { $0.latency = .seconds(3) }
                let send = Task { try await client.send(circlMessage(to: ["ada"])) }
                try await waitUntilAPNsHasTheRequest(relay)
                let shutdown = Task { await relay.listener.shutdown() }

                let goodbye = try #require(await watcher.next())
                #expect(goodbye.kind == .goodbye)
                #expect(goodbye.requestID == 0)
                #expect(await watcher.isClosedByRelay())
                let answer = try await send.value
                #expect(answer.job.delivered == 1, "\(answer)")
                await shutdown.value
                #expect(relay.listener.connectionCount == 0)
                // The listener is closed: a new connection is refused.
                let late = relay.client("circl")
                #expect(await errorCode { try await late.ping() } != nil)
                await watcher.close()
            }
        }

        @Test func aGracefulShutdownStopsTheRelaysPartsFromTheListenerToThePoolsAndFinishesTheSendInFlight()
            async throws
        {
            try await RelayHarness.with(
                configureRelay: { $0.operatorPort = ("127.0.0.1", 0, testMetricsRegistry) }, backgroundParts: true,
                runsParts: false
            ) { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                let watcher = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await watcher.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(relay.relay.operatorServer != nil)
                // The relay's own parts, as `serve` runs them.
                let stopped = CapturedLines()
                let parts = relay.relay.serviceGroup(stopped: { stopped.append($0) })
                let running = Task { try await parts.run() }
                relay.simulator.updateFaults { $0.latency = .seconds(3) }
                let send = Task { try await client.send(circlMessage(to: ["ada"])) }
                try await waitUntilAPNsHasTheRequest(relay)
                await parts.triggerGracefulShutdown()

                let goodbye = try #require(await watcher.next())
                #expect(goodbye.kind == .goodbye)
                // The listener stopped first, yet the fan-out still finished the send in flight and answered it.
                #expect(try await send.value.job.delivered == 1)
                try await running.value
                #expect(
                    stopped.all == [
                        "relay listener", "operator HTTP server", "fan-out worker", "metrics sampler", "node heartbeat",
                        "maintenance", "key-change follower", "APNs pools",
                    ])
                #expect(stopped.all == Relay.partOrder.reversed())
                #expect(relay.listener.connectionCount == 0)
                await watcher.close()
            }
        }

        /// Waits (up to 30 s) until the simulator has received the send's request: from then on the send is in
        /// flight, whatever the machine's load, and its answer comes after the simulator's latency.
        private func waitUntilAPNsHasTheRequest(_ relay: RelayHarness) async throws {
            _ = await eventually { relay.simulator.statistics().requestsReceived >= 1 }
            try #require(relay.simulator.statistics().requestsReceived == 1)
        }
    }
}

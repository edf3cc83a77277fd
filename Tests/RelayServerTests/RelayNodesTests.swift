import Foundation
import RelayServer
import RelayStore
import Testing

extension RelayServerSuites {
    /// Relays on one database count each other through their heartbeats in `relay_nodes`, and divide the
    /// tenants' rates by that count; a relay that stops removes its row.
    @Suite struct RelayNodesTests {
        @Test func heartbeatsCountTheLiveRelaysAndAStoppedRelayLeaves() async throws {
            try await RelayHarness.with { relay in
                #expect(try await relay.store.heartbeat(node: "a").liveRelays == 1)
                #expect(try await relay.store.heartbeat(node: "b").liveRelays == 2)
                #expect(try await relay.store.heartbeat(node: "a").liveRelays == 2)
                try await relay.store.removeNode("b")
                #expect(try await relay.store.heartbeat(node: "a").liveRelays == 1)

                // A relay's heartbeat loop: its share follows the count; when it stops, its row goes.
                #expect(try await relay.store.heartbeat(node: "b").liveRelays == 2)
                let share = RelayShare()
                let heartbeat = RelayHeartbeat(store: relay.store, logger: quietLogger)
                let beating = Task { await heartbeat.run(node: "c", every: .milliseconds(50), share: share) }
                let deadline = ContinuousClock.now + .seconds(30)
                while share.liveRelays != 3, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(share.liveRelays == 3)
                #expect(share.part(of: 500, tenant: "circl") == 166)
                beating.cancel()
                await beating.value
                #expect(try await relay.store.heartbeat(node: "a").liveRelays == 2)
            }
        }
    }
}

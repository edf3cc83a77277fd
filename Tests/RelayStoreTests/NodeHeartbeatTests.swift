import Foundation
import RelayStore
import Testing

@Suite("Relay heartbeats")
struct NodeHeartbeatTests {
    @Test("a heartbeat counts each tenant's leased pages: the asking relay's and every relay's")
    func leasedPages() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            for page in 0..<4 {
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: page, dueAt: Date(timeIntervalSinceNow: -1),
                    tokens: ["aa\(page)"], users: ["u\(page)"]
                )
            }
            #expect(try await store.heartbeat(node: "a") == NodeHeartbeat(liveRelays: 1, leasedPages: [:]))
            // a leases two pages, b one; the fourth stays pending.
            for owner in ["a", "a", "b"] {
                #expect(try await store.claimJobPage(owner: owner, lease: .seconds(30)) != nil)
            }
            #expect(
                try await store.heartbeat(node: "a")
                    == NodeHeartbeat(liveRelays: 1, leasedPages: ["circl": LeasedPages(mine: 2, all: 3)])
            )
            #expect(
                try await store.heartbeat(node: "b")
                    == NodeHeartbeat(liveRelays: 2, leasedPages: ["circl": LeasedPages(mine: 1, all: 3)])
            )
            #expect(try await store.heartbeat(node: "c").leasedPages == ["circl": LeasedPages(mine: 0, all: 3)])
        }
    }
}

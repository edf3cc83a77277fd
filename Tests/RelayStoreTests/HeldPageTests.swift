import Foundation
import RelayStore
import Testing

@Suite("Held pages")
struct HeldPageTests {
    @Test("a page holds its devices of one environment once, and a claim reads the hold back")
    func heldOnce() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            let hold = DeliveryHold(
                round: 1, since: instant(0),
                until: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded() + 3_600),
                reason: "connect_failed",
                environment: "production")
            let tokens = [deviceToken(1), deviceToken(2)]
            // The page that held them was claimed again (its sender stopped): the second hold writes nothing.
            for _ in 0..<2 {
                try await store.deferJobDevices(
                    jobID: job.id, tenant: "circl", dueAt: instant(0), tokens: tokens, users: ["ann", "bob"],
                    hold: hold, fromPage: 1)
            }
            // Another environment of the same page, and the held page's own next round, are pages of their own.
            var sandbox = hold
            sandbox.environment = "development"
            try await store.deferJobDevices(
                jobID: job.id, tenant: "circl", dueAt: instant(0), tokens: [deviceToken(3)], users: ["cat"],
                hold: sandbox, fromPage: 1)
            let pages = try await column(
                """
                SELECT held_from_page || ' ' || wait_environment || ' ' || cardinality(tokens) FROM job_pages
                WHERE job_id = '\(job.id)' ORDER BY page
                """, in: store)
            #expect(pages == ["1 production 2", "1 development 1"])
            let held = try await store.heldDeliveries()
            #expect(held.map(\.devices) == [1, 2] && held.map(\.reason) == ["connect_failed", "connect_failed"])
            #expect(try await store.heldDevices(tenant: "circl", jobID: job.id).devices == 3)
            let claimed = try #require(try await store.claimJobPage(owner: "loop", lease: .seconds(30)))
            #expect(claimed.hold == hold || claimed.hold == sandbox)
        }
    }
}

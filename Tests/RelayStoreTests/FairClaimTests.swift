import Foundation
import RelayStore
import Testing

@Suite("Fair claims")
struct FairClaimTests {
    /// Writes pages `pages` of a new job of `tenant`, due at `due`, of one device each.
    private func job(_ tenant: String, pages: ClosedRange<Int>, due: Date, in store: RelayStore) async throws -> String
    {
        let job = try await store.createJob(
            tenant: tenant, notificationType: "message", idempotencyKey: nil, request: []
        ).job
        for page in pages {
            try await store.addJobPage(
                jobID: job.id, tenant: tenant, page: page, dueAt: due, tokens: [deviceToken(page)], users: ["u\(page)"])
        }
        return job.id
    }

    @Test("two tenants, one with a backlog: once it was served, the other's due page goes next")
    func otherTenantNext() async throws {
        try await withTenantStore { store in
            let backlog = try await job("circl", pages: 2...11, due: instant(0), in: store)
            let single = try await job("familyportal", pages: 2...2, due: instant(30), in: store)
            // Nobody served yet: by due time, circl's backlog first.
            let first = try #require(try await store.claimJobPage(owner: "loop", lease: .seconds(30)))
            #expect(first.jobID == backlog && first.page == 2)
            // circl was served: familyportal's page goes next, though circl's pages fell due 30 s earlier.
            let served = PageClaimOrder(tenants: ["circl"])
            let next = try #require(try await store.claimJobPage(owner: "loop", lease: .seconds(30), order: served))
            #expect(next.jobID == single && next.tenantID == "familyportal")
            // familyportal served less than circl, but it has nothing due: circl's backlog goes on in order.
            let after = try await store.claimJobPage(
                owner: "loop", lease: .seconds(30), order: PageClaimOrder(tenants: ["familyportal", "circl"]))
            #expect(after?.jobID == backlog && after?.page == 3)
            // A tenant left out (its sends wait on its rate already) gets no page: nothing else is due.
            #expect(
                try await store.claimJobPage(
                    owner: "loop", lease: .seconds(30), order: PageClaimOrder(excluded: ["circl"])) == nil)
        }
    }

    @Test("a job's opening page goes before its tenant's other pages; the opening lane takes only those")
    func openingPagesFirst() async throws {
        try await withTenantStore { store in
            let large = try await job("circl", pages: 2...9, due: instant(0), in: store)
            let lane = PageClaimOrder(openingPagesOnly: true)
            #expect(try await store.claimJobPage(owner: "lane", lease: .seconds(30), order: lane) == nil)
            let small = try await job("circl", pages: 1...1, due: instant(60), in: store)
            let opening = try #require(try await store.claimJobPage(owner: "loop", lease: .seconds(30)))
            #expect(opening.jobID == small && opening.page == 1)
            let next = try #require(try await store.claimJobPage(owner: "loop", lease: .seconds(30)))
            #expect(next.jobID == large && next.page == 2)
        }
    }

    @Test("planners take the jobs of the tenant served least first")
    func planningOrder() async throws {
        try await withTenantStore { store in
            let older = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            let newer = try await store.createJob(
                tenant: "familyportal", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            let first = try await store.claimJobForPlanning(owner: "p", lease: .seconds(30), tenants: ["circl"])
            #expect(first?.id == newer.id)
            let second = try await store.claimJobForPlanning(owner: "p", lease: .seconds(30), tenants: ["circl"])
            #expect(second?.id == older.id)
        }
    }
}

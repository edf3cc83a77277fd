import Foundation
import PostgresNIO
import Testing

@testable import RelayStore

@Suite("Job lookups")
struct JobLookupTests {
    @Test("a job is read by its primary key, one row, though the statistics say its tenant has no jobs")
    func readByPrimaryKeyWhateverTheStatistics() async throws {
        try await withTenantStore { store in
            for _ in 0..<20 {
                _ = try await store.createJob(
                    tenant: "familyportal", notificationType: "chat_message", idempotencyKey: nil, request: [])
            }
            // The statistics are taken before circl's backlog, as autovacuum would have.
            try await execute("ANALYZE jobs", in: store)
            var last = ""
            for _ in 0..<400 {
                last = try await store.createJob(
                    tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
                ).job.id
            }
            let id = try #require(UUID(uuidString: last))
            let plan = try await scans(of: RelayStore.jobQuery(tenant: "circl", id: id), in: store)
            #expect(plan.count == 1)
            #expect(plan.allSatisfy { $0.1 == "jobs_pkey" && $0.2 == 1 }, "\(plan)")
            // The tenant is still checked: another tenant's id is no job.
            #expect(try await store.job(tenant: "familyportal", id: last) == nil)
            #expect(try await store.job(tenant: "circl", id: last)?.id == last)
        }
    }

    @Test("the jobs still due are those whose progress shows neither finished nor only later pages, of that tenant")
    func jobsStillDueAgreeWithProgress() async throws {
        try await withTenantStore { store in
            /// A job of `tenant`, planned into pages due at `due` (none: left unplanned).
            func job(_ tenant: String = "circl", pagesDue due: [Date]?) async throws -> String {
                let job = try await store.createJob(
                    tenant: tenant, notificationType: tenant == "circl" ? "message" : "chat_message",
                    idempotencyKey: nil, request: []
                ).job
                guard let due else { return job.id }
                #expect(try await store.claimJobForPlanning(owner: "planner", lease: .seconds(30))?.id == job.id)
                for (page, dueAt) in due.enumerated() {
                    try await store.addJobPage(
                        jobID: job.id, tenant: tenant, page: page + 1, dueAt: dueAt, tokens: ["aa\(page)"],
                        users: ["u\(page)"])
                }
                #expect(try await store.finishPlanning(jobID: job.id, owner: "planner"))
                return job.id
            }
            let now = Date(timeIntervalSinceNow: -1)
            let later = Date(timeIntervalSinceNow: 3_600)
            let dueNow = try await job(pagesDue: [now])
            let onlyLater = try await job(pagesDue: [later])
            let dueAndLater = try await job(pagesDue: [now, later])
            let cancelled = try await job(pagesDue: [now])
            _ = try await store.cancelJob(tenant: "circl", id: cancelled)
            let sent = try await job(pagesDue: [now])
            let page = try #require(try await store.claimJobPage(owner: "relay", lease: .seconds(30)))
            #expect(page.jobID == dueNow)
            let sentPage = try #require(try await store.claimJobPage(owner: "relay", lease: .seconds(30)))
            #expect(sentPage.jobID == dueAndLater || sentPage.jobID == sent)
            try await store.completeJobPage(sentPage, owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1))
            // Left unplanned, made last: a planner claims the oldest job.
            let unplanned = try await job(pagesDue: nil)
            let otherTenants = try await job("familyportal", pagesDue: nil)

            let circl = [unplanned, dueNow, onlyLater, dueAndLater, cancelled, sent]
            let due = try await store.jobsStillDue(tenant: "circl", ids: circl + [otherTenants, "not-a-uuid"])
            for id in circl {
                let progress = try #require(try await store.jobProgress(tenant: "circl", id: id))
                let waited =
                    !(progress.job.state.isFinished
                    || (progress.planned && progress.pagesDue == 0 && progress.pagesLater > 0))
                #expect(due.contains(id) == waited, "job \(id): \(progress)")
            }
            #expect(due.contains(unplanned) && due.contains(dueNow) && !due.contains(onlyLater))
            #expect(!due.contains(cancelled) && !due.contains(otherTenants))
            #expect(try await store.jobsStillDue(tenant: "familyportal", ids: [otherTenants]) == [otherTenants])
            #expect(try await store.jobsStillDue(tenant: "circl", ids: []) == [])
        }
    }
}

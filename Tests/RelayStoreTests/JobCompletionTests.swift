import Foundation
import RelayStore
import Testing

@Suite("Completing jobs")
struct JobCompletionTests {
    @Test("a job whose pages are all done but whose completion was cut short is completed with their sums")
    func cutShortCompletionsAreMadeUp() async throws {
        try await withTenantStore { store in
            /// A job planned into `pages` pending pages of one device each.
            func plannedJob(pages: Int) async throws -> JobRecord {
                let job = try await store.createJob(
                    tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
                ).job
                #expect(try await store.claimJobForPlanning(owner: "planner", lease: .seconds(30))?.id == job.id)
                for page in 1...pages {
                    try await store.addJobPage(
                        jobID: job.id, tenant: "circl", page: page, dueAt: Date(timeIntervalSinceNow: -1),
                        tokens: ["aa\(page)"], users: ["u\(page)"]
                    )
                }
                #expect(try await store.finishPlanning(jobID: job.id, owner: "planner"))
                return job
            }
            let cutShort = try await plannedJob(pages: 2)
            var claimed: [JobPage] = []
            for _ in 1...2 {
                claimed.append(try #require(try await store.claimJobPage(owner: "relay", lease: .seconds(30))))
            }
            let first = try #require(claimed.first { $0.page == 1 })
            try await store.completeJobPage(first, owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1))
            // The second page's own update ran, the job's did not (the relay gave up at the call deadline).
            try await execute(
                """
                UPDATE job_pages SET state = 'done', lease_owner = NULL, lease_until = NULL, devices = 1, failed = 1
                WHERE job_id = '\(cutShort.id)' AND page = 2
                """,
                in: store
            )
            let stillSending = try await plannedJob(pages: 1)
            #expect(try await store.job(tenant: "circl", id: cutShort.id)?.state == .running)

            #expect(try await store.completeFinishedJobs() == 1)
            let completed = try #require(try await store.job(tenant: "circl", id: cutShort.id))
            #expect(completed.state == .completed)
            #expect(completed.devices == 2)
            #expect(completed.delivered == 1)
            #expect(completed.failed == 1)
            #expect(try await store.job(tenant: "circl", id: stillSending.id)?.state == .running)
            #expect(try await store.completeFinishedJobs() == 0)
        }
    }
}

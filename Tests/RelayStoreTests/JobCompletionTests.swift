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

    @Test("the last page's completion completes the job with every page's counts; two last pages at once, once")
    func lastPageCompletesTheJob() async throws {
        try await withTenantStore { store in
            /// A job planned into page 0 (two recipients without a device) and `pages` pages of one device each,
            /// all claimed by "relay".
            func plannedJob(pages: Int) async throws -> (JobRecord, [JobPage]) {
                let job = try await store.createJob(
                    tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
                ).job
                #expect(try await store.claimJobForPlanning(owner: "planner", lease: .seconds(30))?.id == job.id)
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: 0, dueAt: Date(), tokens: [], users: [], skipped: 2,
                    done: true)
                var leased: [JobPage] = []
                for page in 1...pages {
                    leased.append(
                        try #require(
                            try await store.addJobPage(
                                jobID: job.id, tenant: "circl", page: page, dueAt: Date(timeIntervalSinceNow: -1),
                                tokens: ["ab\(page)"], users: ["u\(page)"], leasedTo: "relay"
                            )))
                }
                #expect(try await store.finishPlanning(jobID: job.id, owner: "planner"))
                return (job, leased)
            }
            func row(_ job: JobRecord, _ page: Int, _ outcome: DeliveryOutcome) -> DeliveryRecord {
                DeliveryRecord(
                    tenantID: "circl", jobID: job.id, userID: "u\(page)", token: "ab\(page)", outcome: outcome,
                    attempt: 1, sentAt: Date())
            }
            let (job, pages) = try await plannedJob(pages: 3)
            try await store.completeJobPage(pages[0], owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1))
            try await store.completeJobPage(
                pages[1], owner: "relay", counts: JobPageCounts(devices: 1, failed: 1),
                lastRows: [row(job, 2, .retryLater)])
            #expect(try await store.job(tenant: "circl", id: job.id)?.state == .running)
            try await store.completeJobPage(
                pages[2], owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1),
                lastRows: [row(job, 3, .delivered)])
            let completed = try #require(try await store.job(tenant: "circl", id: job.id))
            #expect(completed.state == .completed)
            #expect(completed.finishedAt != nil)
            let counts: [Int] = [completed.devices, completed.delivered, completed.failed, completed.skipped]
            #expect(counts == [3, 2, 1, 2])

            // A page no longer leased to the caller neither changes nor completes anything.
            let (other, otherPages) = try await plannedJob(pages: 2)
            try await store.completeJobPage(otherPages[0], owner: "relay", counts: JobPageCounts(devices: 1))
            try await store.completeJobPage(otherPages[1], owner: "someone else", counts: JobPageCounts(devices: 1))
            #expect(try await store.job(tenant: "circl", id: other.id)?.state == .running)

            // Two last pages finishing at the same moment: the job is completed once, with both pages' counts.
            for _ in 0..<5 {
                let (pair, pairPages) = try await plannedJob(pages: 2)
                async let first: Void = store.completeJobPage(
                    pairPages[0], owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1),
                    lastRows: [row(pair, 1, .delivered)])
                async let second: Void = store.completeJobPage(
                    pairPages[1], owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1),
                    lastRows: [row(pair, 2, .delivered)])
                _ = try await (first, second)
                let both = try #require(try await store.job(tenant: "circl", id: pair.id))
                #expect(both.state == .completed)
                let counts: [Int] = [both.devices, both.delivered, both.skipped]
                #expect(counts == [2, 2, 2])
            }
        }
    }

    @Test("a planner renewing its planning lease keeps the job past the first lease; only the owner renews")
    func planningLeaseRenewed() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: [], sendAt: nil,
                plannedBy: "relay-a", planningLease: .seconds(1)
            ).job
            #expect(try await store.renewPlanningLease(jobID: job.id, owner: "relay-b", lease: .seconds(30)) == false)
            #expect(try await store.renewPlanningLease(jobID: job.id, owner: "relay-a", lease: .seconds(30)))
            // The first lease (1 s) has run out; the renewed one has not: nobody else takes the job.
            try await Task.sleep(for: .milliseconds(1_500))
            #expect(try await store.claimJobForPlanning(owner: "relay-b", lease: .seconds(30)) == nil)
            #expect(try await store.finishPlanning(jobID: job.id, owner: "relay-a"))
            // A planned job's lease is not renewed any more.
            #expect(try await store.renewPlanningLease(jobID: job.id, owner: "relay-a", lease: .seconds(30)) == false)
        }
    }

    @Test("a job accepted leased to a planner is planned by it without a claim; one for later is not leased")
    func acceptedLeasedToPlanner() async throws {
        try await withTenantStore { store in
            func accept(sendAt: Date? = nil) async throws -> JobRecord {
                try await store.createJob(
                    tenant: "circl", notificationType: "message", idempotencyKey: nil, request: [], sendAt: sendAt,
                    plannedBy: "relay-a", planningLease: .seconds(30)
                ).job
            }
            let planned = try await accept()
            #expect(planned.state == .accepted)
            // Leased to relay-a: nobody else claims it, and relay-a plans it with no claim of its own.
            #expect(try await store.claimJobForPlanning(owner: "relay-b", lease: .seconds(30)) == nil)
            #expect(try await store.finishPlanning(jobID: planned.id, owner: "relay-a"))
            // Released (relay-a stopping before it planned it): any planner claims it at once.
            let released = try await accept()
            #expect(try await store.releasePlanning(jobID: released.id, owner: "relay-b") == false)
            #expect(try await store.releasePlanning(jobID: released.id, owner: "relay-a"))
            #expect(try await store.claimJobForPlanning(owner: "relay-b", lease: .seconds(30))?.id == released.id)
            #expect(try await store.finishPlanning(jobID: released.id, owner: "relay-a") == false)
            #expect(try await store.finishPlanning(jobID: released.id, owner: "relay-b"))
            // A job for later is not leased: once due, any planner claims it.
            // Three seconds ahead: the insert commits well before then, on a loaded machine too.
            let due = Date(timeIntervalSinceNow: 3)
            let later = try await accept(sendAt: due)
            #expect(later.state == .scheduled)
            try await Task.sleep(for: .milliseconds(max(0, Int(due.timeIntervalSinceNow * 1000)) + 200))
            #expect(try await store.claimJobForPlanning(owner: "relay-b", lease: .seconds(30))?.id == later.id)
        }
    }

    @Test(
        "a page's last rows are written by its completion; a page leased to another owner keeps its lease, its rows written"
    )
    func lastRowsAreWrittenWithTheCompletion() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            _ = try await store.claimJobForPlanning(owner: "planner", lease: .seconds(30))
            for page in 1...2 {
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: page, dueAt: Date(timeIntervalSinceNow: -1),
                    tokens: [deviceToken(page)], users: ["u\(page)"]
                )
            }
            #expect(try await store.finishPlanning(jobID: job.id, owner: "planner"))
            var pages: [Int: JobPage] = [:]
            for _ in 1...2 {
                let page = try #require(try await store.claimJobPage(owner: "relay", lease: .seconds(30)))
                pages[page.page] = page
            }
            func row(_ device: Int, sentAt: Date = Date()) -> DeliveryRecord {
                DeliveryRecord(
                    tenantID: "circl", jobID: job.id, userID: "u\(device)", token: deviceToken(device),
                    outcome: .delivered, sentAt: sentAt, answeredAt: sentAt, notificationType: "message")
            }
            func recorded(_ devices: [Int]) async throws -> [String: DeliveryOutcome] {
                try await store.recordedOutcomes(tenant: "circl", jobID: job.id, tokens: devices.map(deviceToken))
            }

            // Page 1 done with its two last rows, in one call; page 2 still leased: the job runs on.
            try await store.completeJobPage(
                try #require(pages[1]), owner: "relay", counts: JobPageCounts(devices: 2, delivered: 2),
                lastRows: [row(1), row(11)])
            #expect(try await recorded([1, 11]) == [deviceToken(1): .delivered, deviceToken(11): .delivered])
            // A device deferred by quiet hours has a row, but no outcome yet: its send is still to come.
            var deferred = row(12)
            (deferred.outcome, deferred.reason, deferred.answeredAt) = (.deferred, "quiet_hours", nil)
            try await store.recordDeliveries([deferred])
            #expect(try await recorded([12]).isEmpty)
            #expect(try await store.job(tenant: "circl", id: job.id)?.state == .running)

            // Page 2 was taken over meanwhile: its row (dated in a day without a partition yet) is written, the
            // page stays the other owner's, and the job is not completed.
            try await execute(
                "UPDATE job_pages SET lease_owner = 'other' WHERE job_id = '\(job.id)' AND page = 2", in: store)
            let later = Date(timeIntervalSinceNow: 40 * 86_400)
            try await store.completeJobPage(
                try #require(pages[2]), owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1),
                lastRows: [row(2, sentAt: later)])
            #expect(try await recorded([2]) == [deviceToken(2): .delivered])
            #expect(try await store.job(tenant: "circl", id: job.id)?.state == .running)

            // Its owner completes it: the job is completed with both pages' counts.
            try await execute(
                "UPDATE job_pages SET lease_owner = 'relay' WHERE job_id = '\(job.id)' AND page = 2", in: store)
            try await store.completeJobPage(
                try #require(pages[2]), owner: "relay", counts: JobPageCounts(devices: 1, delivered: 1))
            let completed = try #require(try await store.job(tenant: "circl", id: job.id))
            #expect(completed.state == .completed)
            #expect(completed.devices == 3)
            #expect(completed.delivered == 3)
        }
    }

    @Test("a page of listed devices written leased to its planner's process is claimed once, by it, and completes")
    func listedPageWrittenLeased() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            let leased = try #require(
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: 1, dueAt: Date(timeIntervalSinceNow: -1),
                    tokens: ["aa1", "aa2"],
                    users: ["u1", "u2"], leasedTo: "relay"))
            #expect(leased.jobID == job.id && leased.page == 1 && leased.claims == 1 && leased.topicRange == nil)
            #expect(leased.tokens == ["aa1", "aa2"] && leased.users == ["u1", "u2"])
            #expect(
                try await column(
                    "SELECT state || ' ' || lease_owner || ' ' || claims FROM job_pages WHERE job_id = '\(job.id)'",
                    in: store) == ["leased relay 1"])
            // No other loop claims it while its lease runs; written again (a planner taking over), it is not
            // leased again; unleased, a page comes back as nothing.
            #expect(try await store.claimJobPage(owner: "other", lease: .seconds(30)) == nil)
            #expect(
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: 1, dueAt: Date(), tokens: ["aa1"], users: ["u1"],
                    leasedTo: "relay") == nil)
            #expect(
                try await store.addJobPage(
                    jobID: job.id, tenant: "circl", page: 2, dueAt: Date(), tokens: ["aa3"], users: ["u3"]) == nil)
            try await store.completeJobPage(leased, owner: "relay", counts: JobPageCounts(devices: 2, delivered: 2))
            #expect(
                try await column("SELECT state FROM job_pages WHERE job_id = '\(job.id)' ORDER BY page", in: store)
                    == ["done", "pending"])
        }
    }
}

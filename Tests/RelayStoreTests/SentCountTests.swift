import Foundation
import RelayStore
import Testing

@Suite("Sent counts for per-user caps")
struct SentCountTests {
    /// A delivery row of `type` to `user`, sent `secondsAgo` before `instant()`.
    private func row(
        _ user: String,
        job: String,
        type: String?,
        secondsAgo: Int,
        outcome: DeliveryOutcome = .delivered,
        tenant: String = "circl",
        device: Int = 1
    ) -> DeliveryRecord {
        DeliveryRecord(
            tenantID: tenant, jobID: job, userID: user, token: deviceToken(device), outcome: outcome,
            sentAt: instant(-secondsAgo), notificationType: type)
    }

    @Test("delivered notifications of one type per user at a cap, in the rolling hour and day, each job counted once")
    func counts() async throws {
        try await withTenantStore { store in
            let records = [
                // u1: job a on two devices 10 minutes ago (one notification), b 2 h ago, c just inside the day,
                // e exactly an hour ago (in the day, no longer in the hour).
                row("u1", job: "a", type: "announcement", secondsAgo: 600),
                row("u1", job: "a", type: "announcement", secondsAgo: 601, device: 2),
                row("u1", job: "b", type: "announcement", secondsAgo: 7_200),
                row("u1", job: "c", type: "announcement", secondsAgo: 86_399),
                row("u1", job: "e", type: "announcement", secondsAgo: 3_600),
                // Not counted: older than a day, not delivered, another type, no type (before migration 5),
                // another tenant.
                row("u1", job: "d", type: "announcement", secondsAgo: 86_400),
                row("u1", job: "f", type: "announcement", secondsAgo: 60, outcome: .skipped),
                row("u1", job: "g", type: "announcement", secondsAgo: 60, outcome: .tokenDead),
                row("u1", job: "h", type: "message", secondsAgo: 60),
                row("u1", job: "i", type: nil, secondsAgo: 60),
                row("u1", job: "j", type: "announcement", secondsAgo: 60, tenant: "familyportal"),
                // u2: one in the hour, one dated half an hour ahead (another relay's clock) that counts, one
                // two hours ahead that does not yet; u5 was not asked about.
                row("u2", job: "a", type: "announcement", secondsAgo: 1_800),
                row("u2", job: "k", type: "announcement", secondsAgo: -1_800),
                row("u2", job: "l", type: "announcement", secondsAgo: -7_200),
                row("u5", job: "a", type: "announcement", secondsAgo: 1_800),
            ]
            try await store.recordDeliveries(records)
            func counts(
                _ users: [String], hour: Int? = nil, day: Int? = nil, type: String = "announcement", at seconds: Int = 0
            ) async throws -> [String: SentCount] {
                try await store.userPolicy(
                    tenant: "circl", users: users,
                    reading: .init(
                        preferences: false, mutes: false, presence: false,
                        cap: (type, .init(maxPerHour: hour, maxPerDay: day))),
                    now: instant(seconds)
                ).sentCounts
            }
            // u1 reaches 4 a day, u2 2 an hour.
            #expect(
                try await counts(["u1", "u2", "u3"], hour: 2, day: 4)
                    == ["u1": SentCount(lastHour: 1, lastDay: 4), "u2": SentCount(lastHour: 2, lastDay: 2)])
            // Below the caps, nobody is returned; u1's five rows are four notifications (job a on two devices).
            #expect(try await counts(["u1", "u2", "u3"], hour: 3, day: 5) == [:])
            #expect(try await counts(["u1", "u2"], hour: 2) == ["u2": SentCount(lastHour: 2, lastDay: 2)])
            #expect(
                try await counts(["u1", "u2"], day: 2) == [
                    "u1": SentCount(lastHour: 1, lastDay: 4), "u2": SentCount(lastHour: 2, lastDay: 2),
                ])

            // Two hours later u1's hour is empty and job c has left the day; u2's job l is now in both.
            #expect(
                try await counts(["u1", "u2"], hour: 1, day: 3, at: 7_200)
                    == ["u1": SentCount(lastHour: 0, lastDay: 3), "u2": SentCount(lastHour: 1, lastDay: 3)])

            #expect(try await counts([], hour: 1, day: 1) == [:])
            #expect(try await counts(["u1"], hour: 1, day: 1, type: "digest") == [:])
            // No cap: nothing to count.
            #expect(try await counts(["u1", "u2"]) == [:])
        }
    }

    @Test("a user counted below the cap is counted again only once the jobs of the type since could reach the cap")
    func knownCounts() async throws {
        try await withTenantStore { store in
            func newJob(_ type: String = "announcement") async throws -> JobRecord {
                try await store.createJob(tenant: "circl", notificationType: type, idempotencyKey: nil, request: []).job
            }
            // A page of at least `boundedCountUsers` users: the others have no rows.
            let others = (1...RelayStore.boundedCountUsers).map { "other\($0)" }
            /// Reads `users` and the others, knowing the counts `known` of some of them as of `epoch`.
            func read(
                _ users: [String], known: [String: Int] = [:], epoch: RowCountEpoch? = nil
            ) async throws -> UserPolicyRows {
                let all = users + others
                return try await store.userPolicy(
                    tenant: "circl", users: all,
                    reading: .init(
                        preferences: false, mutes: false, presence: false,
                        cap: ("announcement", .init(maxPerHour: 4)),
                        known: epoch.map { KnownRowCounts(rows: all.map { known[$0] ?? -1 }, epoch: $0) }),
                    now: instant(0))
            }
            // One job of the type is open (accepted, not planned) when u1 and u2 are counted.
            let open = try await newJob()
            try await store.recordDeliveries([row("u1", job: "a", type: "announcement", secondsAgo: 60)])
            // A read of fewer users counts them all and has no epoch.
            let few = try await store.userPolicy(
                tenant: "circl", users: ["u1", "u2"],
                reading: .init(
                    preferences: false, mutes: false, presence: false, cap: ("announcement", .init(maxPerHour: 1))),
                now: instant(0))
            #expect(few.epoch == nil && few.sentCounts == ["u1": SentCount(lastHour: 1, lastDay: 1)])
            let first = try await read(["u1", "u2"])
            #expect(first.countedRows == ["u1": 1] && first.sentCounts.isEmpty)
            let epoch = try #require(first.epoch)
            #expect(epoch.openJobs == 1)
            // u2 was counted with none. (Its row of job b, written after the count by no job the bound knows of,
            // shows which users a read counts again: it could not happen.)
            let known = ["u1": 1, "u2": 0]
            try await store.recordDeliveries([
                row("u2", job: "b", type: "announcement", secondsAgo: 60),
                row("u3", job: "a", type: "announcement", secondsAgo: 60),
            ])

            // Nothing inserted since: u1's 1 + 1 open job < 4 and u2's 0 + 1, not counted again; u3, never counted,
            // is.
            #expect(try await read(["u1", "u2", "u3"], known: known, epoch: epoch).countedRows == ["u3": 1])
            // Two jobs of the type since (and one of another type, which does not count): u1's 1 + 1 + 2 reaches 4
            // and is counted again, u2's 0 + 1 + 2 is not.
            let later = [try await newJob(), try await newJob()]
            _ = try await newJob("message")
            try await store.recordDeliveries(
                [open, later[0], later[1]].map { row("u1", job: $0.id, type: "announcement", secondsAgo: 30) })
            let third = try await read(["u1", "u2"], known: known, epoch: epoch)
            #expect(third.countedRows == ["u1": 4])
            #expect(third.sentCounts == ["u1": SentCount(lastHour: 4, lastDay: 4)])
            // Known counts go with the read's users one for one: another number is refused, not guessed at.
            await #expect {
                try await store.userPolicy(
                    tenant: "circl", users: ["u1", "u2"] + others,
                    reading: .init(
                        preferences: false, mutes: false, presence: false,
                        cap: ("announcement", .init(maxPerHour: 4)), known: KnownRowCounts(rows: [1, 0], epoch: epoch)),
                    now: instant(0))
            } throws: { error in
                guard (error as? RelayStoreError)?.code == .invalidArgument else { return false }
                return true
            }
        }
    }

    @Test("a job cancelled while a page of it is being sent is open: it may still record rows")
    func cancelledJobWithPageLeasedIsOpen() async throws {
        try await withTenantStore { store in
            func openJobs() async throws -> Int? {
                try await store.userPolicy(
                    tenant: "circl", users: (0...RelayStore.boundedCountUsers).map { "u\($0)" },
                    reading: .init(
                        preferences: false, mutes: false, presence: false,
                        cap: ("announcement", .init(maxPerDay: 10))),
                    now: instant(0)
                ).epoch?.openJobs
            }
            let job = try await store.createJob(
                tenant: "circl", notificationType: "announcement", idempotencyKey: nil, request: []
            ).job
            #expect(try await openJobs() == 1)
            #expect(try await store.claimJobForPlanning(owner: "planner", lease: .seconds(30))?.id == job.id)
            try await store.addJobPage(
                jobID: job.id, tenant: "circl", page: 1, dueAt: Date(timeIntervalSinceNow: -1), tokens: ["aa"],
                users: ["u1"])
            try await store.finishPlanning(jobID: job.id, owner: "planner")
            #expect(try await store.claimJobPage(owner: "sender", lease: .seconds(30)) != nil)
            #expect(try await store.cancelJob(tenant: "circl", id: job.id)?.state == .cancelled)
            #expect(try await openJobs() == 1)
        }
    }
}

import Foundation
import RelayStore
import Testing

/// The partition name of the UTC day of `date`.
func partitionName(_ date: Date) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let parts = calendar.dateComponents([.year, .month, .day], from: date)
    return String(format: "deliveries_p%04d%02d%02d", parts.year!, parts.month!, parts.day!)
}

@Suite("Maintenance")
struct MaintenanceTests {
    @Test("maintain keeps partitions ahead, applies the retention, clears old keys and ended mutes and presence")
    func maintain() async throws {
        try await withTenantStore { store in
            let now = Date()
            let day: TimeInterval = 86_400
            try await store.ensureDeliveryPartitions(
                around: now.addingTimeInterval(-40 * day), daysAhead: 0, daysBehind: 0)
            try await store.ensureDeliveryPartitions(
                around: now.addingTimeInterval(-10 * day), daysAhead: 0, daysBehind: 0)

            // Jobs: an old key, a fresh key, and finished jobs on either side of the retention.
            let oldKey = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "old", request: []
            ).job
            try await backdate(job: oldKey.id, hours: 25, in: store)
            let freshKey = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "fresh", request: []
            ).job
            var finished: [String] = []
            for _ in 0..<2 {
                let job = try await store.createJob(
                    tenant: "anky", notificationType: "daily_prompt", idempotencyKey: nil, request: []
                ).job
                try await store.updateJob(
                    tenant: "anky", id: job.id, state: .completed, devices: 1, delivered: 1, failed: 0, skipped: 0)
                finished.append(job.id)
            }
            try await execute(
                "UPDATE jobs SET finished_at = now() - interval '40 days' WHERE id = '\(finished[0])'", in: store)
            try await execute(
                "UPDATE jobs SET finished_at = now() - interval '10 days' WHERE id = '\(finished[1])'", in: store)
            let unfinished = try await store.createJob(
                tenant: "anky", notificationType: "daily_prompt", idempotencyKey: nil, request: []
            ).job
            try await backdate(job: unfinished.id, hours: 24 * 40, in: store)

            try await store.setMute(
                tenant: "circl", user: "u1", threadID: "ended", scope: nil, until: now.addingTimeInterval(-1))
            try await store.setMute(
                tenant: "circl", user: "u1", threadID: "later", scope: nil, until: now.addingTimeInterval(60))
            try await store.setMute(tenant: "circl", user: "u1", threadID: nil, scope: "forever")
            try await store.setPresence(
                tenant: "circl", user: "u1", threadID: "left", until: now.addingTimeInterval(-1))
            try await store.setPresence(
                tenant: "circl", user: "u1", threadID: "here", until: now.addingTimeInterval(60))
            try await store.deactivateDevice(
                tenant: "circl", token: deviceToken(1), appleTimestamp: now.addingTimeInterval(-40 * day))
            try await store.deactivateDevice(
                tenant: "circl", token: deviceToken(2), appleTimestamp: now.addingTimeInterval(-1 * day))

            // Token-user pairs: one no device has held for 40 days, one for 10 days, one a device holds.
            for (index, user) in ["gone", "recent", "kept"].enumerated() {
                try await store.registerDevice(
                    tenant: "argus", registration: DeviceRegistration(userID: user, token: deviceToken(100 + index)),
                    at: now)
            }
            try await store.unregisterDevice(tenant: "argus", token: deviceToken(100))
            try await store.unregisterDevice(tenant: "argus", token: deviceToken(101))
            for (user, days) in [("gone", 40), ("recent", 10), ("kept", 40)] {
                try await execute(
                    "UPDATE token_users SET seen_at = now() - interval '\(days) days' WHERE user_id = '\(user)'",
                    in: store)
            }

            let report = try await store.maintain(retentionDays: 30, now: now)
            #expect(report.createdPartitions == (0...2).map { partitionName(now.addingTimeInterval(Double($0) * day)) })
            #expect(report.droppedPartitions == [partitionName(now.addingTimeInterval(-40 * day))])
            #expect(report.clearedIdempotencyKeys == 1)
            #expect(report.deletedJobs == 1)
            #expect(report.deletedMutes == 1)
            #expect(report.deletedPresence == 1)
            #expect(report.deletedDeadTokens == 1)
            #expect(report.deletedTokenUsers == 1)
            let pairs = try await column(
                "SELECT user_id FROM token_users WHERE tenant_id = 'argus' ORDER BY user_id", in: store)
            #expect(pairs == ["kept", "recent"])

            #expect(
                try await store.deliveryPartitions()
                    == ([-10, 0, 1, 2] as [Double]).map { partitionName(now.addingTimeInterval($0 * day)) })
            #expect(try await store.job(tenant: "circl", id: oldKey.id)?.idempotencyKey == nil)
            #expect(try await store.job(tenant: "circl", id: freshKey.id)?.idempotencyKey == "fresh")
            #expect(try await store.job(tenant: "anky", id: finished[0]) == nil)
            #expect(try await store.job(tenant: "anky", id: finished[1]) != nil)
            #expect(try await store.job(tenant: "anky", id: unfinished.id) != nil, "unfinished jobs are kept")
            #expect(try await column("SELECT value FROM mutes ORDER BY value", in: store) == ["forever", "later"])
            #expect(try await column("SELECT thread_id FROM presence", in: store) == ["here"])
            #expect(try await store.deadTokenTimestamp(tenant: "circl", token: deviceToken(1)) == nil)
            #expect(try await store.deadTokenTimestamp(tenant: "circl", token: deviceToken(2)) != nil)

            // A second run has nothing left to do.
            #expect(try await store.maintain(retentionDays: 30, now: now) == MaintenanceReport())
        }
    }

    @Test("a retention under one day is refused")
    func retentionValidation() async throws {
        try await withTenantStore { store in
            for days in [0, -1] {
                do {
                    try await store.maintain(retentionDays: days)
                    Issue.record("retention \(days) was accepted")
                } catch let error as RelayStoreError where error.code == .invalidArgument {
                    #expect(error.detail.contains("retention"))
                }
            }
        }
    }
}

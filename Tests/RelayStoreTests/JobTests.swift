import Foundation
import PostgresNIO
import RelayStore
import Testing

/// Runs one SQL statement, ignoring its rows.
func execute(_ sql: String, in store: RelayStore) async throws {
    try await store.client.query(PostgresQuery(unsafeSQL: sql))
}

/// Makes job `id` look `hours` old (its creation time moves back), as if created that long ago.
func backdate(job id: String, hours: Int, in store: RelayStore) async throws {
    try await execute(
        "UPDATE jobs SET created_at = now() - interval '\(hours) hours' WHERE id = '\(id)'", in: store)
}

@Suite("Jobs")
struct JobTests {
    @Test("a job is stored with its request bytes and read back by id; malformed and foreign ids are nil")
    func createAndRead() async throws {
        try await withTenantStore { store in
            let request: [UInt8] = [0, 1, 2, 0xFF, 0x80, 0]
            let accepted = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: request)
            #expect(!accepted.duplicate)
            let job = accepted.job
            #expect(UUID(uuidString: job.id) != nil)
            #expect(job.id == job.id.lowercased())
            #expect(job.tenantID == "circl")
            #expect(job.notificationType == "message")
            #expect(job.state == .accepted)
            #expect(job.idempotencyKey == nil)
            #expect(job.request == request)
            #expect(job.sendAt == nil)
            #expect([job.devices, job.delivered, job.failed, job.skipped] == [Int](repeating: 0, count: 4))
            #expect(job.error == nil)
            #expect(job.finishedAt == nil)
            #expect(abs(job.createdAt.timeIntervalSinceNow) < 60)

            #expect(try await store.job(tenant: "circl", id: job.id) == job)
            #expect(try await store.job(tenant: "circl", id: job.id.uppercased()) == job)
            #expect(try await store.job(tenant: "circl", id: "not-a-uuid") == nil)
            #expect(try await store.job(tenant: "circl", id: "") == nil)
            #expect(try await store.job(tenant: "circl", id: UUID().uuidString) == nil)
            #expect(try await store.job(tenant: "anky", id: job.id) == nil)

            let empty = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "", request: [])
            #expect(empty.job.request == [])
            #expect(empty.job.idempotencyKey == nil, "an empty key is no key")
            let again = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "", request: [])
            #expect(!again.duplicate)
            #expect(again.job.id != empty.job.id)
        }
    }

    @Test(
        "a stored row the store cannot read is a corrupt row, which retrying does not fix; not an unavailable database")
    func unreadableRowIsCorrupt() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            // Only a hand-edited database holds such a row: the schema refuses it.
            try await execute("ALTER TABLE jobs DROP CONSTRAINT jobs_state_check", in: store)
            try await execute("UPDATE jobs SET state = 'bogus' WHERE id = '\(job.id)'", in: store)
            let error = await #expect(throws: RelayStoreError.self) {
                _ = try await store.job(tenant: "circl", id: job.id)
            }
            #expect(error?.code == .corruptRow, "\(String(describing: error))")
            #expect(error?.isTransient == false)
            #expect(error?.detail.contains("bogus") == true)
        }
    }

    @Test("job ids are UUIDs of version 7: the creation time's milliseconds first, so a later job's id sorts after")
    func jobIDsAreTimeOrdered() async throws {
        try await withTenantStore { store in
            var ids: [String] = []
            for _ in 0..<5 {
                let before = Date()
                let job = try await store.createJob(
                    tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
                ).job
                let after = Date()
                let hex = job.id.replacingOccurrences(of: "-", with: "")
                #expect(hex.count == 32)
                #expect(Array(hex)[12] == "7", "version 7")
                #expect("89ab".contains(Array(hex)[16]), "RFC 9562 variant")
                let milliseconds = try #require(UInt64(hex.prefix(12), radix: 16))
                #expect(milliseconds >= UInt64(before.timeIntervalSince1970 * 1000))
                #expect(milliseconds <= UInt64(after.timeIntervalSince1970 * 1000))
                ids.append(job.id)
                try await Task.sleep(for: .milliseconds(2))
            }
            #expect(ids == ids.sorted(), "each id sorts after the ids of the jobs made before it")
            #expect(Set(ids).count == ids.count)
        }
    }

    @Test("a send_at in the future makes a scheduled job, one in the past an accepted one")
    func scheduling() async throws {
        try await withTenantStore { store in
            let later = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3_600).rounded())
            let scheduled = try await store.createJob(
                tenant: "anky", notificationType: "daily_prompt", idempotencyKey: nil, request: [1], sendAt: later)
            #expect(scheduled.job.state == .scheduled)
            #expect(scheduled.job.sendAt == later)
            let past = try await store.createJob(
                tenant: "anky", notificationType: "daily_prompt", idempotencyKey: nil, request: [1],
                sendAt: instant(0))
            #expect(past.job.state == .accepted)
            #expect(past.job.sendAt == instant(0))
        }
    }

    @Test("an idempotency key answers the first job within 24 hours, per tenant")
    func idempotencyWithinWindow() async throws {
        try await withTenantStore { store in
            let first = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-1", request: [1])
            #expect(!first.duplicate)
            #expect(first.job.idempotencyKey == "k-1")

            let second = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-1", request: [2])
            #expect(second.duplicate)
            #expect(second.job == first.job, "the first job, with its own request, is answered")

            // 23 hours later the key still holds.
            try await backdate(job: first.job.id, hours: 23, in: store)
            let third = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-1", request: [3])
            #expect(third.duplicate)
            #expect(third.job.id == first.job.id)

            // Another tenant's key space is its own.
            let other = try await store.createJob(
                tenant: "anky", notificationType: "daily_prompt", idempotencyKey: "k-1", request: [4])
            #expect(!other.duplicate)
            #expect(other.job.id != first.job.id)
            #expect(other.job.tenantID == "anky")
            #expect(try await column("SELECT count(*)::text FROM jobs", in: store) == ["2"])
        }
    }

    @Test("a key older than 24 hours makes a new job, which then holds the key")
    func idempotencyAfterWindow() async throws {
        try await withTenantStore { store in
            let old = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-2", request: [1])
            try await backdate(job: old.job.id, hours: 25, in: store)

            let fresh = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-2", request: [2])
            #expect(!fresh.duplicate)
            #expect(fresh.job.id != old.job.id)
            #expect(fresh.job.idempotencyKey == "k-2")
            #expect(fresh.job.request == [2])

            // The old job is still there, without its key.
            let oldNow = try #require(try await store.job(tenant: "circl", id: old.job.id))
            #expect(oldNow.idempotencyKey == nil)
            #expect(oldNow.request == [1])

            let again = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: "k-2", request: [3])
            #expect(again.duplicate)
            #expect(again.job.id == fresh.job.id)
        }
    }

    @Test("20 concurrent sends with one key make one job; all of them answer it")
    func concurrentIdempotency() async throws {
        // All twenty wait on the first one's commit; a loaded machine can take longer than the default deadline.
        try await withTenantStore(callDeadline: .seconds(60)) { store in
            let results = try await withThrowingTaskGroup(of: JobAcceptance.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        try await store.createJob(
                            tenant: "argus", notificationType: "person", idempotencyKey: "camera-7-event-1",
                            request: [UInt8(index)])
                    }
                }
                var results: [JobAcceptance] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.filter { !$0.duplicate }.count == 1)
            #expect(Set(results.map(\.job.id)).count == 1)
            #expect(try await column("SELECT count(*)::text FROM jobs", in: store) == ["1"])
        }
    }

    @Test("updates record counts; a final state sets finished_at and then stands")
    func updates() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "circl", notificationType: "announcement", idempotencyKey: nil, request: [9]
            ).job

            let running = try await store.updateJob(
                tenant: "circl", id: job.id, state: .running, devices: 10, delivered: 3, failed: 1, skipped: 2)
            #expect(running.state == .running)
            #expect([running.devices, running.delivered, running.failed, running.skipped] as [Int] == [10, 3, 1, 2])
            #expect(running.finishedAt == nil)
            #expect(running.updatedAt >= job.updatedAt)

            let failed = try await store.updateJob(
                tenant: "circl", id: job.id, state: .failed, devices: 10, delivered: 3, failed: 7, skipped: 0,
                error: "APNs refused the key")
            #expect(failed.state == .failed)
            #expect(failed.error == "APNs refused the key")
            let finishedAt = try #require(failed.finishedAt)
            #expect(try await store.job(tenant: "circl", id: job.id) == failed)

            // A late update after the job ended keeps its state, error and finish time; only the counts change.
            let late = try await store.updateJob(
                tenant: "circl", id: job.id, state: .running, devices: 10, delivered: 4, failed: 6, skipped: 0)
            #expect(late.state == .failed)
            #expect(late.error == "APNs refused the key")
            #expect(late.finishedAt == finishedAt)
            #expect(late.delivered == 4)

            let other = try await store.createJob(
                tenant: "circl", notificationType: "announcement", idempotencyKey: nil, request: []
            ).job
            let cancelled = try await store.updateJob(
                tenant: "circl", id: other.id, state: .cancelled, devices: 0, delivered: 0, failed: 0, skipped: 0)
            #expect(cancelled.state == .cancelled)
            #expect(cancelled.finishedAt != nil)
            let completed = try await store.createJob(
                tenant: "circl", notificationType: "announcement", idempotencyKey: nil, request: []
            ).job
            #expect(
                try await store.updateJob(
                    tenant: "circl", id: completed.id, state: .completed, devices: 2, delivered: 2, failed: 0,
                    skipped: 0
                ).finishedAt != nil)
        }
    }

    @Test("unknown jobs and tenants, bad counts and empty types are refused")
    func validation() async throws {
        try await withTenantStore { store in
            do {
                _ = try await store.createJob(tenant: "nobody", notificationType: "x", idempotencyKey: nil, request: [])
                Issue.record("an unknown tenant was accepted")
            } catch let error as RelayStoreError where error.code == .unknownTenant {
                #expect(error.detail == "nobody")
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.createJob(tenant: "circl", notificationType: "", idempotencyKey: nil, request: [])
            }
            let job = try await store.createJob(
                tenant: "circl", notificationType: "message", idempotencyKey: nil, request: []
            ).job
            do {
                try await store.updateJob(
                    tenant: "circl", id: job.id, state: .running, devices: -1, delivered: 0, failed: 0, skipped: 0)
                Issue.record("a negative count was accepted")
            } catch let error as RelayStoreError where error.code == .invalidArgument {
                #expect(error.detail.contains("devices"))
            }
            for id in [UUID().uuidString, "garbage"] {
                do {
                    try await store.updateJob(
                        tenant: "circl", id: id, state: .running, devices: 0, delivered: 0, failed: 0, skipped: 0)
                    Issue.record("an unknown job was updated")
                } catch let error as RelayStoreError where error.code == .unknownJob {
                    #expect(error.description.contains("\"circl\""))
                    #expect(error.detail == id)
                }
            }
        }
    }

    @Test("a tenant can neither read nor change another tenant's jobs or take over its keys")
    func tenantIsolation() async throws {
        try await withTenantStore { store in
            let job = try await store.createJob(
                tenant: "familyportal", notificationType: "chat_message", idempotencyKey: "shared", request: [7]
            ).job
            #expect(try await store.job(tenant: "anky", id: job.id) == nil)
            await #expect(throws: RelayStoreError.self) {
                try await store.updateJob(
                    tenant: "anky", id: job.id, state: .cancelled, devices: 1, delivered: 1, failed: 0, skipped: 0)
            }
            // Even an expired key of another tenant is not touched by a send with the same key.
            try await backdate(job: job.id, hours: 30, in: store)
            let ankys = try await store.createJob(
                tenant: "anky", notificationType: "daily_prompt", idempotencyKey: "shared", request: [8])
            #expect(!ankys.duplicate)
            let unchanged = try #require(try await store.job(tenant: "familyportal", id: job.id))
            #expect(unchanged.state == .accepted)
            #expect(unchanged.idempotencyKey == "shared")
            #expect(unchanged.devices == 0)
            #expect(unchanged.request == [7])
        }
    }
}

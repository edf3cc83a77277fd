import Foundation
import RelayStore
import Testing

@testable import RelayServer

@Suite("The fan-out's delivery writer")
struct DeliveryWriterTests {
    /// `count` delivered rows of job `job` in `tenant`.
    private func rows(_ count: Int, job: String, tenant: String = "circl") -> [DeliveryRecord] {
        (0..<count).map { index in
            DeliveryRecord(
                tenantID: tenant, jobID: job, userID: "u\(index)", token: String(format: "%064x", index),
                outcome: .delivered, sentAt: Date(), notificationType: "message")
        }
    }

    /// Hands each of `calls` to `writer` in a task of its own and waits until all are queued.
    private func handIn(
        _ calls: [[DeliveryRecord]], to writer: DeliveryWriter
    ) async throws -> [Task<Void, any Error>] {
        let tasks = calls.map { rows in Task { try await writer.record(rows) } }
        while writer.queuedCalls < calls.count { try await Task.sleep(for: .milliseconds(5)) }
        return tasks
    }

    @Test("calls handed in while no statement could run share one, and each returns once its rows are recorded")
    func callsShareAStatement() async throws {
        try await RelayHarness.with(fanOut: false) { relay in
            // Today's partition exists, so that one statement is all the write needs.
            try await relay.store.ensureDeliveryPartitions(around: Date())
            let writer = DeliveryWriter(store: relay.store)
            let jobs = (0..<40).map { "writer-job-\($0)" }
            let calls = try await handIn(jobs.map { rows(25, job: $0) }, to: writer)
            let writing = Task { await writer.run() }
            for call in calls { try await call.value }
            #expect(writer.statements.load(ordering: .relaxed) == 1)
            for job in jobs {
                #expect(try await relay.store.deliveries(tenant: "circl", job: job).count == 25)
            }
            writer.close()
            await writing.value
        }
    }

    @Test("a failed statement fails every call it carried; the next statement is written")
    func aFailedStatementFailsItsCalls() async throws {
        try await RelayHarness.with(fanOut: false) { relay in
            let writer = DeliveryWriter(store: relay.store)
            let calls = try await handIn(
                [rows(3, job: "good-before"), rows(3, job: "bad", tenant: "no-such-tenant")], to: writer)
            let writing = Task { await writer.run() }
            for call in calls {
                await #expect {
                    try await call.value
                } throws: { error in
                    guard let error = error as? RelayStoreError else { return false }
                    return error.code == .unknownTenant && error.detail == "no-such-tenant"
                }
            }
            #expect(try await relay.store.deliveries(tenant: "circl", job: "good-before").isEmpty)
            try await writer.record(rows(4, job: "good-after"))
            #expect(try await relay.store.deliveries(tenant: "circl", job: "good-after").count == 4)
            writer.close()
            await writing.value
        }
    }

    @Test("close lets the writer write what was handed in, then refuses more")
    func closeDrains() async throws {
        try await RelayHarness.with(fanOut: false) { relay in
            let writer = DeliveryWriter(store: relay.store)
            let calls = try await handIn([rows(5, job: "drained-1"), rows(6, job: "drained-2")], to: writer)
            writer.close()
            await writer.run()
            for call in calls { try await call.value }
            #expect(try await relay.store.deliveries(tenant: "circl", job: "drained-1").count == 5)
            #expect(try await relay.store.deliveries(tenant: "circl", job: "drained-2").count == 6)
            await #expect(throws: CancellationError.self) { try await writer.record(rows(1, job: "late")) }
        }
    }
}

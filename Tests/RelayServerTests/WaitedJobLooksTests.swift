import PushRelayProtocol
import Synchronization
import Testing

@testable import RelayServer

@Suite("Waited job looks")
struct WaitedJobLooksTests {
    @Test("looks asked during a tenant's read wait for the next one, which reads all their jobs once")
    func looksDuringAReadShareTheNext() {
        var batches = WaitedJobBatches<Int>(jobsPerRead: 100)
        #expect(batches.ask(tenant: "circl", job: "j1", waiter: 1) == ["j1"])
        #expect(batches.ask(tenant: "circl", job: "j2", waiter: 2) == nil)
        #expect(batches.ask(tenant: "circl", job: "j3", waiter: 3) == nil)
        #expect(batches.ask(tenant: "circl", job: "j2", waiter: 4) == nil)
        // Another tenant does not wait for circl's read.
        #expect(batches.ask(tenant: "familyportal", job: "f1", waiter: 10) == ["f1"])

        let first = batches.finishRead(tenant: "circl")
        #expect(first.answered.map(\.waiter) == [1])
        #expect(first.next == ["j2", "j3"])
        #expect(batches.ask(tenant: "circl", job: "j1", waiter: 5) == nil)
        let second = batches.finishRead(tenant: "circl")
        #expect(second.answered.map(\.waiter) == [2, 3, 4])
        #expect(second.answered.map(\.job) == ["j2", "j3", "j2"])
        #expect(second.next == ["j1"])
        let third = batches.finishRead(tenant: "circl")
        #expect(third.answered.map(\.waiter) == [5] && third.next == nil)
        // Idle again: the next look reads at once.
        #expect(batches.ask(tenant: "circl", job: "j9", waiter: 6) == ["j9"])
        #expect(batches.finishRead(tenant: "familyportal").answered.map(\.waiter) == [10])
    }

    @Test("a read takes at most its number of jobs; the looks at the others wait for the next read")
    func readsAreBounded() {
        var batches = WaitedJobBatches<Int>(jobsPerRead: 2)
        #expect(batches.ask(tenant: "circl", job: "a", waiter: 0) == ["a"])
        for (waiter, job) in ["b", "c", "b", "d", "e"].enumerated() {
            #expect(batches.ask(tenant: "circl", job: job, waiter: waiter + 1) == nil)
        }
        #expect(batches.finishRead(tenant: "circl").next == ["b", "c"])
        let second = batches.finishRead(tenant: "circl")
        #expect(second.answered.map(\.waiter) == [1, 2, 3])
        #expect(second.next == ["d", "e"])
        let third = batches.finishRead(tenant: "circl")
        #expect(third.answered.map(\.waiter) == [4, 5] && third.next == nil)
    }

    @Test("many waiters' looks cost a few statements, each answered for its own job; a failed read fails its looks")
    func manyLooksFewReads() async throws {
        let reads = Mutex<[[String]]>([])
        let failing = Mutex(false)
        let looks = WaitedJobLooks { _, jobs throws(ProtocolError) in
            reads.withLock { $0.append(jobs) }
            // Long enough for the other looks to queue behind this read.
            try? await Task.sleep(for: .milliseconds(200))
            if failing.withLock({ $0 }) { throw ProtocolError(.unavailable, "the database is away") }
            return Set(jobs.filter { $0.hasPrefix("due") })
        }
        let jobs = (0..<64).map { $0.isMultiple(of: 2) ? "due-\($0)" : "done-\($0)" }
        let answers = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for job in jobs {
                group.addTask { (job, try await looks.isStillDue(tenant: "circl", job: job)) }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(answers.count == 64)
        #expect(answers.allSatisfy { $0.value == $0.key.hasPrefix("due") })
        let statements = reads.withLock { $0 }
        #expect(statements.count < 64 && statements.reduce(0) { $0 + $1.count } == 64, "\(statements.count) reads")

        failing.withLock { $0 = true }
        await #expect(throws: ProtocolError.self) { try await looks.isStillDue(tenant: "circl", job: "due-0") }
    }
}

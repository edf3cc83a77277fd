import RelayStore
import Synchronization

/// Writes the delivery rows of every page a process sends, one statement at a time: the rows handed in while a
/// statement runs go into the next one together.
///
/// Twelve pages each writing their own batches ran twelve inserts at once into the same partition and indexes,
/// each paying its own statement, commit and lock waits. One writer turns them into fewer, larger statements
/// (group commit). A caller waits until its rows are committed, or for the error of the statement that carried
/// them; the rows of one call share a statement (up to ``statementRows``).
///
/// The writer runs in a task of its own (``run()``), which a cancelled caller does not cancel: rows handed in are
/// written even while the process stops, until ``close()`` and the last of them.
final class DeliveryWriter: Sendable {
    /// Rows in one statement at most; a larger call is written alone, in statements of this size. Not larger: a
    /// page waits for its previous batch's statement, and shorter ones keep fewer pages waiting.
    static let statementRows = 1_500

    private struct Submission {
        var rows: [DeliveryRecord]
        var done: CheckedContinuation<Void, any Error>
    }

    private let store: RelayStore
    private let queue = Mutex<(submissions: [Submission], closed: Bool)>(([], false))
    private let wake = WakeSignal()
    /// Statements written so far.
    let statements = Atomic<Int>(0)

    /// Calls handed in and not yet taken into a statement.
    var queuedCalls: Int { queue.withLock { $0.submissions.count } }

    /// A writer for `store`.
    init(store: RelayStore) {
        self.store = store
    }

    /// Writes `rows` with the rows of other calls, returning once they are committed.
    ///
    /// - Throws: the store's error when the statement that carried them failed, ``RelayStoreError`` from
    ///   `recordDeliveries`; `CancellationError` after ``close()``.
    func record(_ rows: [DeliveryRecord]) async throws {
        guard !rows.isEmpty else { return }
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let accepted = queue.withLock { queue in
                guard !queue.closed else { return false }
                queue.submissions.append(Submission(rows: rows, done: done))
                return true
            }
            if accepted {
                wake.wakeOne()
            } else {
                done.resume(throwing: CancellationError())
            }
        }
    }

    /// Writes what is handed in until ``close()`` and the last submission.
    func run() async {
        while true {
            let (next, closed) = queue.withLock { queue in
                let count = Self.takeCount(queue.submissions)
                defer { queue.submissions.removeFirst(count) }
                return (Array(queue.submissions.prefix(count)), queue.closed)
            }
            if next.isEmpty {
                if closed { return }
                await wake.wait()
                continue
            }
            let rows = next.flatMap(\.rows)
            do {
                let report = try await store.recordDeliveries(rows, batchSize: Self.statementRows)
                statements.add(report.statements, ordering: .relaxed)
                RelayMetrics.writeBatch(rows.count)
                RelayMetrics.notifications(rows)
                for submission in next { submission.done.resume() }
            } catch {
                for submission in next { submission.done.resume(throwing: error) }
            }
        }
    }

    /// Ends ``run()`` once the rows handed in so far are written; later calls fail.
    func close() {
        queue.withLock { $0.closed = true }
        wake.close()
    }

    /// How many of the first `submissions` the next statement takes: at least one, then as many whole ones as
    /// stay within ``statementRows``.
    private static func takeCount(_ submissions: [Submission]) -> Int {
        var rows = 0
        var count = 0
        for submission in submissions {
            if count > 0 && rows + submission.rows.count > statementRows { break }
            rows += submission.rows.count
            count += 1
        }
        return count
    }
}

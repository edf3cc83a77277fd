import PushRelayProtocol
import Synchronization

/// Tells callers waiting for their jobs whether each job is still due, reading all the jobs a tenant's callers
/// wait for in one statement at a time (``WaitedJobBatches``).
///
/// Waiters that look at the same instants (``JobSignal/wait(for:atMost:)`` wakes them on a shared grid) share a
/// statement: the database's work for a tenant's waiting SENDs is a statement per look-out, however many wait.
final class WaitedJobLooks: Sendable {
    /// Reads which of a tenant's jobs are still due (those its callers still wait for).
    typealias Read = @Sendable (_ tenant: String, _ jobs: [String]) async throws(ProtocolError) -> Set<String>

    private typealias Waiter = CheckedContinuation<Result<Bool, ProtocolError>, Never>

    private let batches: Mutex<WaitedJobBatches<Waiter>>
    private let read: Read

    /// Looks reading at most `jobsPerRead` jobs a statement with `read`.
    init(jobsPerRead: Int = 1_000, read: @escaping Read) {
        self.batches = Mutex(WaitedJobBatches(jobsPerRead: jobsPerRead))
        self.read = read
    }

    /// Whether `job` of `tenant` is still due: not finished, and with devices due now that have no outcome yet.
    func isStillDue(tenant: String, job: String) async throws(ProtocolError) -> Bool {
        let answer = await withCheckedContinuation { (waiter: Waiter) in
            let jobs = batches.withLock { $0.ask(tenant: tenant, job: job, waiter: waiter) }
            if let jobs {
                Task { await self.readAll(tenant: tenant, first: jobs) }
            }
        }
        return try answer.get()
    }

    /// Reads `jobs`, answers their looks, and goes on with the looks queued meanwhile until none is left.
    private func readAll(tenant: String, first jobs: [String]) async {
        var jobs = jobs
        while true {
            let result: Result<Set<String>, ProtocolError>
            do throws(ProtocolError) {
                result = .success(try await read(tenant, jobs))
            } catch {
                result = .failure(error)
            }
            let (answered, next) = batches.withLock { $0.finishRead(tenant: tenant) }
            for look in answered {
                look.waiter.resume(returning: result.map { $0.contains(look.job) })
            }
            guard let next else { return }
            jobs = next
        }
    }
}

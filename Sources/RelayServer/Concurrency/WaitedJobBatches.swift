/// The looks that callers waiting for their jobs take at them, batched per tenant: while one statement of a tenant
/// reads its waited jobs, the looks asked meanwhile queue and the next statement reads them all. So 256 SENDs that
/// wait cost one statement per look-out instead of 256 (``WaitedJobLooks`` carries the reads out).
///
/// A value: each call says what to do (the jobs to read now, the looks a read answered); `Waiter` is whatever
/// the caller resumes.
struct WaitedJobBatches<Waiter> {
    /// One look: the job, and who waits for the answer.
    typealias Look = (job: String, waiter: Waiter)

    /// The most jobs one statement reads; the looks at further jobs wait for the next statement.
    let jobsPerRead: Int
    private var tenants: [String: TenantLooks] = [:]

    private struct TenantLooks {
        /// Looks waiting for the next read.
        var queued: [Look] = []
        /// Looks the read in flight answers; empty when none is in flight.
        var reading: [Look] = []

        /// Moves the queued looks at the first `limit` jobs into a read, returning its jobs.
        mutating func startRead(limit: Int) -> [String] {
            var jobs: [String] = []
            var chosen: Set<String> = []
            var left: [Look] = []
            for look in queued {
                if chosen.contains(look.job) || chosen.count < limit {
                    if chosen.insert(look.job).inserted { jobs.append(look.job) }
                    reading.append(look)
                } else {
                    left.append(look)
                }
            }
            queued = left
            return jobs
        }
    }

    /// Batches reading at most `jobsPerRead` jobs (at least 1) each.
    init(jobsPerRead: Int) {
        self.jobsPerRead = max(1, jobsPerRead)
    }

    /// Asks for a look at `job` of `tenant` for `waiter`. Returns the jobs to read now when the tenant has no read
    /// in flight (the caller runs it, then calls ``finishRead(tenant:)``), or `nil`: the look is queued for the read
    /// after the one in flight.
    mutating func ask(tenant: String, job: String, waiter: Waiter) -> [String]? {
        var looks = tenants[tenant] ?? TenantLooks()
        looks.queued.append((job, waiter))
        defer { tenants[tenant] = looks }
        guard looks.reading.isEmpty else { return nil }
        return looks.startRead(limit: jobsPerRead)
    }

    /// Ends `tenant`'s read in flight: the looks it answers, and the jobs of the next read when looks are queued
    /// (the caller runs it too).
    mutating func finishRead(tenant: String) -> (answered: [Look], next: [String]?) {
        guard var looks = tenants[tenant] else { return ([], nil) }
        let answered = looks.reading
        looks.reading = []
        let next = looks.queued.isEmpty ? nil : looks.startRead(limit: jobsPerRead)
        tenants[tenant] = next == nil ? nil : looks
        return (answered, next)
    }
}

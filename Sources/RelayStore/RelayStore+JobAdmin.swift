package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// Cancels a job that is not finished: nothing more is handed out (pages being sent finish).
    /// Returns the job as it is afterwards, or `nil` when the tenant has no such job.
    package func cancelJob(tenant: String, id: String) async throws(RelayStoreError) -> JobRecord? {
        guard let uuid = UUID(uuidString: id) else { return nil }
        _ = try await countRows(
            """
            UPDATE jobs SET state = 'cancelled', finished_at = now(), updated_at = now()
            WHERE id = \(uuid) AND tenant_id || '' = \(tenant) AND finished_at IS NULL
            RETURNING 1::int8
            """
        )
        _ = try await countRows(
            """
            UPDATE job_pages SET state = 'cancelled'
            WHERE job_id = \(uuid) AND tenant_id = \(tenant) AND state = 'pending'
            RETURNING 1::int8
            """
        )
        return try await job(tenant: tenant, id: id)
    }

    /// The job with how many of its pages are due and not done, and how many wait for later.
    package func jobProgress(tenant: String, id: String) async throws(RelayStoreError) -> JobProgress? {
        guard let job = try await job(tenant: tenant, id: id), let uuid = UUID(uuidString: id) else { return nil }
        return try await mappingErrors {
            for try await (planned, due, later) in try await database.query(
                """
                SELECT (SELECT planned_at IS NOT NULL FROM jobs WHERE id = \(uuid)),
                       count(*) FILTER (WHERE state IN ('pending', 'leased') AND due_at <= now()),
                       count(*) FILTER (WHERE state IN ('pending', 'leased') AND due_at > now())
                FROM job_pages WHERE job_id = \(uuid)
                """,
                logger: logger
            ).decode((Bool, Int, Int).self) {
                return JobProgress(job: job, planned: planned, pagesDue: due, pagesLater: later)
            }
            return nil
        }
    }

    /// Of jobs `ids` of `tenant`, those that a SEND waiting for its due devices still waits for: not finished, and
    /// not planned yet, or with a page due now and not done, or with no page left for later (the jobs whose
    /// ``jobProgress(tenant:id:)`` says neither finished nor only later pages left). One statement for all of a
    /// tenant's waiting callers, each job found by its primary key. Ids of other tenants' jobs, unknown ids and
    /// malformed ones are never returned.
    package func jobsStillDue(tenant: String, ids: [String]) async throws(RelayStoreError) -> Set<String> {
        let uuids = ids.compactMap { UUID(uuidString: $0) }
        guard !uuids.isEmpty else { return [] }
        var due: Set<String> = []
        try await mappingErrors {
            for try await id in try await database.query(
                """
                SELECT j.id FROM jobs j
                WHERE j.id = ANY(\(uuids)) AND j.tenant_id || '' = \(tenant) AND j.finished_at IS NULL
                  AND (j.planned_at IS NULL
                       OR EXISTS (SELECT 1 FROM job_pages p WHERE p.job_id = j.id
                                  AND p.state IN ('pending', 'leased') AND p.due_at <= now())
                       OR NOT EXISTS (SELECT 1 FROM job_pages p WHERE p.job_id = j.id
                                      AND p.state IN ('pending', 'leased') AND p.due_at > now()))
                """,
                logger: logger
            ).decode(UUID.self) {
                due.insert(id.uuidString.lowercased())
            }
        }
        return due
    }

    /// The devices of a job's pages that wait for a later time (deferred by quiet hours, local-time sends, or held
    /// while their provider could not take them: then with why they wait); a topic range page's devices as
    /// registered now.
    package func laterDevices(tenant: String, id: String) async throws(RelayStoreError) -> [LaterDevice] {
        guard let uuid = UUID(uuidString: id) else { return [] }
        var devices: [LaterDevice] = []
        try await mappingErrors {
            for try await (tokens, users, dueAt, waitReason) in try await database.query(
                """
                SELECT p.tokens, p.users, p.due_at, p.wait_reason FROM job_pages p
                WHERE p.job_id = \(uuid) AND p.tenant_id = \(tenant) AND p.state = 'pending' AND p.due_at > now()
                  AND p.topic IS NULL
                UNION ALL
                SELECT coalesce(array_agg(d.token ORDER BY d.token, d.user_id), '{}'),
                       coalesce(array_agg(d.user_id ORDER BY d.token, d.user_id), '{}'), p.due_at, NULL::text
                FROM job_pages p JOIN devices d ON d.tenant_id = p.tenant_id AND d.active
                    AND (d.topics @> ARRAY[p.topic] OR d.topics = '{}') AND d.token > p.range_after AND d.token <= p.range_last
                WHERE p.job_id = \(uuid) AND p.tenant_id = \(tenant) AND p.state = 'pending' AND p.due_at > now()
                GROUP BY p.page, p.due_at
                """,
                logger: logger
            ).decode(([String], [String], Date, String?).self) {
                for (token, user) in zip(tokens, users) {
                    devices.append(LaterDevice(token: token, user: user, dueAt: dueAt, waitReason: waitReason))
                }
            }
        }
        return devices
    }

    /// Completes every running, planned job whose pages are all done, summing their counts: the completion
    /// that ``completeJobPage(_:owner:counts:)`` or ``finishPlanning(jobID:owner:)`` did not make because it
    /// never ran its second statement (the process died between the two, or the database stopped answering and
    /// the first one ran late, after the caller had given up at the store's call deadline). Returns how many
    /// jobs it completed.
    @discardableResult
    package func completeFinishedJobs() async throws(RelayStoreError) -> Int {
        try await countRows("\(unescaped: Self.completeDoneJobs) RETURNING 1::int8")
    }

    /// Completes a running, planned job whose pages are all done, summing their counts.
    func completeJobIfDone(jobID: String) async throws(RelayStoreError) {
        guard let uuid = UUID(uuidString: jobID) else { return }
        _ = try await countRows(
            "\(unescaped: Self.completeDoneJobs) AND r.id = \(uuid) RETURNING 1::int8", preparedAs: CompleteJob.self)
    }

    /// Completes the running, planned jobs (`r`) none of whose pages is pending or leased, with the sums of
    /// their pages' counts; a caller may narrow `r` with more conditions.
    static let completeDoneJobs = """
        UPDATE jobs j SET state = 'completed', finished_at = now(), updated_at = now(),
            devices = s.devices, delivered = s.delivered, failed = s.failed, skipped = s.skipped
        FROM jobs r CROSS JOIN LATERAL (
            SELECT coalesce(sum(devices), 0)::int AS devices, coalesce(sum(delivered), 0)::int AS delivered,
                   coalesce(sum(failed), 0)::int AS failed, coalesce(sum(skipped), 0)::int AS skipped
            FROM job_pages WHERE job_id = r.id
        ) s
        WHERE j.id = r.id AND r.finished_at IS NULL AND r.state = 'running' AND r.planned_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM job_pages q WHERE q.job_id = r.id AND q.state IN ('pending', 'leased'))
        """
}

extension RelayStore {
    /// The fan-out queue's depth for metrics: pages due and not done (pending or leased, of running jobs),
    /// and the due time of the oldest pending due page nobody has claimed (`nil` when there is none).
    package func pagesDue() async throws(RelayStoreError) -> (due: Int, oldestUnclaimedDueAt: Date?) {
        return try await mappingErrors {
            for try await (due, oldest) in try await database.query(
                """
                SELECT count(*)::int8,
                    min(q.due_at) FILTER (WHERE q.state = 'pending' OR q.lease_until < now())
                FROM job_pages q JOIN jobs j ON j.id = q.job_id
                WHERE q.state IN ('pending', 'leased') AND q.due_at <= now() AND j.state = 'running'
                """,
                logger: logger
            ).decode((Int64, Date?).self) {
                return (Int(due), oldest)
            }
            return (0, nil)
        }
    }
}

/// A job's completion check, prepared (``PreparedStatementName``).
private enum CompleteJob: PreparedStatementName {}

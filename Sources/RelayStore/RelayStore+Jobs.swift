package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// How long an idempotency key is remembered (24 hours): a job created with a key the tenant used less
    /// than this long ago answers the earlier job.
    package static let idempotencyWindow: Duration = .seconds(86_400)

    /// Accepts a job, or answers the tenant's earlier job with the same idempotency key.
    ///
    /// The common case is one statement (`INSERT … ON CONFLICT DO NOTHING RETURNING`). When the key is taken, the
    /// row holding it is read: if it was created within ``idempotencyWindow`` it is answered with
    /// ``JobAcceptance/duplicate`` set (its request is not compared with this one); if it is older, its key is
    /// cleared and the insert is tried again, so an expired key makes a new job. Concurrent calls with one key
    /// create one job: the unique index makes the others wait for it and answer it.
    ///
    /// The new job is ``JobState/scheduled`` when `sendAt` is after the database's clock, else
    /// ``JobState/accepted``.
    ///
    /// - Parameters:
    ///   - tenant: The tenant's id; throws ``RelayStoreError/unknownTenant(_:)`` when there is none.
    ///   - notificationType: The notification type (not checked against the tenant's configuration here).
    ///   - idempotencyKey: The backend's key; `nil` or empty for none.
    ///   - request: The serialized request, stored as it is.
    ///   - sendAt: When to send, for a scheduled job.
    ///   - planner: A planner to lease the new job to at once for `planningLease`, as
    ///     ``claimJobForPlanning(owner:lease:)`` would: it plans the job without claiming it. A job scheduled for
    ///     later, or a duplicate, is not leased.
    ///   - planningLease: How long `planner` holds the new job before another planner may take it.
    package func createJob(
        tenant: String,
        notificationType: String,
        idempotencyKey: String?,
        request: [UInt8],
        sendAt: Date? = nil,
        plannedBy planner: String? = nil,
        planningLease: Duration = .seconds(30)
    ) async throws(RelayStoreError) -> JobAcceptance {
        guard !notificationType.isEmpty else { throw .invalidArgument("the notification type is empty") }
        let key = idempotencyKey.flatMap { $0.isEmpty ? nil : $0 }
        let window = Self.idempotencyWindowSeconds
        let requestData = Data(request)
        // Each pass either returns or frees the key; a key freed (or taken) by someone else between two
        // statements sends us round again, which settles at once in practice.
        for _ in 0..<5 {
            let id = UUID.timeOrdered()
            var inserted: JobRecord?
            do {
                for row in try await database.query(
                    """
                    INSERT INTO jobs AS j (
                        id, tenant_id, notification_type, state, idempotency_key, request, send_at, planning_owner,
                        planning_until
                    )
                    SELECT
                        \(id), \(tenant), \(notificationType), CASE WHEN later THEN 'scheduled' ELSE 'accepted' END,
                        \(key), \(requestData), \(sendAt), CASE WHEN NOT later THEN \(planner)::text END,
                        CASE WHEN NOT later AND \(planner)::text IS NOT NULL
                            THEN now() + \(interval: planningLease) END
                    FROM (SELECT coalesce(\(sendAt)::timestamptz > now(), false) AS later) s
                    ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                    RETURNING \(unescaped: Self.jobColumns)
                    """,
                    preparedAs: CreateJob.self, logger: logger
                ) {
                    inserted = try Self.job(from: row.decode(JobColumns.self))
                }
            } catch let error as PSQLError where Self.isForeignKeyViolation(error) {
                throw .unknownTenant(tenant)
            } catch {
                throw relayStoreError(from: error)
            }
            if let job = inserted {
                return JobAcceptance(job: job, duplicate: false)
            }
            guard let key else {
                throw .databaseUnavailable("the job was not inserted and has no idempotency key")
            }
            var holder: (job: JobRecord, fresh: Bool)?
            try await mappingErrors {
                for try await row in try await database.query(
                    """
                    SELECT \(unescaped: Self.jobColumns),
                           created_at > now() - \(window)::int8 * interval '1 second'
                    FROM jobs j WHERE tenant_id = \(tenant) AND idempotency_key = \(key)
                    """,
                    logger: logger
                ).decode(JobColumnsAndFlag.self) {
                    holder = (
                        try Self.job(
                            from: (
                                row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10,
                                row.11, row.12, row.13, row.14
                            )),
                        row.15
                    )
                }
            }
            guard let holder else { continue }
            if holder.fresh {
                return JobAcceptance(job: holder.job, duplicate: true)
            }
            try await clearIdempotencyKey(tenant: tenant, jobID: holder.job.id, key: key)
        }
        throw .databaseUnavailable("idempotency key \(key ?? "") of tenant \(tenant) kept changing hands; try again")
    }

    /// The job `id` of `tenant`, or `nil` when the tenant has no such job (another tenant's id, or an id that
    /// is not a UUID).
    package func job(tenant: String, id: String) async throws(RelayStoreError) -> JobRecord? {
        guard let uuid = UUID(uuidString: id) else { return nil }
        return try await jobRows(Self.jobQuery(tenant: tenant, id: uuid)).first
    }

    /// The statement reading job `id` of `tenant`: its row found by the primary key, its tenant then checked.
    ///
    /// Every statement on one job compares the tenant as an expression (`tenant_id || ''`), which no index serves.
    /// Written `tenant_id = … AND id = …`, the planner, whose statistics may say a tenant has next to no jobs (a
    /// tenant whose backlog came after the last ANALYZE), took the index `jobs_type_created_xid` and filtered all
    /// of the tenant's jobs by id: 330 rows a lookup during the noisy-neighbour benchmark's backlog, where every
    /// waiting SEND looks its job up each second.
    static func jobQuery(tenant: String, id: UUID) -> PostgresQuery {
        "SELECT \(unescaped: Self.jobColumns) FROM jobs j WHERE id = \(id) AND tenant_id || '' = \(tenant)"
    }

    /// Records a job's progress or outcome and returns the job as stored.
    ///
    /// Moving to ``JobState/completed``, ``JobState/failed`` or ``JobState/cancelled`` sets
    /// ``JobRecord/finishedAt``. A finished job keeps its state, error and finish time: a later update (a
    /// worker's last counts after a cancel) only records the counts, and the returned record shows the state
    /// that stands, so a worker can tell it was cancelled.
    ///
    /// - Throws: ``RelayStoreError/unknownJob(tenant:id:)`` when `tenant` has no job `id`;
    ///   ``RelayStoreError/invalidArgument(_:)`` for a negative or oversized count.
    @discardableResult
    package func updateJob(
        tenant: String,
        id: String,
        state: JobState,
        devices: Int,
        delivered: Int,
        failed: Int,
        skipped: Int,
        error: String? = nil
    ) async throws(RelayStoreError) -> JobRecord {
        for (name, count) in [("devices", devices), ("delivered", delivered), ("failed", failed), ("skipped", skipped)]
        where count < 0 || count > Int(Int32.max) {
            throw .invalidArgument("the \(name) count \(count) is out of range (0…\(Int32.max))")
        }
        guard let uuid = UUID(uuidString: id) else { throw .unknownJob(tenant: tenant, id: id) }
        let updated = try await jobRows(
            """
            UPDATE jobs j SET
                state = CASE WHEN j.finished_at IS NULL THEN \(state.rawValue) ELSE j.state END,
                error = CASE WHEN j.finished_at IS NULL THEN \(error) ELSE j.error END,
                finished_at = CASE
                    WHEN j.finished_at IS NOT NULL THEN j.finished_at
                    WHEN \(state.isFinished) THEN now()
                END,
                devices = \(devices), delivered = \(delivered), failed = \(failed), skipped = \(skipped),
                updated_at = now()
            WHERE id = \(uuid) AND tenant_id || '' = \(tenant)
            RETURNING \(unescaped: Self.jobColumns)
            """
        )
        guard let job = updated.first else { throw .unknownJob(tenant: tenant, id: id) }
        return job
    }

    // MARK: - Helpers

    static var idempotencyWindowSeconds: Int { Int(idempotencyWindow.components.seconds) }

    /// Whether `error` is a foreign key violation: a row naming a tenant that does not exist.
    static func isForeignKeyViolation(_ error: PSQLError) -> Bool {
        error.serverInfo?[.sqlState] == "23503"
    }

    typealias JobColumns = (
        UUID, String, String, String, String?, Data, Date?, Int, Int, Int, Int, String?, Date, Date, Date?
    )
    typealias JobColumnsAndFlag = (
        UUID, String, String, String, String?, Data, Date?, Int, Int, Int, Int, String?, Date, Date, Date?, Bool
    )

    static let jobColumns = """
        j.id, j.tenant_id, j.notification_type, j.state, j.idempotency_key, j.request, j.send_at, j.devices::int8, \
        j.delivered::int8, j.failed::int8, j.skipped::int8, j.error, j.created_at, j.updated_at, j.finished_at
        """

    static func job(from columns: JobColumns) throws(RelayStoreError) -> JobRecord {
        guard let state = JobState(rawValue: columns.3) else {
            throw .corruptRow("job row with unknown state \(columns.3)")
        }
        return JobRecord(
            id: columns.0.uuidString.lowercased(), tenantID: columns.1, notificationType: columns.2, state: state,
            idempotencyKey: columns.4, request: [UInt8](columns.5), sendAt: columns.6, devices: columns.7,
            delivered: columns.8, failed: columns.9, skipped: columns.10, error: columns.11, createdAt: columns.12,
            updatedAt: columns.13, finishedAt: columns.14)
    }

    func jobRows(_ query: PostgresQuery) async throws(RelayStoreError) -> [JobRecord] {
        return try await mappingErrors {
            var jobs: [JobRecord] = []
            for try await columns in try await database.query(query, logger: logger).decode(JobColumns.self) {
                jobs.append(try Self.job(from: columns))
            }
            return jobs
        }
    }

    /// Frees `key` from job `jobID` if the key is older than the idempotency window.
    private func clearIdempotencyKey(tenant: String, jobID: String, key: String) async throws(RelayStoreError) {
        guard let uuid = UUID(uuidString: jobID) else { return }
        let window = Self.idempotencyWindowSeconds
        try await mappingErrors {
            try await database.query(
                """
                UPDATE jobs SET idempotency_key = NULL, updated_at = now()
                WHERE id = \(uuid) AND tenant_id || '' = \(tenant) AND idempotency_key = \(key)
                  AND created_at <= now() - \(window)::int8 * interval '1 second'
                """,
                logger: logger
            )
        }
    }
}

extension RelayStore {
    /// The due time of the oldest job that is due and not planned yet, with no planner holding it
    /// (`accepted` or `scheduled`, its send time past, its planning lease absent or run out); `nil` when
    /// there is none. With ``pagesDue()`` it gives the scheduled-job lag: work due that nobody is doing.
    package func oldestUnclaimedDueJob() async throws(RelayStoreError) -> Date? {
        return try await mappingErrors {
            for try await (oldest, ) in try await database.query(
                """
                SELECT min(coalesce(send_at, created_at)) FROM jobs
                WHERE planned_at IS NULL AND state IN ('accepted', 'scheduled')
                  AND coalesce(send_at, created_at) <= now()
                  AND (planning_until IS NULL OR planning_until < now())
                """,
                logger: logger
            ).decode((Date?).self) {
                return oldest
            }
            return nil
        }
    }
}

private enum CreateJob: PreparedStatementName {}

package import Foundation
import Logging
import PostgresNIO
import PushRelayProtocol
import Synchronization

extension RelayStore {
    /// Writes delivery attempts, `batchSize` rows per statement: each batch is one
    /// `INSERT … SELECT … FROM UNNEST($1::text[], …)`, never a round trip per row.
    ///
    /// A batch with a row outside every daily partition creates the missing days' partitions
    /// (``ensureDeliveryPartitions(around:daysAhead:daysBehind:)``) and is written again. Each batch is atomic.
    @discardableResult
    package func recordDeliveries(
        _ records: [DeliveryRecord],
        batchSize: Int = 5_000
    ) async throws(RelayStoreError) -> DeliveryWriteReport {
        guard batchSize > 0 else { throw .invalidDeliveries(reason: "the batch size must be positive") }
        try await checkTenants(of: records)
        var report = DeliveryWriteReport()
        var start = records.startIndex
        while start < records.endIndex {
            let end = min(start + batchSize, records.endIndex)
            let batch = try DeliveryColumns(records[start..<end])
            let query = batch.insertQuery()
            let (_, created) = try await writeCreatingPartitions(of: batch) { database, logger in
                _ = try await database.rows(query, logger: logger)
            }
            // The insert, and when a day had no partition, the partitions' statement and the insert again.
            report.statements += created == nil ? 1 : 3
            report.createdPartitions += created ?? []
            report.rows += end - start
            start = end
        }
        return report
    }

    /// Writes `rows`, the last delivery rows of a page, and marks the page done in the same statement
    /// (``PageCompletion``); returns `nil` when the page was no longer leased to its owner, else whether that
    /// statement completed the job too. The rows are written either way, all of them in one statement; a row
    /// outside every daily partition creates the missing days' partitions first, as in
    /// ``recordDeliveries(_:batchSize:)``.
    func recordDeliveries(_ rows: [DeliveryRecord], completing completion: PageCompletion)
        async throws(RelayStoreError) -> Bool?
    {
        try await checkTenants(of: rows)
        let batch = try DeliveryColumns(rows[...])
        let query = batch.insertQuery(completing: completion)
        return try await writeCreatingPartitions(of: batch) { database, logger in
            var jobCompleted: Bool?
            for row in try await database.rows(query, logger: logger) {
                jobCompleted = try row.decode(Bool.self)
            }
            return jobCompleted
        }.result
    }

    /// Runs `write`, a statement that inserts `batch`; when one of its rows' days has no partition, creates the
    /// missing days' partitions (``ensureDeliveryPartitions(around:daysAhead:daysBehind:)``'s function) and runs
    /// it once more. Returns its result and the partitions created (`nil`: it ran once).
    private func writeCreatingPartitions<Result>(
        of batch: DeliveryColumns, _ write: (DeadlineClient, Logger) async throws -> Result
    ) async throws(RelayStoreError) -> (result: Result, created: [String]?) {
        do {
            return (try await write(database, logger), nil)
        } catch let error as PSQLError where Self.isMissingPartition(error) {
            let created = try await ensurePartitions(for: batch.sentAt)
            return (try await mappingErrors { try await write(database, logger) }, created)
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Creates the daily (UTC) partitions of `deliveries` from `daysBehind` days before `around`'s day to
    /// `daysAhead` days after it, in one statement, and returns the names of those it created
    /// (`deliveries_pYYYYMMDD`); existing ones are left alone. Safe to run from several processes at once.
    @discardableResult
    package func ensureDeliveryPartitions(
        around: Date,
        daysAhead: Int = 7,
        daysBehind: Int = 1
    ) async throws(RelayStoreError) -> [String] {
        guard daysAhead >= 0, daysBehind >= 0 else {
            throw .invalidDeliveries(reason: "daysAhead and daysBehind must not be negative")
        }
        return try await mappingErrors {
            var created: [String] = []
            for try await name in try await database.query(
                """
                SELECT pushrelay_ensure_delivery_partition(
                    (\(around)::timestamptz AT TIME ZONE 'UTC')::date + day_offset)
                FROM generate_series(-\(daysBehind)::int, \(daysAhead)::int) AS day_offset
                ORDER BY day_offset
                """,
                logger: logger
            ).decode(String?.self) {
                if let name { created.append(name) }
            }
            return created
        }
    }

    /// Drops the daily partitions of `deliveries` whose whole day lies before `olderThan` (the retention
    /// cut-off) and returns their names, oldest first.
    @discardableResult
    package func dropDeliveryPartitions(olderThan: Date) async throws(RelayStoreError) -> [String] {
        return try await mappingErrors {
            var dropped: [String] = []
            for try await name in try await database.query(
                "SELECT pushrelay_drop_delivery_partitions(\(olderThan))",
                logger: logger
            ).decode(String.self) {
                dropped.append(name)
            }
            return dropped
        }
    }

    /// The names of the partitions of `deliveries`, oldest first.
    package func deliveryPartitions() async throws(RelayStoreError) -> [String] {
        return try await mappingErrors {
            var names: [String] = []
            for try await name in try await database.query(
                """
                SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'deliveries'::regclass ORDER BY c.relname
                """,
                logger: logger
            ).decode(String.self) {
                names.append(name)
            }
            return names
        }
    }

    /// The attempts of job `job` in `tenant`, the latest first, at most `limit`, after `key` (the page before's last
    /// row) when given.
    package func deliveries(
        tenant: String, job: String, limit: Int = 1_000, after key: DeliveryKey? = nil
    ) async throws(RelayStoreError) -> [DeliveryRecord] {
        try await deliveryRows(Self.jobDeliveries(tenant: tenant, job: job, limit: limit, after: key))
    }

    /// The statement of ``deliveries(tenant:job:limit:after:)``: the index `deliveries_job` reads the job's rows only.
    static func jobDeliveries(tenant: String, job: String, limit: Int, after key: DeliveryKey?) -> PostgresQuery {
        var query = DeliveryQuery(tenant: tenant, key: key)
        let job = query.bind(job)
        let after = query.afterKey(of: "d")
        return query.sql(
            """
            SELECT \(Self.deliveryColumns) FROM deliveries d
            WHERE d.tenant_id = $1 AND d.job_id = \(job) AND \(after)
            ORDER BY \(DeliveryQuery.order(of: "d")) LIMIT \(limit)
            """)
    }

    /// The attempts to `user`'s devices in `tenant`, the latest first, at most `limit`, after `key` when given.
    package func deliveries(
        tenant: String, user: String, limit: Int = 1_000, after key: DeliveryKey? = nil
    ) async throws(RelayStoreError) -> [DeliveryRecord] {
        var query = DeliveryQuery(tenant: tenant, key: key)
        let user = query.bind(user)
        let after = query.afterKey(of: "d")
        return try await deliveryRows(
            query.sql(
                """
                SELECT \(Self.deliveryColumns) FROM deliveries d
                WHERE hashtextextended(d.user_id, 0) = hashtextextended(\(user), 0) AND d.user_id = \(user)
                  AND d.tenant_id = $1 AND \(after)
                ORDER BY \(DeliveryQuery.order(of: "d")) LIMIT \(limit)
                """))
    }

    /// The attempts to device `token` in `tenant`, the latest first, at most `limit`, after `key` when given.
    ///
    /// They are found through the users a device row of `tenant` paired with `token` (now, or within the
    /// retention: `token_users`), by the index of their users' rows (`deliveries_user_hash`): there is no index on
    /// the token of a delivery. A row recorded for a pair no device ever held (only
    /// ``recordDeliveries(_:batchSize:)`` called directly writes one) is not found.
    package func deliveries(
        tenant: String, token: String, limit: Int = 1_000, after key: DeliveryKey? = nil
    ) async throws(RelayStoreError) -> [DeliveryRecord] {
        var query = DeliveryQuery(tenant: tenant, key: key)
        let token = query.bind(PushProvider.storedForms(of: token))
        let after = query.afterKey(of: "d")
        return try await deliveryRows(
            query.sql(
                """
                SELECT attempts.* FROM (
                    SELECT user_id FROM token_users WHERE tenant_id = $1 AND token = ANY(\(token)::text[])
                    UNION
                    SELECT user_id FROM devices WHERE tenant_id = $1 AND token = ANY(\(token)::text[])
                ) users CROSS JOIN LATERAL (
                    SELECT \(Self.deliveryColumns) FROM deliveries d
                    WHERE hashtextextended(d.user_id, 0) = hashtextextended(users.user_id, 0)
                      AND d.user_id = users.user_id AND d.tenant_id = $1 AND d.token = ANY(\(token)::text[])
                      AND \(after)
                    ORDER BY \(DeliveryQuery.order(of: "d")) LIMIT \(limit)
                ) attempts
                ORDER BY \(DeliveryQuery.order(of: "attempts")) LIMIT \(limit)
                """))
    }

    /// The attempts in `tenant` sent from `from` (included) to `to` (excluded), the latest first, at most `limit`,
    /// after `key` when given.
    package func deliveries(
        tenant: String, from: Date, to: Date, limit: Int = 1_000, after key: DeliveryKey? = nil
    ) async throws(RelayStoreError) -> [DeliveryRecord] {
        try await deliveryRows(Self.timeRangeDeliveries(tenant: tenant, from: from, to: to, limit: limit, after: key))
    }

    /// The statement of ``deliveries(tenant:from:to:limit:after:)``: the index of the tenant's hash and the time
    /// (`deliveries_tenant_time`) reads the tenant's rows from the page's key down, newest first.
    ///
    /// The page's oldest time (`edge`) is found first, by the time alone, in the index's order: a scan that stops
    /// after `limit` rows whatever the planner believes. The page is then sorted from the rows between the key and
    /// that time (a page and the ties of its last instant); sorting by the whole order at once, the planner, misled
    /// by a fresh day partition without statistics, read every row of the range below the key.
    static func timeRangeDeliveries(
        tenant: String, from: Date, to: Date, limit: Int, after key: DeliveryKey?
    ) -> PostgresQuery {
        var query = DeliveryQuery(tenant: tenant, key: key)
        let (from, to) = (query.bind(from), query.bind(to))
        let rows = """
            FROM deliveries d
            WHERE hashtextextended(d.tenant_id, 0) = hashtextextended($1, 0) AND d.tenant_id = $1
              AND d.sent_at >= \(from) AND d.sent_at < \(to) AND \(query.afterKey(of: "d"))
            """
        return query.sql(
            """
            WITH edge AS (SELECT d.sent_at \(rows) ORDER BY d.sent_at DESC OFFSET \(max(limit, 1) - 1) LIMIT 1)
            SELECT \(Self.deliveryColumns) \(rows) AND d.sent_at >= coalesce((SELECT sent_at FROM edge), \(from))
            ORDER BY \(DeliveryQuery.order(of: "d")) LIMIT \(limit)
            """)
    }

    // MARK: - Helpers

    static let deliveryColumns = """
        d.tenant_id, d.job_id, d.user_id, d.token, d.provider_message_id, d.outcome, d.reason, d.attempt::int8, d.sent_at, \
        d.answered_at, d.latency_ms::int8
        """

    /// Refuses records of a tenant that does not exist (the table has no foreign key: checking it per row
    /// cost more than the insert). A tenant found once is not looked up again.
    private func checkTenants(of records: [DeliveryRecord]) async throws(RelayStoreError) {
        // A batch is mostly runs of one tenant: each run's id is hashed once, not once per row.
        var tenants: Set<String> = []
        var last: String?
        for record in records where record.tenantID != last {
            last = record.tenantID
            tenants.insert(record.tenantID)
        }
        let unchecked = tenants.filter { !knownTenants.contains($0) }
        guard !unchecked.isEmpty else { return }
        var found: Set<String> = []
        try await mappingErrors {
            for try await id in try await database.query(
                "SELECT id FROM tenants WHERE id = ANY(\(Array(unchecked))::text[])", logger: logger
            ).decode(String.self) {
                found.insert(id)
            }
        }
        knownTenants.insert(found)
        if let missing = unchecked.subtracting(found).sorted().first { throw .unknownTenant(missing) }
    }

    /// Writes one batch with `INSERT … SELECT … FROM UNNEST(…)`: one round trip. A batch of one UTC day (as a
    /// fan-out's are) goes straight into that day's partition: routing each row through `deliveries` cost a
    /// fifth as much as the rest of its insert.
    ///
    /// Not `COPY … FROM STDIN`, which costs the server less: postgres-nio 1.33.2 stops the process
    /// (`preconditionFailure`, "Copy mode is only supported for extended queries") when the connection closes
    /// while a COPY is under way, as it does when PostgreSQL restarts (`Ops/scenarios/fault-postgres-restart.sh`).
    private func ensurePartitions(for dates: [Date]) async throws(RelayStoreError) -> [String] {
        return try await mappingErrors {
            var created: [String] = []
            for try await name in try await database.query(
                """
                SELECT pushrelay_ensure_delivery_partition(day)
                FROM (SELECT DISTINCT (s AT TIME ZONE 'UTC')::date AS day FROM UNNEST(\(dates)::timestamptz[]) AS s) days
                ORDER BY day
                """,
                logger: logger
            ).decode(String?.self) {
                if let name { created.append(name) }
            }
            return created
        }
    }

    /// Whether `error` says that a row's day has no partition: through `deliveries` "no partition of relation …
    /// found for row", straight into a day's partition an undefined table.
    private static func isMissingPartition(_ error: PSQLError) -> Bool {
        switch error.serverInfo?[.sqlState] {
        case "23514": (error.serverInfo?[.message] ?? "").contains("no partition")
        case "42P01": true
        default: false
        }
    }

    /// How many rows a long read decodes before it hands its thread back: the tasks of every tenant's requests share
    /// one cooperative pool of as many threads as cores, and a page of 1,000 rows decoded at once kept another
    /// tenant's request waiting for milliseconds.
    package static let rowsBetweenYields = 128

    private func deliveryRows(_ query: PostgresQuery) async throws(RelayStoreError) -> [DeliveryRecord] {
        return try await mappingErrors {
            var records: [DeliveryRecord] = []
            for try await row in try await database.query(query, logger: logger).decode(
                (String, String, String?, String, String?, String, String?, Int, Date, Date?, Int?).self)
            {
                guard let outcome = DeliveryOutcome(rawValue: row.5) else {
                    throw RelayStoreError.corruptRow("delivery row with unknown outcome \(row.5)")
                }
                records.append(
                    DeliveryRecord(
                        tenantID: row.0, jobID: row.1, userID: row.2, token: row.3, providerMessageID: row.4,
                        outcome: outcome,
                        reason: row.6, attempt: row.7, sentAt: row.8, answeredAt: row.9, latencyMilliseconds: row.10))
                if records.count.isMultiple(of: Self.rowsBetweenYields) { await Task.yield() }
            }
            return records
        }
    }
}

/// A leased page to mark done, by the statement that writes its last delivery rows when it has some.
struct PageCompletion {
    var jobID: UUID
    var page: Int
    var owner: String
    var counts: JobPageCounts

    /// The statement's common table expressions `page` and `job`, its placeholders made by `parameter`: `page` marks
    /// the page done with its counts when it is still leased to its owner (a row when it did), and `job` then
    /// completes the job, with the sums of its pages' counts, when it is running and planned and every other page is
    /// done as this statement sees them (a row when it did). Two pages finishing at once may each see the other
    /// open: ``RelayStore/completeJobPage(_:owner:counts:lastRows:)`` then completes the job in a statement of its
    /// own, after this one's commit.
    func tableExpressions(_ parameter: (any PostgresNonThrowingEncodable) -> String) -> String {
        let job = parameter(jobID)
        let page = parameter(page)
        let devices = parameter(counts.devices)
        let delivered = parameter(counts.delivered)
        let failed = parameter(counts.failed)
        let skipped = parameter(counts.skipped)
        return """
            page AS (
                UPDATE job_pages SET state = 'done', lease_owner = NULL, lease_until = NULL, devices = \(devices),
                    delivered = \(delivered), failed = \(failed), skipped = \(skipped),
                    deferred = \(parameter(counts.deferred))
                WHERE job_id = \(job) AND page = \(page) AND state = 'leased' AND lease_owner = \(parameter(owner))
                RETURNING job_id
            ), job AS (
                UPDATE jobs j SET state = 'completed', finished_at = now(), updated_at = now(),
                    devices = s.devices + \(devices), delivered = s.delivered + \(delivered),
                    failed = s.failed + \(failed), skipped = s.skipped + \(skipped)
                FROM page CROSS JOIN LATERAL (
                    SELECT coalesce(sum(devices), 0)::int8 AS devices, coalesce(sum(delivered), 0)::int8 AS delivered,
                           coalesce(sum(failed), 0)::int8 AS failed, coalesce(sum(skipped), 0)::int8 AS skipped
                    FROM job_pages WHERE job_id = \(job) AND page <> \(page)
                ) s
                WHERE j.id = page.job_id AND j.finished_at IS NULL AND j.state = 'running' AND j.planned_at IS NOT NULL
                  AND NOT EXISTS (
                      SELECT 1 FROM job_pages q
                      WHERE q.job_id = \(job) AND q.page <> \(page) AND q.state IN ('pending', 'leased')
                  )
                RETURNING 1
            )
            """
    }

    /// The select that ends the statement: one row when the page was marked done, whose value says whether the job
    /// was completed too.
    static let outcome = "SELECT EXISTS (SELECT 1 FROM job) FROM page"

    /// The statement that marks the page done (and its job, as ``tableExpressions(_:)`` says) without writing rows.
    var query: PostgresQuery {
        var bindings = PostgresBindings(capacity: 9)
        let expressions = tableExpressions {
            bindings.append($0)
            return "$\(bindings.count)"
        }
        return PostgresQuery(unsafeSQL: "WITH \(expressions)\n\(Self.outcome)", binds: bindings)
    }
}

/// A batch of delivery rows as one array per column, the parameters of ``RelayStore``'s `INSERT … UNNEST`;
/// `nil` text is sent as an empty string (stored as `NULL`), no answer time as `answered` false, no latency
/// as -1.
private struct DeliveryColumns {
    var tenantID: [String] = []
    var jobID: [String] = []
    var userID: [String] = []
    var token: [String] = []
    var providerMessageID: [String] = []
    var outcome: [String] = []
    var reason: [String] = []
    var attempt: [Int] = []
    var sentAt: [Date] = []
    var answered: [Bool] = []
    var answeredAt: [Date] = []
    var latency: [Int] = []
    var notificationType: [String] = []
    /// Where the rows go: the partition of their UTC day when they share one (its name is made of digits
    /// only), else `deliveries`, which routes each row.
    var table = "deliveries"

    /// The `INSERT` of these rows: a column whose value is the same in every row (the tenant, the job and the
    /// type in a fan-out's batch) is sent once, the others as arrays unnested side by side (`unnest` in the
    /// select list, which PostgreSQL runs in step without first copying the rows into a tuple store).
    ///
    /// With `completing`, the same statement then marks that page done and may complete its job
    /// (``PageCompletion/tableExpressions(_:)``), and returns a row when the page was done, saying whether the job
    /// was; the rows are written either way.
    func insertQuery(completing completion: PageCompletion? = nil) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 13)
        var unnested: [String] = []
        /// The column's value in the select list: one parameter when every row has the same value, else the
        /// next unnested array. The token is always unnested: it gives the number of rows.
        func column<Value: PostgresNonThrowingEncodable & Equatable>(
            _ values: [Value], type: String, once: Bool = true
        ) -> String where [Value]: PostgresNonThrowingEncodable {
            if once, let first = values.first, values.allSatisfy({ $0 == first }) {
                bindings.append(first)
                return "$\(bindings.count)::\(type)"
            }
            bindings.append(values)
            unnested.append("unnest($\(bindings.count)::\(type)[]) AS c\(unnested.count)")
            return "c\(unnested.count - 1)"
        }
        let tokenColumn = column(token, type: "text", once: false)
        let latencyColumn = column(latency, type: "int8")
        let values = [
            column(tenantID, type: "text"), column(jobID, type: "text"), "NULLIF(\(column(userID, type: "text")), '')",
            tokenColumn, "NULLIF(\(column(providerMessageID, type: "text")), '')", column(outcome, type: "text"),
            "NULLIF(\(column(reason, type: "text")), '')", column(attempt, type: "int8"),
            column(sentAt, type: "timestamptz"),
            "CASE WHEN \(column(answered, type: "bool")) THEN \(column(answeredAt, type: "timestamptz")) END",
            "CASE WHEN \(latencyColumn) >= 0 THEN \(latencyColumn) END",
            "NULLIF(\(column(notificationType, type: "text")), '')",
        ]
        let insert = """
            INSERT INTO \(table) (
                tenant_id, job_id, user_id, token, provider_message_id, outcome, reason, attempt, sent_at, answered_at,
                latency_ms, notification_type
            )
            SELECT \(values.joined(separator: ", "))
            FROM (SELECT \(unnested.joined(separator: ", "))) AS batch
            """
        guard let completion else { return PostgresQuery(unsafeSQL: insert, binds: bindings) }
        let expressions = completion.tableExpressions {
            bindings.append($0)
            return "$\(bindings.count)"
        }
        return PostgresQuery(
            unsafeSQL: "WITH written AS (\(insert)), \(expressions)\n\(PageCompletion.outcome)", binds: bindings)
    }

    /// The columns of `records`; a record with an empty tenant or job id, or an attempt out of range, refuses
    /// the whole batch.
    init(_ records: ArraySlice<DeliveryRecord>) throws(RelayStoreError) {
        for record in records {
            guard !record.tenantID.isEmpty, !record.jobID.isEmpty else {
                throw .invalidDeliveries(reason: "a record has an empty tenant or job id")
            }
            guard record.attempt >= 0, record.attempt <= Int(Int32.max) else {
                throw .invalidDeliveries(reason: "attempt \(record.attempt) is out of range")
            }
            tenantID.append(record.tenantID)
            jobID.append(record.jobID)
            userID.append(record.userID ?? "")
            // As stored in `devices` (an APNs token lower-cased, any other as the provider gave it).
            token.append(record.token)
            providerMessageID.append(record.providerMessageID ?? "")
            outcome.append(record.outcome.rawValue)
            reason.append(record.reason ?? "")
            attempt.append(record.attempt)
            sentAt.append(record.sentAt)
            answered.append(record.answeredAt != nil)
            answeredAt.append(record.answeredAt ?? record.sentAt)
            latency.append(min(record.latencyMilliseconds ?? -1, Int(Int32.max)))
            notificationType.append(record.notificationType ?? "")
        }
        // The name follows `pushrelay_ensure_delivery_partition` (migration 3).
        let dayNumber = { (date: Date) in Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) }
        if let first = sentAt.first, sentAt.allSatisfy({ dayNumber($0) == dayNumber(first) }) {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            let day = calendar.dateComponents([.year, .month, .day], from: first)
            if let year = day.year, let month = day.month, let date = day.day, (1...9999).contains(year) {
                table = "deliveries_p" + String(format: "%04d%02d%02d", year, month, date)
            }
        }
    }
}

/// Tenant ids known to exist, shared by the copies of one ``RelayStore``.
final class KnownTenants: Sendable {
    private let ids = Mutex<Set<String>>([])

    /// Whether `id` was found before.
    func contains(_ id: String) -> Bool { ids.withLock { $0.contains(id) } }

    /// Remembers `found`.
    func insert(_ found: Set<String>) { ids.withLock { $0.formUnion(found) } }
}

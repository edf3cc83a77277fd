package import Foundation
import Logging
import PostgresNIO
import PushRelayProtocol

extension RelayStore {
    /// Leases one job that is due and not yet planned (or whose planner's lease ran out) to `owner` for
    /// `lease`: the caller writes its pages (``addJobPage(jobID:tenant:page:dueAt:tokens:users:skipped:done:leasedTo:lease:)``)
    /// and then calls ``finishPlanning(jobID:owner:)``. Jobs are taken with `FOR UPDATE SKIP LOCKED`, so
    /// several processes plan different jobs, in `tenants`' order (least served first; a tenant not listed before
    /// all of them), then oldest first. A disabled tenant's jobs wait until it is enabled again.
    package func claimJobForPlanning(
        owner: String, lease: Duration, tenants: [String] = []
    ) async throws(RelayStoreError) -> JobRecord? {
        return try await mappingErrors {
            for row in try await database.query(
                """
                UPDATE jobs j SET planning_owner = \(owner),
                    planning_until = now() + \(interval: lease), updated_at = now()
                WHERE id = (
                    SELECT id FROM jobs
                    WHERE planned_at IS NULL AND state IN ('accepted', 'scheduled')
                      AND tenant_id IN (SELECT id FROM tenants WHERE enabled)
                      AND coalesce(send_at, created_at) <= now()
                      AND (planning_until IS NULL OR planning_until < now())
                    ORDER BY coalesce(array_position(\(tenants)::text[], tenant_id), 0), coalesce(send_at, created_at)
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                )
                RETURNING \(unescaped: Self.jobColumns)
                """,
                preparedAs: ClaimJobForPlanning.self, logger: logger
            ) {
                return try Self.job(from: row.decode(JobColumns.self))
            }
            return nil
        }
    }

    /// Writes one page of a job being planned. Writing the same page again (a planner that took over
    /// after another one died) changes nothing. With `done`, the page is written finished with `skipped`
    /// recipients (the planner's summary of recipients without a device). With `owner`, a page this call writes
    /// is leased to it at once for `lease` (its first claim, as by ``claimJobPage(owner:lease:)``).
    ///
    /// - Returns: the page as leased to `owner` when this call wrote it leased; else `nil`.
    @discardableResult
    package func addJobPage(
        jobID: String,
        tenant: String,
        page: Int,
        dueAt: Date,
        tokens: [String],
        users: [String],
        skipped: Int = 0,
        done: Bool = false,
        leasedTo owner: String? = nil,
        lease: Duration = .seconds(30)
    ) async throws(RelayStoreError) -> JobPage? {
        guard tokens.count == users.count else { throw .invalidArgument("a page needs one user per token") }
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        let owner = done ? nil : owner
        let state = done ? "done" : owner == nil ? "pending" : "leased"
        return try await mappingErrors {
            let written = try await database.query(
                """
                INSERT INTO job_pages (
                    job_id, page, tenant_id, due_at, tokens, users, state, skipped, lease_owner, lease_until, claims
                )
                VALUES (
                    \(uuid), \(page), \(tenant), \(dueAt), \(tokens)::text[], \(users)::text[], \(state), \(skipped),
                    \(owner)::text,
                    CASE WHEN \(owner)::text IS NOT NULL THEN now() + \(interval: lease) END,
                    CASE WHEN \(owner)::text IS NULL THEN 0 ELSE 1 END
                )
                ON CONFLICT (job_id, page) DO NOTHING
                RETURNING 1
                """,
                preparedAs: AddJobPage.self, logger: logger
            )
            guard owner != nil, !written.isEmpty else { return nil }
            return JobPage(
                jobID: uuid.uuidString.lowercased(), page: page, tenantID: tenant, dueAt: dueAt, tokens: tokens,
                users: users, topicRange: nil, claims: 1)
        }
    }

    /// Reads the active devices of `recipients` in `tenant`, less those of `excludedUsers`, and writes them as page
    /// `page` of a job being planned, all due at `dueAt`, in one statement: a page of listed devices (by token,
    /// as ``addJobPage(jobID:tenant:page:dueAt:tokens:users:skipped:done:leasedTo:lease:)`` writes it). No page
    /// is written when no device is found; a page written before (a planner that took over) is left as it is.
    /// With `owner`, a page this call writes is leased to it at once for `lease` (its first claim). Only devices
    /// subscribed to every topic of `subscribedTo` are read (a notification type with a `subscription`).
    package func addListedJobPage(
        jobID: String,
        tenant: String,
        page: Int,
        dueAt: Date,
        recipients: ListedRecipients,
        excludedUsers: [String],
        subscribedTo topics: [String] = [],
        leasedTo owner: String? = nil,
        lease: Duration = .seconds(30)
    ) async throws(RelayStoreError) -> ListedPageWrite {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        switch recipients {
        case .users(let users):
            return try await addListedJobPage(
                uuid, tenant: tenant, page: page, dueAt: dueAt, selection: "user_id", values: users,
                excludedUsers: excludedUsers, topics: topics, owner: owner, lease: lease,
                preparedAs: AddUsersJobPage.self)
        case .tokens(let tokens):
            return try await addListedJobPage(
                uuid, tenant: tenant, page: page, dueAt: dueAt, selection: "token",
                values: Self.storedForms(of: tokens),
                excludedUsers: excludedUsers, topics: topics, owner: owner, lease: lease,
                preparedAs: AddTokensJobPage.self)
        }
    }

    /// ``addListedJobPage(jobID:tenant:page:dueAt:recipients:excludedUsers:subscribedTo:leasedTo:lease:)`` of the
    /// devices whose `selection` column holds one of `values`, prepared as `name` (one name for each column).
    private func addListedJobPage<Name: PreparedStatementName>(
        _ uuid: UUID, tenant: String, page: Int, dueAt: Date, selection: String, values: [String],
        excludedUsers: [String], topics: [String], owner: String?, lease: Duration, preparedAs name: Name.Type
    ) async throws(RelayStoreError) -> ListedPageWrite {
        guard !values.isEmpty else { return ListedPageWrite(devices: []) }
        return try await mappingErrors {
            let rows = try await database.query(
                """
                WITH page AS (
                    SELECT coalesce(array_agg(user_id ORDER BY token, user_id), '{}') AS users,
                           coalesce(array_agg(token ORDER BY token, user_id), '{}') AS tokens,
                           coalesce(array_agg(\(unescaped: Destination.deviceColumn) ORDER BY token, user_id), '{}')
                               AS destinations,
                           coalesce(array_agg(coalesce(time_zone, '') ORDER BY token, user_id), '{}') AS time_zones
                    FROM devices
                    WHERE tenant_id = \(tenant) AND active AND \(unescaped: selection) = ANY(\(values)::text[])
                      AND user_id <> ALL(\(excludedUsers)::text[]) AND (topics @> \(topics)::text[] OR topics = '{}')
                ), written AS (
                    INSERT INTO job_pages (
                        job_id, page, tenant_id, due_at, tokens, users, state, lease_owner, lease_until, claims
                    )
                    SELECT \(uuid), \(page), \(tenant), \(dueAt), p.tokens, p.users,
                           CASE WHEN \(owner)::text IS NULL THEN 'pending' ELSE 'leased' END, \(owner)::text,
                           CASE WHEN \(owner)::text IS NOT NULL
                               THEN now() + \(interval: lease) END,
                           CASE WHEN \(owner)::text IS NULL THEN 0 ELSE 1 END
                    FROM page p WHERE cardinality(p.tokens) > 0
                    ON CONFLICT (job_id, page) DO NOTHING
                    RETURNING 1
                )
                SELECT p.users, p.tokens, p.destinations, p.time_zones, EXISTS (SELECT 1 FROM written) FROM page p
                """,
                preparedAs: name, logger: logger
            )
            guard let row = rows.first else { return ListedPageWrite(devices: []) }
            let (users, tokens, destinations, timeZones, written) = try row.decode(
                ([String], [String], [String], [String], Bool).self)
            var write = ListedPageWrite(
                devices: try Self.targets(
                    users: users, tokens: tokens, destinations: destinations, timeZones: timeZones))
            if written, owner != nil {
                write.leased = JobPage(
                    jobID: uuid.uuidString.lowercased(), page: page, tenantID: tenant, dueAt: dueAt, tokens: tokens,
                    users: users, topicRange: nil, claims: 1)
            }
            return write
        }
    }

    /// Writes the next page of a topic fan-out whose devices are all due at `dueAt`, in one statement, as a
    /// ``TopicRange``: the active devices of `tenant` subscribed to `topic` whose token comes after `after`
    /// (`nil`: from the first), about `limit` of them (a token's rows are never split, as in
    /// ``activeDevices(tenant:topic:after:limit:)``). Its devices are read when it is sent; the page stores only
    /// its range and how many devices the planner counted in it, less those of `excludedUsers` (which the sender
    /// leaves out too). No page is written when every device read is excluded. One index scan reads the page:
    /// `FETCH FIRST … WITH TIES` keeps every row of its last token (instead of a first scan of `limit` rows and a
    /// second one for the last token's rows). A page written before (a planner
    /// that took over) is left as it is, and its range goes on: the next page starts after its stored last token.
    ///
    /// With `owner`, a page this call writes is leased to it at once for `lease` (its first claim, as by
    /// ``claimJobPage(owner:lease:)``) and comes with its devices as read, less those of `excludedUsers`, in the
    /// order of ``activeDevices(tenant:in:excludedUsers:)``: the owner sends it without claiming it or reading
    /// its range.
    ///
    /// Without `owner`, a new page comes with its devices (in the same order) when `withDevices` asks for them.
    ///
    /// - Returns: `nil` when no device comes after `after` and the job has no page `page`; else the page's last
    ///   token (the next page's `after`; the stored one when the page stood), the devices read (fewer than
    ///   `limit`: the topic is done, unless the page stood), the devices counted in the page and, when the page is
    ///   new and leased to `owner` or `withDevices` asks, its devices.
    package func addTopicJobPage(
        jobID: String,
        tenant: String,
        page: Int,
        dueAt: Date,
        topic: String,
        after: String?,
        limit: Int,
        excludedUsers: [String],
        leasedTo owner: String? = nil,
        lease: Duration = .seconds(30),
        withDevices: Bool = false
    ) async throws(RelayStoreError) -> TopicPageWrite? {
        guard limit > 0 else { throw .invalidArgument("the page size \(limit) is not positive") }
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        let after = after ?? ""
        return try await mappingErrors {
            for try await (lastToken, devicesRead, pageDevices, stood, isNew, users, tokens, destinations, timeZones)
                in try await database.query(
                    """
                    WITH selected AS MATERIALIZED (
                        SELECT \(unescaped: DeviceTarget.columns), registered_at FROM devices
                        WHERE tenant_id = \(tenant) AND active AND (topics @> ARRAY[\(topic)]::text[] OR topics = '{}') AND token > \(after)
                        ORDER BY token FETCH FIRST \(limit) ROWS WITH TIES
                    ), counts AS (
                        SELECT count(*)::int8 AS read,
                               count(*) FILTER (WHERE user_id <> ALL(\(excludedUsers)::text[]))::int8 AS kept,
                               max(token) AS last
                        FROM selected
                    ), written AS (
                        INSERT INTO job_pages (
                            job_id, page, tenant_id, due_at, tokens, users, state, skipped, topic, range_after, range_last,
                            range_devices, lease_owner, lease_until, claims
                        )
                        SELECT \(uuid), \(page), \(tenant), \(dueAt), '{}', '{}',
                               CASE WHEN \(owner)::text IS NULL THEN 'pending' ELSE 'leased' END, 0, \(topic), \(after),
                               c.last, c.kept, \(owner)::text,
                               CASE WHEN \(owner)::text IS NOT NULL THEN now() + \(interval: lease) END,
                               CASE WHEN \(owner)::text IS NULL THEN 0 ELSE 1 END
                        FROM counts c WHERE c.kept > 0
                        ON CONFLICT (job_id, page) DO NOTHING
                        RETURNING 1
                    )
                    SELECT coalesce(s.last, c.last), c.read, c.kept, s.last IS NOT NULL,
                           EXISTS (SELECT 1 FROM written), d.*
                    FROM counts c,
                         (SELECT (SELECT range_last FROM job_pages WHERE job_id = \(uuid) AND page = \(page)) AS last) s,
                         LATERAL (
                        SELECT coalesce(array_agg(user_id), '{}'), coalesce(array_agg(token), '{}'),
                               coalesce(array_agg(destination), '{}'), coalesce(array_agg(coalesce(time_zone, '')), '{}')
                        FROM (
                            SELECT * FROM selected
                            WHERE \(owner != nil || withDevices) AND user_id <> ALL(\(excludedUsers)::text[])
                            ORDER BY token, user_id, registered_at DESC
                        ) page
                    ) d
                    """,
                    logger: logger
                ).decode((String?, Int, Int, Bool, Bool, [String], [String], [String], [String]).self)
            {
                guard let lastToken else { return nil }
                var write = TopicPageWrite(
                    lastToken: lastToken, devicesRead: devicesRead, stood: stood, pageDevices: pageDevices)
                if isNew, owner != nil || withDevices {
                    let devices = try Self.targets(
                        users: users, tokens: tokens, destinations: destinations, timeZones: timeZones)
                    if owner != nil {
                        let page = JobPage(
                            jobID: uuid.uuidString.lowercased(), page: page, tenantID: tenant, dueAt: dueAt, tokens: [],
                            users: [], topicRange: TopicRange(topic: topic, after: after, last: lastToken), claims: 1)
                        write.leased = (page, devices)
                    } else {
                        write.pendingDevices = devices
                    }
                }
                return write
            }
            return nil
        }
    }

    /// The pages of listed devices (not topic ranges) already written for job `jobID`, numbered from 1; `nil` when
    /// there are none. A planner that claims a job another planner began (it died, or lost the database) reads
    /// them before writing: its own pages can differ from them (devices registered or gone since, a slice of
    /// users without devices now), so it writes the devices they do not hold as pages after them, instead of
    /// writing its pages again over the same numbers. Every token comes back at once: a planner that takes over a
    /// job of a million listed devices holds a million tokens while it plans.
    package func listedPagesWritten(jobID: String) async throws(RelayStoreError) -> ListedPagesWritten? {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        return try await mappingErrors {
            for try await (lastPage, tokens) in try await database.query(
                """
                SELECT max(page)::int8, coalesce(array_agg(t.token) FILTER (WHERE t.token IS NOT NULL), '{}')
                FROM job_pages p LEFT JOIN LATERAL unnest(p.tokens) AS t(token) ON true
                WHERE p.job_id = \(uuid) AND p.page > 0 AND p.topic IS NULL
                """,
                logger: logger
            ).decode((Int?, [String]).self) {
                return lastPage.map { ListedPagesWritten(lastPage: $0, tokens: Set(tokens)) }
            }
            return nil
        }
    }

    /// Ends `owner`'s planning lease on a job it has not planned, so that any planner claims it at once (a
    /// process stopping with a job handed to it and not planned yet). Returns `false` when `owner` did not hold it.
    @discardableResult
    package func releasePlanning(jobID: String, owner: String) async throws(RelayStoreError) -> Bool {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        return try await countRows(
            """
            UPDATE jobs SET planning_owner = NULL, planning_until = NULL, updated_at = now()
            WHERE id = \(uuid) AND planning_owner = \(owner) AND planned_at IS NULL
            RETURNING 1::int8
            """
        ) == 1
    }

    /// Extends `owner`'s planning lease on a job it is still planning by `lease` from now, so that a planning
    /// that lasts longer than one lease is not taken over. Returns `false` when `owner` no longer holds it.
    @discardableResult
    package func renewPlanningLease(jobID: String, owner: String, lease: Duration) async throws(RelayStoreError)
        -> Bool
    {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        return try await countRows(
            """
            UPDATE jobs SET planning_until = now() + \(interval: lease), updated_at = now()
            WHERE id = \(uuid) AND planning_owner = \(owner) AND planned_at IS NULL
            RETURNING 1::int8
            """
        ) == 1
    }

    /// Marks a job planned by `owner`: `running`, or `completed` at once when it has no page left to send.
    /// Returns `false` when `owner` no longer holds the planning lease (another planner took over).
    @discardableResult
    package func finishPlanning(jobID: String, owner: String) async throws(RelayStoreError) -> Bool {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        let updated = try await countRows(
            """
            UPDATE jobs SET planned_at = now(), planning_owner = NULL, planning_until = NULL, state = 'running',
                updated_at = now()
            WHERE id = \(uuid) AND planning_owner = \(owner) AND planned_at IS NULL
              AND state IN ('accepted', 'scheduled')
            RETURNING 1::int8
            """,
            preparedAs: FinishPlanning.self
        )
        try await completeJobIfDone(jobID: jobID)
        return updated == 1
    }

}

/// The planners' statements, prepared (``PreparedStatementName``).
private enum AddJobPage: PreparedStatementName {}
private enum AddUsersJobPage: PreparedStatementName {}
private enum AddTokensJobPage: PreparedStatementName {}
private enum ClaimJobForPlanning: PreparedStatementName {}
private enum FinishPlanning: PreparedStatementName {}

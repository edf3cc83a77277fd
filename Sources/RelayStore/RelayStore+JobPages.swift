public import Foundation
import Logging
import PostgresNIO

/// A page of a job's fan-out: up to a few hundred devices due at one time, leased by one relay process.
public struct JobPage: Sendable, Hashable {
    /// The job the page belongs to.
    public var jobID: String
    /// The page's number within the job (0 is the planner's own summary row).
    public var page: Int
    /// The tenant of the job.
    public var tenantID: String
    /// When the page may be sent.
    public var dueAt: Date
    /// The devices' tokens (empty for a topic range page).
    public var tokens: [String]
    /// The devices' users, one per token (empty for a topic range page).
    public var users: [String]
    /// For a topic page due at one time, the run of the topic's devices it sends to, resolved when it is sent;
    /// `nil` for a page of listed devices (`tokens` and `users`).
    public var topicRange: TopicRange?
    /// How many times the page has been claimed; more than 1 means a process lost it (crash or stall).
    public var claims: Int
}

/// A run of a topic's devices in token order: the active devices subscribed to `topic` whose token (as stored)
/// comes after `after` and is at most `last`. A page sends to the devices in its range when it is sent, so a
/// device registered into the range after planning gets the notification and one unregistered does not
/// (unless its planner leased it to its own process at once, with the devices it read: see
/// ``RelayStore/addTopicJobPage(jobID:tenant:page:dueAt:topic:after:limit:excludedUsers:leasedTo:lease:)``).
public struct TopicRange: Sendable, Hashable {
    /// The subscription topic.
    public var topic: String
    /// The token before the range (excluded); empty for the topic's first page.
    public var after: String
    /// The range's last token (included).
    public var last: String

    /// The range of `topic`'s devices after `after` up to `last`.
    public init(topic: String, after: String, last: String) {
        self.topic = topic
        self.after = after
        self.last = last
    }
}

/// What ``RelayStore/addTopicJobPage(jobID:tenant:page:dueAt:topic:after:limit:excludedUsers:leasedTo:lease:)``
/// wrote.
public struct TopicPageWrite: Sendable {
    /// The page's last token: the next page's `after`.
    public var lastToken: String
    /// The devices read; fewer than the limit when the topic is done (unless the page stood: see `stood`).
    public var devicesRead: Int
    /// Whether the page was written before (by a planner that this one took over from) and stands: `lastToken`
    /// is its stored last token, and the devices read from `after` say nothing of where the topic ends.
    public var stood: Bool
    /// The devices counted in the page (those of excluded users left out); no page was written when 0.
    public var pageDevices: Int
    /// The page as leased to its owner, with its devices as read, when the page is new and was leased at once
    /// (`nil` otherwise; a page written before may have another range).
    public var leased: (page: JobPage, devices: [DeviceTarget])?
    /// The devices of the page as read, when the page is new, was not leased, and they were asked for
    /// (`withDevices`): the planning process keeps them for the loop of its own that claims the page.
    public var pendingDevices: [DeviceTarget]?
}

/// The recipients a page of listed devices is written for: users (their active devices) or device tokens.
public enum ListedRecipients: Sendable, Hashable {
    /// The active devices of these users.
    case users([String])
    /// The active devices holding these tokens (hex, either case; strings that are not tokens match nothing).
    case tokens([String])
}

/// The pages of listed devices an earlier planner wrote for a job (``RelayStore/listedPagesWritten(jobID:)``): a
/// planner that takes the job over goes on after them, to the devices they do not hold.
public struct ListedPagesWritten: Sendable, Hashable {
    /// The highest page number written.
    public var lastPage: Int
    /// The tokens the pages hold.
    public var tokens: Set<String>
}

/// What ``RelayStore/addListedJobPage(jobID:tenant:page:dueAt:recipients:excludedUsers:leasedTo:lease:)`` read
/// and wrote.
public struct ListedPageWrite: Sendable {
    /// The page's devices as read, by token (no page was written when there are none).
    public var devices: [DeviceTarget]
    /// The page as leased to its owner, when this call wrote it leased (`nil` otherwise).
    public var leased: JobPage?
}

/// The counts a finished page adds to its job.
public struct JobPageCounts: Sendable, Hashable {
    /// Devices sent to.
    public var devices: Int
    /// Devices APNs accepted the notification for.
    public var delivered: Int
    /// Devices whose attempt failed (rejected, dead token, gave up).
    public var failed: Int
    /// Recipients skipped by policy or without a device.
    public var skipped: Int
    /// Devices moved to a later page (quiet hours).
    public var deferred: Int

    /// Counts with the given values.
    public init(devices: Int = 0, delivered: Int = 0, failed: Int = 0, skipped: Int = 0, deferred: Int = 0) {
        self.devices = devices
        self.delivered = delivered
        self.failed = failed
        self.skipped = skipped
        self.deferred = deferred
    }
}

/// How far a job's fan-out has come.
public struct JobProgress: Sendable, Hashable {
    /// The job's row.
    public var job: JobRecord
    /// Whether its pages are written.
    public var planned: Bool
    /// Pages due now (or overdue) that are not done.
    public var pagesDue: Int
    /// Pages due later (scheduled, deferred by quiet hours).
    public var pagesLater: Int
}

extension RelayStore {
    /// Leases one job that is due and not yet planned (or whose planner's lease ran out) to `owner` for
    /// `lease`: the caller writes its pages (``addJobPage(jobID:tenant:page:dueAt:tokens:users:skipped:done:leasedTo:lease:)``)
    /// and then calls ``finishPlanning(jobID:owner:)``. Jobs are taken with `FOR UPDATE SKIP LOCKED`, so
    /// several processes plan different jobs.
    public func claimJobForPlanning(owner: String, lease: Duration) async throws(RelayStoreError) -> JobRecord? {
        let seconds = Double(lease.components.seconds)
        do {
            for row in try await database.query(
                """
                UPDATE jobs j SET planning_owner = \(owner),
                    planning_until = now() + \(seconds)::float8 * interval '1 second', updated_at = now()
                WHERE id = (
                    SELECT id FROM jobs
                    WHERE planned_at IS NULL AND state IN ('accepted', 'scheduled')
                      AND coalesce(send_at, created_at) <= now()
                      AND (planning_until IS NULL OR planning_until < now())
                    ORDER BY coalesce(send_at, created_at)
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
        } catch let error as RelayStoreError {
            throw error
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Writes one page of a job being planned. Writing the same page again (a planner that took over
    /// after another one died) changes nothing. With `done`, the page is written finished with `skipped`
    /// recipients (the planner's summary of recipients without a device). With `owner`, a page this call writes
    /// is leased to it at once for `lease` (its first claim, as by ``claimJobPage(owner:lease:)``).
    ///
    /// - Returns: the page as leased to `owner` when this call wrote it leased; else `nil`.
    @discardableResult
    public func addJobPage(
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
        let seconds = lease.fractionalSeconds
        do {
            let written = try await database.query(
                """
                INSERT INTO job_pages (
                    job_id, page, tenant_id, due_at, tokens, users, state, skipped, lease_owner, lease_until, claims
                )
                VALUES (
                    \(uuid), \(page), \(tenant), \(dueAt), \(tokens)::text[], \(users)::text[], \(state), \(skipped),
                    \(owner)::text,
                    CASE WHEN \(owner)::text IS NOT NULL THEN now() + \(seconds)::float8 * interval '1 second' END,
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
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Reads the active devices of `recipients` in `tenant`, less those of `excludedUsers`, and writes them as page
    /// `page` of a job being planned, all due at `dueAt`, in one statement: a page of listed devices (by token,
    /// as ``addJobPage(jobID:tenant:page:dueAt:tokens:users:skipped:done:leasedTo:lease:)`` writes it). No page
    /// is written when no device is found; a page written before (a planner that took over) is left as it is.
    /// With `owner`, a page this call writes is leased to it at once for `lease` (its first claim). Only devices
    /// subscribed to every topic of `subscribedTo` are read (a notification type with a `subscription`).
    public func addListedJobPage(
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
                values: Self.normalizedTokens(tokens),
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
        do {
            let rows = try await database.query(
                """
                WITH page AS (
                    SELECT coalesce(array_agg(user_id ORDER BY token, user_id), '{}') AS users,
                           coalesce(array_agg(token ORDER BY token, user_id), '{}') AS tokens,
                           coalesce(array_agg(environment ORDER BY token, user_id), '{}') AS environments,
                           coalesce(array_agg(coalesce(time_zone, '') ORDER BY token, user_id), '{}') AS time_zones
                    FROM devices
                    WHERE tenant_id = \(tenant) AND active AND \(unescaped: selection) = ANY(\(values)::text[])
                      AND user_id <> ALL(\(excludedUsers)::text[]) AND topics @> \(topics)::text[]
                ), written AS (
                    INSERT INTO job_pages (
                        job_id, page, tenant_id, due_at, tokens, users, state, lease_owner, lease_until, claims
                    )
                    SELECT \(uuid), \(page), \(tenant), \(dueAt), p.tokens, p.users,
                           CASE WHEN \(owner)::text IS NULL THEN 'pending' ELSE 'leased' END, \(owner)::text,
                           CASE WHEN \(owner)::text IS NOT NULL
                               THEN now() + \(lease.fractionalSeconds)::float8 * interval '1 second' END,
                           CASE WHEN \(owner)::text IS NULL THEN 0 ELSE 1 END
                    FROM page p WHERE cardinality(p.tokens) > 0
                    ON CONFLICT (job_id, page) DO NOTHING
                    RETURNING 1
                )
                SELECT p.users, p.tokens, p.environments, p.time_zones, EXISTS (SELECT 1 FROM written) FROM page p
                """,
                preparedAs: name, logger: logger
            )
            guard let row = rows.first else { return ListedPageWrite(devices: []) }
            let (users, tokens, environments, timeZones, written) = try row.decode(
                ([String], [String], [String], [String], Bool).self)
            var write = ListedPageWrite(
                devices: try Self.targets(
                    users: users, tokens: tokens, environments: environments, timeZones: timeZones))
            if written, owner != nil {
                write.leased = JobPage(
                    jobID: uuid.uuidString.lowercased(), page: page, tenantID: tenant, dueAt: dueAt, tokens: tokens,
                    users: users, topicRange: nil, claims: 1)
            }
            return write
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Writes the next page of a topic fan-out whose devices are all due at `dueAt`, in one statement, as a
    /// ``TopicRange``: the active devices of `tenant` subscribed to `topic` whose token comes after `after`
    /// (`nil`: from the first), about `limit` of them (a token's rows are never split, as in
    /// ``activeDevices(tenant:topic:after:limit:)``). Its devices are read when it is sent; the page stores only
    /// its range and how many devices the planner counted in it, less those of `excludedUsers` (which the sender
    /// leaves out too). No page is written when every device read is excluded. One index scan reads the page:
    /// `FETCH FIRST … WITH TIES` keeps every row of its last token (a first scan of `limit` rows and a second one
    /// for the last token's rows cost 6.4 ms a page of 4,000 where this costs 5.6 ms). A page written before (a planner
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
    public func addTopicJobPage(
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
        let after = after?.lowercased() ?? ""
        let seconds = lease.fractionalSeconds
        do {
            for try await (lastToken, devicesRead, pageDevices, stood, isNew, users, tokens, environments, timeZones)
                in try await database.query(
                    """
                    WITH selected AS MATERIALIZED (
                        SELECT \(unescaped: DeviceTarget.columns), registered_at FROM devices
                        WHERE tenant_id = \(tenant) AND active AND topics @> ARRAY[\(topic)]::text[] AND token > \(after)
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
                               CASE WHEN \(owner)::text IS NOT NULL THEN now() + \(seconds)::float8 * interval '1 second' END,
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
                               coalesce(array_agg(environment), '{}'), coalesce(array_agg(coalesce(time_zone, '')), '{}')
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
                        users: users, tokens: tokens, environments: environments, timeZones: timeZones)
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
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// The pages of listed devices (not topic ranges) already written for job `jobID`, numbered from 1; `nil` when
    /// there are none. A planner that claims a job another planner began (it died, or lost the database) reads
    /// them before writing: its own pages can differ from them (devices registered or gone since, a slice of
    /// users without devices now), so it writes the devices they do not hold as pages after them, instead of
    /// writing its pages again over the same numbers. Every token comes back at once: a planner that takes over a
    /// job of a million listed devices holds a million tokens while it plans.
    public func listedPagesWritten(jobID: String) async throws(RelayStoreError) -> ListedPagesWritten? {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        do {
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
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Ends `owner`'s planning lease on a job it has not planned, so that any planner claims it at once (a
    /// process stopping with a job handed to it and not planned yet). Returns `false` when `owner` did not hold it.
    @discardableResult
    public func releasePlanning(jobID: String, owner: String) async throws(RelayStoreError) -> Bool {
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        return try await countRows(
            """
            UPDATE jobs SET planning_owner = NULL, planning_until = NULL, updated_at = now()
            WHERE id = \(uuid) AND planning_owner = \(owner) AND planned_at IS NULL
            RETURNING 1::int8
            """
        ) == 1
    }

    /// Marks a job planned by `owner`: `running`, or `completed` at once when it has no page left to send.
    /// Returns `false` when `owner` no longer holds the planning lease (another planner took over).
    @discardableResult
    public func finishPlanning(jobID: String, owner: String) async throws(RelayStoreError) -> Bool {
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

    /// Leases the next due page to `owner` for `lease`: a pending page that is due, or a leased one whose
    /// lease ran out (its process died or stalled). Pages of cancelled jobs are not handed out.
    public func claimJobPage(owner: String, lease: Duration) async throws(RelayStoreError) -> JobPage? {
        let seconds = Double(lease.components.seconds)
        do {
            for row in try await database.query(
                """
                UPDATE job_pages p SET state = 'leased', lease_owner = \(owner),
                    lease_until = now() + \(seconds)::float8 * interval '1 second', claims = claims + 1
                WHERE (job_id, page) = (
                    SELECT q.job_id, q.page FROM job_pages q JOIN jobs j ON j.id = q.job_id
                    WHERE ((q.state = 'pending' AND q.due_at <= now()) OR (q.state = 'leased' AND q.lease_until < now()))
                      AND j.state IN ('accepted', 'scheduled', 'running')
                    ORDER BY q.due_at, q.job_id, q.page
                    LIMIT 1
                    FOR UPDATE OF q SKIP LOCKED
                )
                RETURNING job_id::text, page, tenant_id, due_at, tokens, users, claims, topic, range_after, range_last
                """,
                preparedAs: ClaimJobPage.self, logger: logger
            ) {
                let (job, page, tenant, dueAt, tokens, users, claims, topic, after, last) = try row.decode(
                    (String, Int, String, Date, [String], [String], Int, String?, String?, String?).self)
                let range = topic.map { TopicRange(topic: $0, after: after ?? "", last: last ?? "") }
                return JobPage(
                    jobID: job, page: page, tenantID: tenant, dueAt: dueAt, tokens: tokens, users: users,
                    topicRange: range, claims: claims
                )
            }
            return nil
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Extends `owner`'s lease on a page; `false` when the lease was lost (another process has the page).
    public func renewJobPageLease(_ page: JobPage, owner: String, lease: Duration) async throws(RelayStoreError)
        -> Bool
    {
        let seconds = Double(lease.components.seconds)
        guard let uuid = UUID(uuidString: page.jobID) else { return false }
        return try await countRows(
            """
            UPDATE job_pages SET lease_until = now() + \(seconds)::float8 * interval '1 second'
            WHERE job_id = \(uuid) AND page = \(page.page) AND state = 'leased' AND lease_owner = \(owner)
            RETURNING 1::int8
            """
        ) == 1
    }

    /// Marks `owner`'s page done with its counts, and completes the job when no page is left.
    ///
    /// `lastRows`, the page's delivery rows not written yet, are written by the statement that marks the page
    /// done: the page is done exactly when its last rows are recorded, in one round trip. They are written even
    /// when the page is no longer leased to `owner` (they are sends that happened); the page is then left as it is.
    /// The same statement completes the job when every other page is done as it sees them, so the last page of a
    /// job ends it in one round trip; when it did not (another page finished at the same moment, unseen), a
    /// second statement looks again once the first is committed.
    public func completeJobPage(
        _ page: JobPage, owner: String, counts: JobPageCounts, lastRows: [DeliveryRecord] = []
    ) async throws(RelayStoreError) {
        guard let uuid = UUID(uuidString: page.jobID) else {
            try await recordDeliveries(lastRows)
            return
        }
        let completion = PageCompletion(jobID: uuid, page: page.page, owner: owner, counts: counts)
        let jobCompleted: Bool?
        if lastRows.isEmpty {
            do {
                jobCompleted = try await database.query(
                    completion.query, preparedAs: CompleteJobPage.self, logger: logger
                ).first?.decode(Bool.self)
            } catch {
                throw relayStoreError(from: error)
            }
        } else {
            jobCompleted = try await recordDeliveries(lastRows, completing: completion)
        }
        if jobCompleted == false {
            try await completeJobIfDone(jobID: page.jobID)
        }
    }

    /// Adds a page of devices deferred to `dueAt` (quiet hours) to a running job.
    public func deferJobDevices(
        jobID: String,
        tenant: String,
        dueAt: Date,
        tokens: [String],
        users: [String]
    ) async throws(RelayStoreError) {
        guard tokens.count == users.count else { throw .invalidArgument("a page needs one user per token") }
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        // The page number is the next free one; a concurrent writer taking it makes this try again.
        for _ in 0..<10 {
            do {
                try await database.query(
                    """
                    INSERT INTO job_pages (job_id, page, tenant_id, due_at, tokens, users)
                    SELECT \(uuid), coalesce(max(page), 0) + 1, \(tenant), \(dueAt), \(tokens)::text[], \(users)::text[]
                    FROM job_pages WHERE job_id = \(uuid)
                    """,
                    logger: logger
                )
                return
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
                continue
            } catch {
                throw relayStoreError(from: error)
            }
        }
        throw .databaseUnavailable("could not add a deferred page to job \(jobID)")
    }

    /// The recorded outcome of each of `tokens` that already has a delivery row for the job (a page taken
    /// over from a process that died sends only to the others).
    public func recordedOutcomes(tenant: String, jobID: String, tokens: [String]) async throws(RelayStoreError)
        -> [String: DeliveryOutcome]
    {
        var found: [String: DeliveryOutcome] = [:]
        do {
            for try await (token, outcome) in try await database.query(
                """
                SELECT token, outcome FROM deliveries
                WHERE tenant_id = \(tenant) AND job_id = \(jobID) AND token = ANY(\(tokens)::text[])
                """,
                logger: logger
            ).decode((String, String).self) {
                guard let outcome = DeliveryOutcome(rawValue: outcome), found[token] != .delivered else { continue }
                found[token] = outcome
            }
        } catch {
            throw relayStoreError(from: error)
        }
        return found
    }

    /// Cancels a job that is not finished: nothing more is handed out (pages being sent finish).
    /// Returns the job as it is afterwards, or `nil` when the tenant has no such job.
    public func cancelJob(tenant: String, id: String) async throws(RelayStoreError) -> JobRecord? {
        guard let uuid = UUID(uuidString: id) else { return nil }
        _ = try await countRows(
            """
            UPDATE jobs SET state = 'cancelled', finished_at = now(), updated_at = now()
            WHERE tenant_id = \(tenant) AND id = \(uuid) AND finished_at IS NULL
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
    public func jobProgress(tenant: String, id: String) async throws(RelayStoreError) -> JobProgress? {
        guard let job = try await job(tenant: tenant, id: id), let uuid = UUID(uuidString: id) else { return nil }
        do {
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
        } catch {
            throw relayStoreError(from: error)
        }
        return nil
    }

    /// The devices of a job's pages that wait for a later time (deferred by quiet hours, or local-time sends); a
    /// topic range page's devices as registered now.
    public func laterDevices(tenant: String, id: String) async throws(RelayStoreError)
        -> [(token: String, user: String, dueAt: Date)]
    {
        guard let uuid = UUID(uuidString: id) else { return [] }
        var devices: [(token: String, user: String, dueAt: Date)] = []
        do {
            for try await (tokens, users, dueAt) in try await database.query(
                """
                SELECT p.tokens, p.users, p.due_at FROM job_pages p
                WHERE p.job_id = \(uuid) AND p.tenant_id = \(tenant) AND p.state = 'pending' AND p.due_at > now()
                  AND p.topic IS NULL
                UNION ALL
                SELECT coalesce(array_agg(d.token ORDER BY d.token, d.user_id), '{}'),
                       coalesce(array_agg(d.user_id ORDER BY d.token, d.user_id), '{}'), p.due_at
                FROM job_pages p JOIN devices d ON d.tenant_id = p.tenant_id AND d.active
                    AND d.topics @> ARRAY[p.topic] AND d.token > p.range_after AND d.token <= p.range_last
                WHERE p.job_id = \(uuid) AND p.tenant_id = \(tenant) AND p.state = 'pending' AND p.due_at > now()
                GROUP BY p.page, p.due_at
                """,
                logger: logger
            ).decode(([String], [String], Date).self) {
                for (token, user) in zip(tokens, users) { devices.append((token, user, dueAt)) }
            }
        } catch {
            throw relayStoreError(from: error)
        }
        return devices
    }

    /// Completes every running, planned job whose pages are all done, summing their counts: the completion
    /// that ``completeJobPage(_:owner:counts:)`` or ``finishPlanning(jobID:owner:)`` did not make because it
    /// never ran its second statement (the process died between the two, or the database stopped answering and
    /// the first one ran late, after the caller had given up at the store's call deadline). Returns how many
    /// jobs it completed.
    @discardableResult
    public func completeFinishedJobs() async throws(RelayStoreError) -> Int {
        try await countRows("\(unescaped: Self.completeDoneJobs) RETURNING 1::int8")
    }

    /// Completes a running, planned job whose pages are all done, summing their counts.
    private func completeJobIfDone(jobID: String) async throws(RelayStoreError) {
        guard let uuid = UUID(uuidString: jobID) else { return }
        _ = try await countRows(
            "\(unescaped: Self.completeDoneJobs) AND r.id = \(uuid) RETURNING 1::int8", preparedAs: CompleteJob.self)
    }

    /// Completes the running, planned jobs (`r`) none of whose pages is pending or leased, with the sums of
    /// their pages' counts; a caller may narrow `r` with more conditions.
    private static let completeDoneJobs = """
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
    public func pagesDue() async throws(RelayStoreError) -> (due: Int, oldestUnclaimedDueAt: Date?) {
        do {
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
        } catch {
            throw relayStoreError(from: error)
        }
    }
}

/// The hot path's statements of this file, prepared (``PreparedStatementName``).
private enum AddJobPage: PreparedStatementName {}
private enum AddUsersJobPage: PreparedStatementName {}
private enum AddTokensJobPage: PreparedStatementName {}
private enum ClaimJobForPlanning: PreparedStatementName {}
private enum FinishPlanning: PreparedStatementName {}
private enum ClaimJobPage: PreparedStatementName {}
private enum CompleteJobPage: PreparedStatementName {}
private enum CompleteJob: PreparedStatementName {}

extension Duration {
    /// The duration in seconds, fractions included, for an interval computed by PostgreSQL.
    var fractionalSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

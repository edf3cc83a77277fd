package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// Leases the next due page to `owner` for `lease`: a pending page that is due, or a leased one whose
    /// lease ran out (its process died or stalled), taken in `order`: the first listed tenant with a due page
    /// after the unlisted ones, its jobs' opening pages first, then by due time. Pages of cancelled jobs, and of
    /// disabled tenants (they wait until the tenant is enabled again), are not handed out.
    package func claimJobPage(
        owner: String, lease: Duration, order: PageClaimOrder = PageClaimOrder()
    ) async throws(RelayStoreError) -> JobPage? {
        return try await mappingErrors {
            for row in try await database.query(
                """
                UPDATE job_pages p SET state = 'leased', lease_owner = \(owner),
                    lease_until = now() + \(interval: lease), claims = claims + 1
                WHERE (job_id, page) = (
                    SELECT q.job_id, q.page FROM job_pages q JOIN jobs j ON j.id = q.job_id
                        JOIN tenants t ON t.id = q.tenant_id AND t.enabled
                    WHERE ((q.state = 'pending' AND q.due_at <= now()) OR (q.state = 'leased' AND q.lease_until < now()))
                      AND j.state IN ('accepted', 'scheduled', 'running')
                      AND q.tenant_id <> ALL(\(order.excluded)::text[])
                      AND (q.page = 1 OR NOT \(order.openingPagesOnly))
                    ORDER BY coalesce(array_position(\(order.tenants)::text[], q.tenant_id), 0), q.page <> 1,
                        q.due_at, q.job_id, q.page
                    LIMIT 1
                    FOR UPDATE OF q SKIP LOCKED
                )
                RETURNING job_id::text, page, tenant_id, due_at, tokens, users, claims, topic, range_after, range_last,
                    retry_round, held_since, retry_until, wait_reason, wait_environment
                """,
                preparedAs: ClaimJobPage.self, logger: logger
            ) {
                let (job, page, tenant, dueAt, tokens, users, claims, topic, after, last) = try row.decode(
                    (String, Int, String, Date, [String], [String], Int, String?, String?, String?).self)
                let (round, since, until, reason, environment) = try Self.holdColumns(of: row)
                let range = topic.map { TopicRange(topic: $0, after: after ?? "", last: last ?? "") }
                var hold: DeliveryHold?
                if round > 0, let since, let until {
                    hold = DeliveryHold(
                        round: round, since: since, until: until, reason: reason ?? "", environment: environment ?? "")
                }
                return JobPage(
                    jobID: job, page: page, tenantID: tenant, dueAt: dueAt, tokens: tokens, users: users,
                    topicRange: range, claims: claims, hold: hold
                )
            }
            return nil
        }
    }

    /// The hold columns of a claimed page's row (its 11th to 15th).
    private static func holdColumns(of row: PostgresRow) throws -> (Int, Date?, Date?, String?, String?) {
        let columns = Array(row.makeRandomAccess())
        return (
            try columns[10].decode(Int.self), try columns[11].decode(Date?.self), try columns[12].decode(Date?.self),
            try columns[13].decode(String?.self), try columns[14].decode(String?.self)
        )
    }

    /// Extends `owner`'s lease on a page; `false` when the lease was lost (another process has the page).
    package func renewJobPageLease(_ page: JobPage, owner: String, lease: Duration) async throws(RelayStoreError)
        -> Bool
    {
        guard let uuid = UUID(uuidString: page.jobID) else { return false }
        return try await countRows(
            """
            UPDATE job_pages SET lease_until = now() + \(interval: lease)
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
    package func completeJobPage(
        _ page: JobPage, owner: String, counts: JobPageCounts, lastRows: [DeliveryRecord] = []
    ) async throws(RelayStoreError) {
        guard let uuid = UUID(uuidString: page.jobID) else {
            try await recordDeliveries(lastRows)
            return
        }
        let completion = PageCompletion(jobID: uuid, page: page.page, owner: owner, counts: counts)
        let jobCompleted: Bool?
        if lastRows.isEmpty {
            jobCompleted = try await mappingErrors {
                try await database.query(
                    completion.query, preparedAs: CompleteJobPage.self, logger: logger
                ).first?.decode(Bool.self)
            }
        } else {
            jobCompleted = try await recordDeliveries(lastRows, completing: completion)
        }
        if jobCompleted == false {
            try await completeJobIfDone(jobID: page.jobID)
        }
    }

    /// Adds a page of devices deferred to `dueAt` to a running job: by quiet hours, or held (`hold`) while their
    /// provider could not take them. A hold is written once per page it comes from (`fromPage`) and environment:
    /// writing it again (the page was claimed again after its sender died or stopped) changes nothing, so its
    /// devices are not held, and sent, twice.
    package func deferJobDevices(
        jobID: String,
        tenant: String,
        dueAt: Date,
        tokens: [String],
        users: [String],
        hold: DeliveryHold? = nil,
        fromPage: Int? = nil
    ) async throws(RelayStoreError) {
        guard tokens.count == users.count else { throw .invalidArgument("a page needs one user per token") }
        guard let uuid = UUID(uuidString: jobID) else { throw .invalidArgument("malformed job id \(jobID)") }
        // The page number is the next free one; a concurrent writer taking it makes this try again.
        for _ in 0..<10 {
            do {
                try await database.query(
                    """
                    INSERT INTO job_pages (
                        job_id, page, tenant_id, due_at, tokens, users,
                        retry_round, held_since, retry_until, wait_reason, wait_environment, held_from_page)
                    SELECT \(uuid), coalesce(max(page), 0) + 1, \(tenant), \(dueAt), \(tokens)::text[], \(users)::text[],
                        \(hold?.round ?? 0), \(hold?.since), \(hold?.until), \(hold?.reason), \(hold?.environment),
                        \(hold == nil ? nil : fromPage)
                    FROM job_pages WHERE job_id = \(uuid)
                    ON CONFLICT (job_id, held_from_page, wait_environment) WHERE held_from_page IS NOT NULL DO NOTHING
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
    /// over from a process that died sends only to the others). A `deferred` row does not count: the device
    /// waits for its send.
    package func recordedOutcomes(tenant: String, jobID: String, tokens: [String]) async throws(RelayStoreError)
        -> [String: DeliveryOutcome]
    {
        var found: [String: DeliveryOutcome] = [:]
        try await mappingErrors {
            for try await (token, outcome) in try await database.query(
                """
                SELECT token, outcome FROM deliveries
                WHERE tenant_id = \(tenant) AND job_id = \(jobID) AND token = ANY(\(tokens)::text[])
                  AND outcome <> 'deferred'
                """,
                logger: logger
            ).decode((String, String).self) {
                guard let outcome = DeliveryOutcome(rawValue: outcome), found[token] != .delivered else { continue }
                found[token] = outcome
            }
        }
        return found
    }

}

/// The page loops' statements, prepared (``PreparedStatementName``).
private enum ClaimJobPage: PreparedStatementName {}
private enum CompleteJobPage: PreparedStatementName {}

package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// Everything the tenant's policy needs of `users` for one notification, in one statement (one round trip and
    /// one execution instead of up to four): their preferences, their mutes and their presence in force at `now`,
    /// and the counts of those at the type's per-user cap, each lookup only when `reads` asks for it.
    ///
    /// The counts are those of ``SentCount``: a user is in ``UserPolicyRows/sentCounts`` when its hour's count is
    /// at least `maxPerHour` or its day's count at least `maxPerDay`, and only then, since only such a user is
    /// capped. A notification counts once per user however
    /// many of the user's devices it was delivered to: the count is of distinct jobs with a row of outcome
    /// `delivered` and that type, sent after `now` − 1 h (the hour) or `now` − 24 h (the day), and before
    /// `now` + 1 h: rows dated a little after `now` count too (another relay's clock may run ahead).
    ///
    /// The counts look each user up on its own (a lateral join on the index `deliveries_user_hash`): with
    /// `user_id = ANY(…)` instead, the planner, misled by a day's partition with no statistics yet (new, or
    /// filling faster than autovacuum analyzes it), scanned the tenant's whole day and filtered it, a cost that
    /// grew with every row a fan-out wrote. Each user's rows are
    /// counted first, which is cheap; the distinct jobs (two sorts a user) only for a user with at least as many
    /// rows as the lower cap.
    ///
    /// Even so, counting was a third of the database's time in a fan-out of a capped type. A user in
    /// `reads.known` is not counted again while its rows then, plus the jobs of the type that could have
    /// delivered since, stay below the lower cap: since a job counts once per user, the user's notifications
    /// now are at most that sum. The jobs that could have delivered since are those the epoch's read saw open
    /// (``RowCountEpoch/openJobs``) and those inserted by a transaction its snapshot did not see; a job seen
    /// finished and planned, with no page open, recorded all its rows before that snapshot. A read of fewer than
    /// ``boundedCountUsers`` users counts them all and has no epoch. The rows of each
    /// user counted are in ``UserPolicyRows/countedRows`` (users with none are absent: most of a fan-out's, which
    /// then cost no row and no decoding) and the read's epoch in ``UserPolicyRows/epoch``, for the caller to
    /// remember.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` when `reads.known` has not one count per user; the
    ///   store's errors.
    package func userPolicy(
        tenant: String,
        users: [String],
        reading reads: UserPolicyReads,
        now: Date = Date()
    ) async throws(RelayStoreError) -> UserPolicyRows {
        var found = UserPolicyRows()
        let limit = reads.cap?.limit ?? .init()
        let lowerCap = [limit.maxPerHour, limit.maxPerDay].compactMap { $0 }.min()
        let countsCaps = reads.cap != nil && lowerCap != nil
        guard !users.isEmpty, reads.preferences || reads.mutes || reads.presence || countsCaps else { return found }
        if let known = reads.known, known.rows.count != users.count {
            throw .invalidArgument("known row counts for \(known.rows.count) users, not \(users.count)")
        }
        var bindings = PostgresBindings(capacity: 15)
        bindings.append(tenant)  // $1
        bindings.append(users)  // $2
        bindings.append(now)  // $3
        bindings.append(reads.preferences)  // $4
        bindings.append(reads.mutes)  // $5
        bindings.append(reads.presence)  // $6
        bindings.append(countsCaps)  // $7
        bindings.append(reads.cap?.notificationType ?? "")  // $8
        bindings.append(now.addingTimeInterval(-3_600))  // $9: an hour ago
        bindings.append(now.addingTimeInterval(-86_400))  // $10: a day ago
        // The upper bound leaves out the empty partitions made in advance for the coming days; an hour's margin
        // keeps the rows of a relay whose clock runs ahead.
        bindings.append(now.addingTimeInterval(3_600))  // $11
        bindings.append(lowerCap ?? 0)  // $12
        let rows: [PostgresRow] = try await mappingErrors {
            if countsCaps && users.count >= Self.boundedCountUsers {
                let known = reads.known
                bindings.append(known?.rows ?? [])  // $13: -1 unknown
                bindings.append(known?.epoch.snapshot ?? "")  // $14
                bindings.append(known?.epoch.openJobs ?? -1)  // $15: -1, nothing known
                return try await database.query(
                    PostgresQuery(unsafeSQL: Self.boundedPolicyStatement, binds: bindings),
                    preparedAs: UsersPolicyBounded.self, logger: logger)
            }
            return try await database.query(
                PostgresQuery(unsafeSQL: Self.policyStatement, binds: bindings),
                preparedAs: UsersPolicy.self, logger: logger)
        }
        return try await mappingErrors {
            for row in rows {
                let (kind, user, first, second, enabled, until, lastHour, lastDay, rows) = try row.decode(
                    (String, String, String?, String?, Bool?, Date?, Int?, Int?, Int?).self)
                switch kind {
                case "preference":
                    found.preferences[user, default: [:]][first ?? ""] = enabled ?? true
                case "mute":
                    found.mutes.append(Self.mute(user: user, kind: first ?? "", value: second ?? "", until: until))
                case "presence":
                    if let thread = first, let until { found.activeThreads[user, default: [:]][thread] = until }
                case "epoch":
                    found.epoch = RowCountEpoch(snapshot: user, openJobs: lastHour ?? 0)
                default:
                    found.countedRows[user] = rows ?? 0
                    let sent = SentCount(lastHour: lastHour ?? 0, lastDay: lastDay ?? 0)
                    if limit.maxPerHour.map({ sent.lastHour >= $0 }) == true
                        || limit.maxPerDay.map({ sent.lastDay >= $0 }) == true
                    {
                        found.sentCounts[user] = sent
                    }
                }
            }
            return found
        }
    }
}

extension RelayStore {
    /// Reads of fewer users count them all (``policyStatement``): planning the bounds costs more than counting a
    /// few users.
    package static let boundedCountUsers = 100

    /// The preferences, mutes and presence of users `$2` of tenant `$1` in force at `$3`, each part only when `$4`,
    /// `$5` or `$6` asks for it, as rows of the policy statements' nine columns.
    ///
    /// The users are a set to join (`IN (SELECT unnest(…))`), not `user_id = ANY(…)`, whose planning estimates each
    /// element of the array, which for a page of thousands of users costs more than the lookups. The join probes the
    /// index or hashes the tenant's few rows, whichever the planner finds cheaper.
    private static let policyLookups = """
        SELECT 'preference', user_id, notification_type, NULL::text, enabled, NULL::timestamptz, NULL::int8,
               NULL::int8, NULL::int8
        FROM preferences WHERE $4::bool AND tenant_id = $1 AND user_id IN (SELECT unnest($2::text[]))
        UNION ALL
        SELECT 'mute', user_id, kind, value, NULL, until, NULL, NULL, NULL
        FROM mutes
        WHERE $5::bool AND tenant_id = $1 AND user_id IN (SELECT unnest($2::text[])) AND (until IS NULL OR until > $3)
        UNION ALL
        SELECT 'presence', user_id, thread_id, NULL, NULL, until, NULL, NULL, NULL
        FROM presence WHERE $6::bool AND tenant_id = $1 AND user_id IN (SELECT unnest($2::text[])) AND until > $3
        """

    /// User `u.user_id`'s delivered rows of type `$8` sent after `$10` and before `$11` (`r.rows`), and, when they
    /// reach the lower cap `$12`, its distinct jobs in the hour after `$9` and in the day (`c`).
    private static let capCounts = """
        CROSS JOIN LATERAL (
            SELECT count(*) AS rows
            FROM deliveries d
            WHERE hashtextextended(d.user_id, 0) = hashtextextended(u.user_id, 0) AND d.user_id = u.user_id
              AND d.tenant_id = $1 AND d.sent_at > $10 AND d.sent_at < $11
              AND d.outcome = 'delivered' AND d.notification_type = $8
        ) r
        CROSS JOIN LATERAL (
            SELECT (count(DISTINCT job_id) FILTER (WHERE sent_at > $9))::int8 AS last_hour,
                   count(DISTINCT job_id)::int8 AS last_day
            FROM deliveries d
            WHERE r.rows >= $12
              AND hashtextextended(d.user_id, 0) = hashtextextended(u.user_id, 0) AND d.user_id = u.user_id
              AND d.tenant_id = $1 AND d.sent_at > $10 AND d.sent_at < $11
              AND d.outcome = 'delivered' AND d.notification_type = $8
        ) c
        """

    /// The policy's lookups, with the counts of the users whose rows reach the lower cap when `$7`.
    private static let policyStatement = """
        \(policyLookups)
        UNION ALL
        SELECT 'sent', u.user_id, NULL, NULL, NULL, NULL, c.last_hour, c.last_day, r.rows
        FROM unnest($2::text[]) AS u(user_id)
        \(capCounts)
        WHERE $7::bool AND r.rows >= $12
        """

    /// The policy's lookups, with the counts of the users not known (`$13`: their rows when counted, -1 unknown) to
    /// be below the lower cap still, given the jobs the earlier counts saw open (`$15`) and those inserted since
    /// (their snapshot `$14`), and this read's epoch. Only users with rows are returned.
    private static let boundedPolicyStatement = """
        WITH since AS (
            SELECT count(*)::int8 AS jobs FROM (
                SELECT 1 FROM jobs
                WHERE $15::int8 >= 0 AND tenant_id = $1 AND notification_type = $8
                  AND created_xid >= pg_snapshot_xmin(NULLIF($14::text, '')::pg_snapshot)
                  AND NOT pg_visible_in_snapshot(created_xid, NULLIF($14::text, '')::pg_snapshot)
                LIMIT $12
            ) s
        ), open AS (
            SELECT count(*)::int8 AS jobs FROM (
                SELECT id FROM jobs
                WHERE tenant_id = $1 AND notification_type = $8 AND (finished_at IS NULL OR planned_at IS NULL)
                UNION
                SELECT j.id FROM job_pages p JOIN jobs j ON j.id = p.job_id
                WHERE p.state IN ('pending', 'leased') AND j.tenant_id = $1 AND j.notification_type = $8
                LIMIT $12
            ) o
        )
        \(policyLookups)
        UNION ALL
        SELECT 'epoch', pg_current_snapshot()::text, NULL, NULL, NULL, NULL, open.jobs, NULL, NULL
        FROM open
        UNION ALL
        SELECT 'sent', u.user_id, NULL, NULL, NULL, NULL, c.last_hour, c.last_day, r.rows
        FROM unnest($2::text[], $13::int8[]) AS u(user_id, known)
        CROSS JOIN since
        \(capCounts)
        WHERE $7::bool AND u.user_id IS NOT NULL
          AND (coalesce(u.known, -1) < 0 OR u.known + $15 + since.jobs >= $12) AND r.rows > 0
        """
}

/// The policy's lookups for a few users, prepared (``PreparedStatementName``).
private enum UsersPolicy: PreparedStatementName {}

/// The policy's lookups with bounded counts, for a page of users, prepared (``PreparedStatementName``).
private enum UsersPolicyBounded: PreparedStatementName {}

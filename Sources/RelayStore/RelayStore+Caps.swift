public import Foundation
import Logging
import PostgresNIO

/// How many notifications of one type a user received in the rolling hour and day before an instant, for
/// the per-user caps of `rate_limits.per_user`.
public struct SentCount: Sendable, Hashable {
    /// Notifications delivered in the last hour.
    public var lastHour: Int
    /// Notifications delivered in the last 24 hours (the last hour included).
    public var lastDay: Int

    /// Creates a count.
    public init(lastHour: Int, lastDay: Int) {
        self.lastHour = lastHour
        self.lastDay = lastDay
    }
}

/// Which of the policy's lookups ``RelayStore/userPolicy(tenant:users:reading:now:)`` makes: each only when its
/// rule can apply to the notification.
public struct UserPolicyReads: Sendable {
    /// The users' preferences (the notification's type may be turned off).
    public var preferences: Bool
    /// The users' mutes in force (the notification has a thread id or a scope).
    public var mutes: Bool
    /// The users' presence in force (the notification has a thread id).
    public var presence: Bool
    /// The notification's type and its per-user cap, when it has one: the users at the cap are counted.
    public var cap: (notificationType: String, limit: TenantConfiguration.PerUserLimit)?

    /// Creates a choice of lookups.
    public init(
        preferences: Bool, mutes: Bool, presence: Bool,
        cap: (notificationType: String, limit: TenantConfiguration.PerUserLimit)? = nil
    ) {
        self.preferences = preferences
        self.mutes = mutes
        self.presence = presence
        self.cap = cap
    }
}

/// What ``RelayStore/userPolicy(tenant:users:reading:now:)`` found of a page of users; users with nothing stored
/// are absent.
public struct UserPolicyRows: Sendable, Hashable {
    /// Stored settings per user, then per notification type (`false`: turned off).
    public var preferences: [String: [String: Bool]] = [:]
    /// The mutes in force.
    public var mutes: [MuteRecord] = []
    /// The threads each user is active in, with when each presence ends.
    public var activeThreads: [String: [String: Date]] = [:]
    /// What each user at the type's cap received of it.
    public var sentCounts: [String: SentCount] = [:]

    /// Rows with nothing found.
    public init() {}
}

extension RelayStore {
    /// Everything the tenant's policy needs of `users` for one notification, in one statement (one round trip and
    /// one execution instead of up to four): their preferences, their mutes and their presence in force at `now`,
    /// and the counts of those at the type's per-user cap, each lookup only when `reads` asks for it.
    ///
    /// The counts are those of ``SentCount``: a user is returned when its hour's count is at least
    /// `maxPerHour` or its day's count at least `maxPerDay`, and only then, since only such a user is capped; the
    /// others, most of a fan-out's, cost no row and no decoding. A notification counts once per user however
    /// many of the user's devices it was delivered to: the count is of distinct jobs with a row of outcome
    /// `delivered` and that type, sent after `now` − 1 h (the hour) or `now` − 24 h (the day), and before
    /// `now` + 1 h: rows dated a little after `now` count too (another relay's clock may run ahead).
    ///
    /// The counts look each user up on its own (a lateral join on the index `deliveries_tenant_user`): with
    /// `user_id = ANY(…)` instead, the planner, misled by a day's partition with no statistics yet (new, or
    /// filling faster than autovacuum analyzes it), scanned the tenant's whole day and filtered it, a cost that
    /// grew with every row a fan-out wrote (138 ms a page at 200,000 rows; 3 ms this way). Each user's rows are
    /// counted first, which is cheap; the distinct jobs (two sorts a user) only for a user with at least as many
    /// rows as the lower cap.
    public func userPolicy(
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
        var bindings = PostgresBindings(capacity: 14)
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
        bindings.append(limit.maxPerHour)  // $13
        bindings.append(limit.maxPerDay)  // $14
        let query = PostgresQuery(
            unsafeSQL: """
                SELECT 'preference', user_id, notification_type, NULL::text, enabled, NULL::timestamptz, NULL::int8,
                       NULL::int8
                FROM preferences WHERE $4::bool AND tenant_id = $1 AND user_id = ANY($2::text[])
                UNION ALL
                SELECT 'mute', user_id, kind, value, NULL, until, NULL, NULL
                FROM mutes
                WHERE $5::bool AND tenant_id = $1 AND user_id = ANY($2::text[]) AND (until IS NULL OR until > $3)
                UNION ALL
                SELECT 'presence', user_id, thread_id, NULL, NULL, until, NULL, NULL
                FROM presence WHERE $6::bool AND tenant_id = $1 AND user_id = ANY($2::text[]) AND until > $3
                UNION ALL
                SELECT 'sent', u.user_id, NULL, NULL, NULL, NULL, c.last_hour, c.last_day
                FROM unnest($2::text[]) AS u(user_id)
                CROSS JOIN LATERAL (
                    SELECT count(*) AS rows
                    FROM deliveries d
                    WHERE d.tenant_id = $1 AND d.user_id = u.user_id AND d.sent_at > $10 AND d.sent_at < $11
                      AND d.outcome = 'delivered' AND d.notification_type = $8
                ) r
                CROSS JOIN LATERAL (
                    SELECT (count(DISTINCT job_id) FILTER (WHERE sent_at > $9))::int8 AS last_hour,
                           count(DISTINCT job_id)::int8 AS last_day
                    FROM deliveries d
                    WHERE d.tenant_id = $1 AND d.user_id = u.user_id AND d.sent_at > $10 AND d.sent_at < $11
                      AND d.outcome = 'delivered' AND d.notification_type = $8
                ) c
                WHERE $7::bool AND r.rows >= $12 AND (c.last_hour >= $13 OR c.last_day >= $14)
                """,
            binds: bindings
        )
        do {
            for row in try await database.query(query, preparedAs: UsersPolicy.self, logger: logger) {
                let (kind, user, first, second, enabled, until, lastHour, lastDay) = try row.decode(
                    (String, String, String?, String?, Bool?, Date?, Int?, Int?).self)
                switch kind {
                case "preference":
                    found.preferences[user, default: [:]][first ?? ""] = enabled ?? true
                case "mute":
                    found.mutes.append(Self.mute(user: user, kind: first ?? "", value: second ?? "", until: until))
                case "presence":
                    if let thread = first, let until { found.activeThreads[user, default: [:]][thread] = until }
                default:
                    found.sentCounts[user] = SentCount(lastHour: lastHour ?? 0, lastDay: lastDay ?? 0)
                }
            }
            return found
        } catch {
            throw relayStoreFailure(error)
        }
    }
}

/// The policy's lookups for a page of users, prepared (``PreparedStatementName``).
private enum UsersPolicy: PreparedStatementName {}

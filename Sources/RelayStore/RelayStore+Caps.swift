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

extension RelayStore {
    /// What each of `users` who reached `limit` received of `notificationType` in the rolling hour and day before
    /// `now`, in one query over `deliveries` (index `deliveries_tenant_user`): a user is returned when its hour's
    /// count is at least `limit.maxPerHour` or its day's count at least `limit.maxPerDay`, and only then, since
    /// only such a user is capped. The others, most of a fan-out's, cost no row and no decoding.
    ///
    /// The query looks each user up on its own (a lateral join on the index's `(tenant_id, user_id)`): with
    /// `user_id = ANY(…)` instead, the planner, misled by a day's partition with no statistics yet (new, or
    /// filling faster than autovacuum analyzes it), scanned the tenant's whole day and filtered it, a cost
    /// that grew with every row a fan-out wrote (138 ms a page at 200,000 rows; 3 ms this way). Each user's rows
    /// are counted first, which is cheap; the distinct jobs (two sorts a user) are counted only for a user with
    /// at least as many rows as the lower cap.
    ///
    /// A notification counts once per user however many of the user's devices it was delivered to: the count is
    /// of distinct jobs with a row of outcome `delivered` and that type, sent after `now` − 1 h (the hour) or
    /// `now` − 24 h (the day), and before `now` + 1 h: rows dated a little after `now` count too (another relay's
    /// clock may run ahead).
    public func sentCounts(
        tenant: String,
        users: [String],
        notificationType: String,
        reaching limit: TenantConfiguration.PerUserLimit,
        now: Date = Date()
    ) async throws(RelayStoreError) -> [String: SentCount] {
        let caps = [limit.maxPerHour, limit.maxPerDay].compactMap { $0 }
        guard !users.isEmpty, let lowerCap = caps.min() else { return [:] }
        let hourAgo = now.addingTimeInterval(-3_600)
        let dayAgo = now.addingTimeInterval(-86_400)
        // The upper bound leaves out the empty partitions made in advance for the coming days; an hour's margin
        // keeps the rows of a relay whose clock runs ahead.
        let hourAhead = now.addingTimeInterval(3_600)
        do {
            var counts: [String: SentCount] = [:]
            for row in try await database.query(
                """
                SELECT u.user_id, c.last_hour, c.last_day
                FROM unnest(\(users)::text[]) AS u(user_id)
                CROSS JOIN LATERAL (
                    SELECT count(*) AS rows
                    FROM deliveries d
                    WHERE d.tenant_id = \(tenant) AND d.user_id = u.user_id
                      AND d.sent_at > \(dayAgo) AND d.sent_at < \(hourAhead)
                      AND d.outcome = 'delivered' AND d.notification_type = \(notificationType)
                ) r
                CROSS JOIN LATERAL (
                    SELECT (count(DISTINCT job_id) FILTER (WHERE sent_at > \(hourAgo)))::int8 AS last_hour,
                           count(DISTINCT job_id)::int8 AS last_day
                    FROM deliveries d
                    WHERE d.tenant_id = \(tenant) AND d.user_id = u.user_id
                      AND d.sent_at > \(dayAgo) AND d.sent_at < \(hourAhead)
                      AND d.outcome = 'delivered' AND d.notification_type = \(notificationType)
                ) c
                WHERE r.rows >= \(lowerCap)
                  AND (c.last_hour >= \(limit.maxPerHour) OR c.last_day >= \(limit.maxPerDay))
                """,
                preparedAs: UsersSentCounts.self, logger: logger
            ) {
                let (user, lastHour, lastDay) = try row.decode((String, Int, Int).self)
                counts[user] = SentCount(lastHour: lastHour, lastDay: lastDay)
            }
            return counts
        } catch {
            throw relayStoreFailure(error)
        }
    }
}

/// The fan-out's cap counts, prepared (``PreparedStatementName``).
private enum UsersSentCounts: PreparedStatementName {}

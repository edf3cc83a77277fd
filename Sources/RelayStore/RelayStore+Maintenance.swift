package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// How many days ahead of today ``maintain(retentionDays:now:)`` keeps delivery partitions ready.
    package static let maintenanceDaysAhead = 2

    /// The periodic upkeep of every tenant's data; safe to run from several processes at once, and again at any
    /// time (run it at least daily, and at start-up).
    ///
    /// 1. Creates the delivery partitions of `now`'s day and the ``maintenanceDaysAhead`` next (UTC) days.
    /// 2. Drops the delivery partitions wholly older than `retentionDays` days before `now`.
    /// 3. Clears idempotency keys older than ``idempotencyWindow`` (a send with such a key makes a new job even
    ///    before this runs; clearing keeps the unique index small).
    /// 4. Deletes jobs finished before the retention, mutes and presence that ended by `now`, remembered dead
    ///    tokens invalidated before the retention, and the token-user pairs (the lookup of deliveries by token)
    ///    that no device has held since before the retention.
    ///
    /// - Parameters:
    ///   - retentionDays: How many days of deliveries, finished jobs and dead tokens to keep; at least 1.
    ///   - now: The current time (tests give another).
    @discardableResult
    package func maintain(retentionDays: Int, now: Date = Date()) async throws(RelayStoreError) -> MaintenanceReport {
        guard retentionDays >= 1 else {
            throw .invalidArgument("the retention must be at least 1 day, not \(retentionDays)")
        }
        var report = MaintenanceReport()
        report.createdPartitions = try await ensureDeliveryPartitions(
            around: now, daysAhead: Self.maintenanceDaysAhead, daysBehind: 0)
        let cutoff = now.addingTimeInterval(-Double(retentionDays) * 86_400)
        report.droppedPartitions = try await dropDeliveryPartitions(olderThan: cutoff)

        let window = Self.idempotencyWindowSeconds
        // Each statement counts its rows on the server: a big clean-up sends back one number, not a row per row.
        report.clearedIdempotencyKeys = try await count(
            """
            WITH changed AS (
                UPDATE jobs SET idempotency_key = NULL, updated_at = now()
                WHERE idempotency_key IS NOT NULL
                  AND created_at <= \(now)::timestamptz - \(window)::int8 * interval '1 second'
                RETURNING 1
            )
            SELECT count(*)::int8 FROM changed
            """
        )
        report.deletedJobs = try await count(
            """
            WITH deleted AS (DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < \(cutoff) RETURNING 1)
            SELECT count(*)::int8 FROM deleted
            """
        )
        report.deletedMutes = try await count(
            """
            WITH deleted AS (DELETE FROM mutes WHERE until IS NOT NULL AND until <= \(now) RETURNING 1)
            SELECT count(*)::int8 FROM deleted
            """
        )
        report.deletedPresence = try await count(
            """
            WITH deleted AS (DELETE FROM presence WHERE until <= \(now) RETURNING 1)
            SELECT count(*)::int8 FROM deleted
            """
        )
        report.deletedDeadTokens = try await count(
            """
            WITH deleted AS (DELETE FROM dead_tokens WHERE invalidated_at < \(cutoff) RETURNING 1)
            SELECT count(*)::int8 FROM deleted
            """
        )
        report.deletedTokenUsers = try await count(
            """
            WITH deleted AS (
                DELETE FROM token_users t
                WHERE t.seen_at < \(cutoff) AND NOT EXISTS (
                    SELECT 1 FROM devices d
                    WHERE d.tenant_id = t.tenant_id AND d.token = t.token AND d.user_id = t.user_id
                )
                RETURNING 1
            )
            SELECT count(*)::int8 FROM deleted
            """
        )
        logger.info(
            "maintenance done",
            metadata: [
                "created_partitions": "\(report.createdPartitions.count)",
                "dropped_partitions": "\(report.droppedPartitions.count)",
                "cleared_keys": "\(report.clearedIdempotencyKeys)",
                "deleted_jobs": "\(report.deletedJobs)",
                "deleted_mutes": "\(report.deletedMutes)",
                "deleted_presence": "\(report.deletedPresence)",
                "deleted_dead_tokens": "\(report.deletedDeadTokens)",
                "deleted_token_users": "\(report.deletedTokenUsers)",
            ])
        return report
    }

    /// Runs a statement that returns one `int8` and returns it.
    private func count(_ query: PostgresQuery) async throws(RelayStoreError) -> Int {
        return try await mappingErrors {
            try await client.withConnection { connection in
                try await Self.unbounded(connection, logger: logger) {
                    var total = 0
                    for try await value in try await connection.query(query, logger: logger).decode(Int.self) {
                        total = value
                    }
                    return total
                }
            }
        }
    }
}

import Foundation
import Logging
import PostgresNIO

/// What ``RelayStore/maintain(retentionDays:now:)`` did.
package struct MaintenanceReport: Sendable, Hashable {
    /// The delivery partitions it created (today's and the next days').
    package var createdPartitions: [String]
    /// The delivery partitions it dropped, wholly older than the retention.
    package var droppedPartitions: [String]
    /// The idempotency keys it cleared, older than ``RelayStore/idempotencyWindow``.
    package var clearedIdempotencyKeys: Int
    /// The finished jobs it deleted, finished before the retention.
    package var deletedJobs: Int
    /// The mutes it deleted, ended by `now`.
    package var deletedMutes: Int
    /// The presence rows it deleted, ended by `now`.
    package var deletedPresence: Int
    /// The remembered dead tokens it forgot, invalidated before the retention.
    package var deletedDeadTokens: Int
    /// The (tenant, token, user) pairs it forgot: no device holds them, and none has since the retention.
    package var deletedTokenUsers: Int

    /// Creates a report.
    package init(
        createdPartitions: [String] = [],
        droppedPartitions: [String] = [],
        clearedIdempotencyKeys: Int = 0,
        deletedJobs: Int = 0,
        deletedMutes: Int = 0,
        deletedPresence: Int = 0,
        deletedDeadTokens: Int = 0,
        deletedTokenUsers: Int = 0
    ) {
        self.createdPartitions = createdPartitions
        self.droppedPartitions = droppedPartitions
        self.clearedIdempotencyKeys = clearedIdempotencyKeys
        self.deletedJobs = deletedJobs
        self.deletedMutes = deletedMutes
        self.deletedPresence = deletedPresence
        self.deletedDeadTokens = deletedDeadTokens
        self.deletedTokenUsers = deletedTokenUsers
    }
}

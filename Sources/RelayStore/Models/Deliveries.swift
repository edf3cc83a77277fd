package import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The outcome class of one delivery attempt, as stored in `deliveries.outcome`.
package enum DeliveryOutcome: String, Sendable, Hashable, CaseIterable {
    /// The provider accepted the notification (APNs: 200).
    case delivered
    /// The provider declared the token dead (APNs: 410 Unregistered, or BadDeviceToken).
    case tokenDead = "token_dead"
    /// A transient failure (429, 5xx, timeout): another attempt follows or the job gave up.
    case retryLater = "retry_later"
    /// The tenant's configuration is wrong (bad topic, key or certificate).
    case configurationFault = "configuration_fault"
    /// Not sent at all (preferences, mutes, quiet hours, inactive token).
    case skipped
    /// Held while its provider could not take it until the notification's validity ended (its expiration, or
    /// the type's `retry_for`); the reason is why it waited.
    case expired
    /// Not sent yet: quiet hours in the device's time zone hold it until they end (reason `quiet_hours`). Its
    /// send then records a row of its own.
    case deferred
}

/// One delivery attempt: a row of the `deliveries` table.
///
/// Empty strings in ``userID``, ``providerMessageID`` and ``reason`` are stored as `NULL`, and a negative
/// ``latencyMilliseconds`` as no latency.
package struct DeliveryRecord: Sendable, Hashable {
    /// The tenant the notification was sent for.
    package var tenantID: String
    /// The job (one backend request, possibly a fan-out) the attempt belongs to.
    package var jobID: String
    /// The user the device belongs to, when known.
    package var userID: String?
    /// The device token as stored (``PushRelayProtocol/PushProvider/storedToken(_:)``: an APNs token lower-cased).
    package var token: String
    /// The provider's id of the message (APNs: the request's `apns-id`).
    package var providerMessageID: String?
    /// The attempt's outcome class.
    package var outcome: DeliveryOutcome
    /// The provider's reason (APNs' `Unregistered`, `TopicDisallowed`) or the relay's reason for skipping.
    package var reason: String?
    /// The attempt's number, from 1 (0 for a notification skipped before any attempt).
    package var attempt: Int
    /// When the request was sent; the table is partitioned by this (UTC days).
    package var sentAt: Date
    /// When the provider answered, if it did.
    package var answeredAt: Date?
    /// The time from sending to the provider's answer, in milliseconds.
    package var latencyMilliseconds: Int?
    /// The notification type of the job (counted by per-user frequency caps).
    package var notificationType: String?

    /// Creates a record.
    package init(
        tenantID: String,
        jobID: String,
        userID: String? = nil,
        token: String,
        providerMessageID: String? = nil,
        outcome: DeliveryOutcome,
        reason: String? = nil,
        attempt: Int = 1,
        sentAt: Date,
        answeredAt: Date? = nil,
        latencyMilliseconds: Int? = nil,
        notificationType: String? = nil
    ) {
        self.tenantID = tenantID
        self.jobID = jobID
        self.userID = userID
        self.token = token
        self.providerMessageID = providerMessageID
        self.outcome = outcome
        self.reason = reason
        self.attempt = attempt
        self.sentAt = sentAt
        self.answeredAt = answeredAt
        self.latencyMilliseconds = latencyMilliseconds
        self.notificationType = notificationType
    }
}

/// What ``RelayStore/recordDeliveries(_:batchSize:)`` did.
package struct DeliveryWriteReport: Sendable, Hashable {
    /// The rows written.
    package var rows: Int
    /// The SQL statements (round trips) it ran: one per batch, plus two for a batch that needed a new partition.
    package var statements: Int
    /// The partitions it had to create because a row fell outside every existing one.
    package var createdPartitions: [String]

    /// Creates a report.
    package init(rows: Int = 0, statements: Int = 0, createdPartitions: [String] = []) {
        self.rows = rows
        self.statements = statements
        self.createdPartitions = createdPartitions
    }
}

/// Where a page of delivery rows ended (keyset paging): the last row's place in the order every delivery query
/// answers in, newest first (`sent_at`, `attempt`, `job_id`, `user_id`, `token`, each descending). The next page
/// reads only rows after it, by the index, however deep the paging goes.
package struct DeliveryKey: Sendable, Hashable {
    /// `sent_at` in microseconds since 1970 (PostgreSQL's own precision).
    package var sentAtMicroseconds: Int64
    /// The attempt.
    package var attempt: Int
    /// The job.
    package var jobID: String
    /// The user (empty for a row without one).
    package var userID: String
    /// The token (empty for a user without a device).
    package var token: String

    /// A key of these values.
    package init(sentAtMicroseconds: Int64, attempt: Int, jobID: String, userID: String, token: String) {
        self.sentAtMicroseconds = sentAtMicroseconds
        self.attempt = attempt
        self.jobID = jobID
        self.userID = userID
        self.token = token
    }

    /// The key of `record`: the page after it starts with the row after it.
    package init(after record: DeliveryRecord) {
        self.init(
            sentAtMicroseconds: Int64((record.sentAt.timeIntervalSince1970 * 1_000_000).rounded()),
            attempt: record.attempt, jobID: record.jobID, userID: record.userID ?? "", token: record.token)
    }
}

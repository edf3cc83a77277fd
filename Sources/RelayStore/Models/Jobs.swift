package import Foundation
import Logging
import PostgresNIO

/// Where a job is in its life, as stored in `jobs.state`.
package enum JobState: String, Sendable, Hashable, CaseIterable {
    /// Committed; the fan-out has not started yet.
    case accepted
    /// Committed with a `send_at` in the future; it waits for that time.
    case scheduled
    /// The fan-out is under way.
    case running
    /// Every device has its outcome.
    case completed
    /// The job gave up; ``JobRecord/error`` says why.
    case failed
    /// The job was cancelled before it finished.
    case cancelled

    /// Whether the job is over: ``completed``, ``failed`` or ``cancelled``. A finished job keeps its state.
    package var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        case .accepted, .scheduled, .running: false
        }
    }
}

/// A job (one backend request, possibly a fan-out to many devices): a row of the `jobs` table.
package struct JobRecord: Sendable, Hashable {
    /// The job's id: a UUID in lower case.
    package var id: String
    /// The tenant the job belongs to.
    package var tenantID: String
    /// The notification type (a key of the tenant's `notification_types`).
    package var notificationType: String
    /// Where the job is in its life.
    package var state: JobState
    /// The backend's idempotency key, while it is remembered (cleared once older than
    /// ``RelayStore/idempotencyWindow``).
    package var idempotencyKey: String?
    /// The request as the relay received it (the serialized wire request); the store does not interpret it.
    package var request: [UInt8]
    /// When the job is to be sent, if it was scheduled.
    package var sendAt: Date?
    /// The devices the fan-out addresses.
    package var devices: Int
    /// The devices APNs accepted the notification for.
    package var delivered: Int
    /// The devices whose delivery failed.
    package var failed: Int
    /// The devices skipped (preferences, mutes, presence, inactive tokens).
    package var skipped: Int
    /// Why the job failed, when it did.
    package var error: String?
    /// When the job was accepted.
    package var createdAt: Date
    /// When the row last changed.
    package var updatedAt: Date
    /// When the job reached ``JobState/completed``, ``JobState/failed`` or ``JobState/cancelled``.
    package var finishedAt: Date?

    /// Creates a record.
    package init(
        id: String,
        tenantID: String,
        notificationType: String,
        state: JobState,
        idempotencyKey: String? = nil,
        request: [UInt8] = [],
        sendAt: Date? = nil,
        devices: Int = 0,
        delivered: Int = 0,
        failed: Int = 0,
        skipped: Int = 0,
        error: String? = nil,
        createdAt: Date,
        updatedAt: Date? = nil,
        finishedAt: Date? = nil
    ) {
        self.id = id
        self.tenantID = tenantID
        self.notificationType = notificationType
        self.state = state
        self.idempotencyKey = idempotencyKey
        self.request = request
        self.sendAt = sendAt
        self.devices = devices
        self.delivered = delivered
        self.failed = failed
        self.skipped = skipped
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
        self.finishedAt = finishedAt
    }
}

/// What ``RelayStore/createJob(tenant:notificationType:idempotencyKey:request:sendAt:)`` did.
package struct JobAcceptance: Sendable, Hashable {
    /// The new job, or the earlier one with the same idempotency key.
    package var job: JobRecord
    /// Whether ``job`` is an earlier job with the same idempotency key (nothing was created).
    package var duplicate: Bool

    /// Creates an acceptance.
    package init(job: JobRecord, duplicate: Bool) {
        self.job = job
        self.duplicate = duplicate
    }
}

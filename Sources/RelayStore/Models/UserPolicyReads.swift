package import Foundation
import Logging
import PostgresNIO

/// How many notifications of one type a user received in the rolling hour and day before an instant, for
/// the per-user caps of `rate_limits.per_user`.
package struct SentCount: Sendable, Hashable {
    /// Notifications delivered in the last hour.
    package var lastHour: Int
    /// Notifications delivered in the last 24 hours (the last hour included).
    package var lastDay: Int

    /// Creates a count.
    package init(lastHour: Int, lastDay: Int) {
        self.lastHour = lastHour
        self.lastDay = lastDay
    }
}

/// Which of the policy's lookups ``RelayStore/userPolicy(tenant:users:reading:now:)`` makes: each only when its
/// rule can apply to the notification.
package struct UserPolicyReads: Sendable {
    /// The users' preferences (the notification's type may be turned off).
    package var preferences: Bool
    /// The users' mutes in force (the notification has a thread id or a scope).
    package var mutes: Bool
    /// The users' presence in force (the notification has a thread id).
    package var presence: Bool
    /// The notification's type and its per-user cap, when it has one: the users at the cap are counted.
    package var cap: (notificationType: String, limit: TenantConfiguration.PerUserLimit)?
    /// What earlier reads counted of some of the users' rows of the capped type, if anything: one count per user
    /// of the read, in its order (``RelayStore/userPolicy(tenant:users:reading:now:)`` refuses another number).
    package var known: KnownRowCounts?

    /// Creates a choice of lookups.
    package init(
        preferences: Bool, mutes: Bool, presence: Bool,
        cap: (notificationType: String, limit: TenantConfiguration.PerUserLimit)? = nil,
        known: KnownRowCounts? = nil
    ) {
        self.preferences = preferences
        self.mutes = mutes
        self.presence = presence
        self.cap = cap
        self.known = known
    }
}

/// When a policy read counted users' rows of a capped type: its snapshot, and the jobs of the type that could
/// still record rows then.
package struct RowCountEpoch: Sendable, Hashable {
    /// The read's snapshot (`pg_snapshot` text): jobs whose insert it did not see were inserted after the count.
    package var snapshot: String
    /// The snapshot's `xmax` (`xmin:xmax:xip…`): a snapshot with a lower one is older.
    package let order: UInt64
    /// Jobs of the type not finished or not planned, or with a page pending or leased, when the read counted (at
    /// most the lower cap): the only jobs seen then that could record rows after.
    package var openJobs: Int

    /// Creates an epoch.
    package init(snapshot: String, openJobs: Int) {
        self.snapshot = snapshot
        self.order =
            snapshot.split(separator: ":", omittingEmptySubsequences: false).dropFirst().first
            .flatMap { UInt64($0) } ?? 0
        self.openJobs = openJobs
    }
}

/// Users' delivered rows of a capped type as earlier reads counted them, for
/// ``RelayStore/userPolicy(tenant:users:reading:now:)`` to count again only the users who may have reached the cap.
package struct KnownRowCounts: Sendable, Hashable {
    /// The rows of each user of the read when counted, in the order of its users (each user's rows bound its
    /// notifications from above); -1 for a user not counted before. An array rather than a dictionary: a page's
    /// thousands of users are then not hashed once more to build it and again to look each of them up.
    package var rows: [Int]
    /// The oldest of those counts' epochs, with the most open jobs any of them saw.
    package var epoch: RowCountEpoch

    /// Creates counts.
    package init(rows: [Int], epoch: RowCountEpoch) {
        self.rows = rows
        self.epoch = epoch
    }
}

/// What ``RelayStore/userPolicy(tenant:users:reading:now:)`` found of a page of users; users with nothing stored
/// are absent.
package struct UserPolicyRows: Sendable, Hashable {
    /// Stored settings per user, then per notification type (`false`: turned off).
    package var preferences: [String: [String: Bool]] = [:]
    /// The mutes in force.
    package var mutes: [MuteRecord] = []
    /// The threads each user is active in, with when each presence ends.
    package var activeThreads: [String: [String: Date]] = [:]
    /// What each user at the type's cap received of it.
    package var sentCounts: [String: SentCount] = [:]
    /// The rows of the capped type of each user this read counted and found any for. A user it counted and found
    /// none for is absent, as is a user it did not count. It counts every user whose known count is -1 (every
    /// user when ``UserPolicyReads/known`` is `nil`), and each known user whose count plus the jobs of the type
    /// since may reach the lower cap.
    package var countedRows: [String: Int] = [:]
    /// When this read counted, if it counted.
    package var epoch: RowCountEpoch?

    /// Rows with nothing found.
    package init() {}
}

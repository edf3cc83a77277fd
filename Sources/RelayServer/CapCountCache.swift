import RelayStore
import Synchronization

/// What this process's policy reads counted of users' delivered rows of capped notification types, so that the
/// next page of the same users counts again only those who may have reached the cap
/// (``RelayStore/userPolicy(tenant:users:reading:now:)`` explains why skipping the others is exact).
///
/// Bounded: at ``capacity`` users it forgets everything and starts again, which costs recounts, never a wrong
/// decision. Shared by the page loops of one process; the database holds what other processes sent.
final class CapCountCache: Sendable {
    /// Users remembered across all tenants and types (about 100 bytes each).
    static let capacity = 200_000

    private struct Key: Hashable {
        var tenant: String
        var notificationType: String
    }

    private struct Known {
        var rows: Int
        var epoch: RowCountEpoch
    }

    private struct State {
        var users: [Key: [String: Known]] = [:]
        var count = 0
    }

    private let state = Mutex(State())

    /// Creates an empty cache.
    init() {}

    /// What is known of `users`' rows of `notificationType`, with the oldest epoch among them (and the most
    /// open jobs any of their epochs saw); `nil` when nothing is.
    func known(tenant: String, notificationType: String, users: [String]) -> KnownRowCounts? {
        state.withLock { state in
            guard let remembered = state.users[Key(tenant: tenant, notificationType: notificationType)] else {
                return nil
            }
            var rows: [String: Int] = [:]
            var oldest: RowCountEpoch?
            var openJobs = 0
            for user in users {
                guard let known = remembered[user] else { continue }
                rows[user] = known.rows
                if oldest.map({ known.epoch.order < $0.order }) ?? true { oldest = known.epoch }
                openJobs = max(openJobs, known.epoch.openJobs)
            }
            guard var epoch = oldest else { return nil }
            epoch.openJobs = openJobs
            return KnownRowCounts(rows: rows, epoch: epoch)
        }
    }

    /// Remembers what a read of `users` counted (``UserPolicyRows/countedRows``) as of its epoch: the rows it
    /// found, and none for each user it counted without finding any (every user `known` did not hold). A user
    /// `known` held and the read did not count keeps what was known, which still bounds it.
    func remember(
        tenant: String, notificationType: String, users: [String], known: KnownRowCounts?, counted: [String: Int],
        epoch: RowCountEpoch
    ) {
        state.withLock { state in
            if state.count + users.count > Self.capacity {
                state = State()
            }
            let key = Key(tenant: tenant, notificationType: notificationType)
            var remembered = state.users.removeValue(forKey: key) ?? [:]
            for user in users {
                guard let rows = counted[user] ?? (known?.rows[user] == nil ? 0 : nil) else { continue }
                if remembered.updateValue(Known(rows: rows, epoch: epoch), forKey: user) == nil {
                    state.count += 1
                }
            }
            state.users[key] = remembered
        }
    }
}

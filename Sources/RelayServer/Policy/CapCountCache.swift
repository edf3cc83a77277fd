import RelayStore
import Synchronization

/// What this process's policy reads counted of users' delivered rows of capped notification types, so that the
/// next page of the same users counts again only those who may have reached the cap
/// (``RelayStore/userPolicy(tenant:users:reading:now:)`` explains why skipping the others is exact).
///
/// Bounded: at ``capacity`` users, or ``epochCapacity`` reads remembered, it forgets everything and starts again,
/// which costs recounts, never a wrong decision. One table holds every tenant's and type's users, and keeps its
/// room when it starts again: it grows to its largest size once, instead of again after every start (each growth
/// copies it into fresh memory, which the kernel zeroes page by page). Shared by the page loops of one process; the database holds what other processes sent.
final class CapCountCache: Sendable {
    /// Users remembered across all tenants and types (about 50 bytes each, the table about 10 MB when full).
    static let capacity = 200_000
    /// Reads remembered (one per page of a capped type) before it starts again: each user's count refers to its
    /// read's epoch, kept once per read.
    static let epochCapacity = 4_096

    /// A tenant's notification type.
    private struct Scope: Hashable {
        var tenant: String
        var notificationType: String
    }

    /// A user of a scope (``State/scopes`` numbers them).
    private struct Key: Hashable {
        var scope: Int
        var user: String
    }

    /// A user's rows when counted, and the read's epoch (its index in ``State/epochs``).
    private struct Known {
        var rows: Int
        var epoch: Int
    }

    private struct State {
        var scopes: [Scope: Int] = [:]
        var users: [Key: Known] = [:]
        var epochs: [RowCountEpoch] = []

        /// Forgets everything, keeping the table's room.
        mutating func clear() {
            scopes.removeAll(keepingCapacity: true)
            users.removeAll(keepingCapacity: true)
            epochs.removeAll(keepingCapacity: true)
        }
    }

    private let state = Mutex(State())

    /// Creates an empty cache.
    init() {}

    /// What is known of `users`' rows of `notificationType`, one count per user in their order (-1 for a user not
    /// counted before), with the oldest epoch among them (and the most open jobs any of their epochs saw); `nil`
    /// when nothing is.
    func known(tenant: String, notificationType: String, users: [String]) -> KnownRowCounts? {
        state.withLock { state in
            guard let scope = state.scopes[Scope(tenant: tenant, notificationType: notificationType)] else {
                return nil
            }
            var rows = [Int](repeating: -1, count: users.count)
            var oldest: RowCountEpoch?
            var openJobs = 0
            var lastEpoch = -1
            for (index, user) in users.enumerated() {
                guard let known = state.users[Key(scope: scope, user: user)] else { continue }
                rows[index] = known.rows
                // A page's users mostly share one epoch: each is looked at once per run of them.
                guard known.epoch != lastEpoch else { continue }
                lastEpoch = known.epoch
                let epoch = state.epochs[known.epoch]
                if oldest.map({ epoch.order < $0.order }) ?? true { oldest = epoch }
                openJobs = max(openJobs, epoch.openJobs)
            }
            guard var epoch = oldest else { return nil }
            epoch.openJobs = openJobs
            return KnownRowCounts(rows: rows, epoch: epoch)
        }
    }

    /// Remembers what a read of `users` counted (``UserPolicyRows/countedRows``) as of its epoch: the rows it
    /// found, and none for each user it counted without finding any (every user `known` did not hold). A user
    /// `known` held and the read did not count keeps what was known, which still bounds it. `known` is what
    /// ``known(tenant:notificationType:users:)`` gave for the same `users`; counts for another number of users
    /// say nothing reliable of these, so nothing is remembered then (a recount later, never a wrong decision).
    func remember(
        tenant: String, notificationType: String, users: [String], known: KnownRowCounts?, counted: [String: Int],
        epoch: RowCountEpoch
    ) {
        let knownRows = known?.rows ?? []
        guard known == nil || knownRows.count == users.count else { return }
        state.withLock { state in
            if state.users.count + users.count > Self.capacity || state.epochs.count >= Self.epochCapacity {
                state.clear()
            }
            let scopeKey = Scope(tenant: tenant, notificationType: notificationType)
            let scope = state.scopes[scopeKey] ?? state.scopes.count
            state.scopes[scopeKey] = scope
            let epochIndex = state.epochs.count
            state.epochs.append(epoch)
            for (index, user) in users.enumerated() {
                let rows: Int
                if !counted.isEmpty, let found = counted[user] {
                    rows = found
                } else if knownRows.isEmpty || knownRows[index] < 0 {
                    rows = 0
                } else {
                    continue
                }
                state.users[Key(scope: scope, user: user)] = Known(rows: rows, epoch: epochIndex)
            }
        }
    }
}

import PushRelayProtocol
import RelayStore

/// Tenant records, read from the store and kept for a few seconds, so a request does not cost a query
/// for its tenant's configuration and a `tenant sync` or `disable` still takes effect quickly.
actor TenantDirectory {
    private let store: RelayStore
    /// How long a record is kept: a disabled tenant is refused at most this long after `admin tenant disable`.
    static let lifetime: Duration = .seconds(2)

    private var cache: [String: (record: TenantRecord, readAt: ContinuousClock.Instant)] = [:]

    init(store: RelayStore) {
        self.store = store
    }

    /// The tenant's record, at most a few seconds old.
    func tenant(_ id: String) async throws(ProtocolError) -> TenantRecord? {
        if let cached = cache[id], ContinuousClock.now - cached.readAt < Self.lifetime { return cached.record }
        return try await refresh(id)
    }

    /// The tenant's record read now.
    func refresh(_ id: String) async throws(ProtocolError) -> TenantRecord? {
        let store = store
        guard let record = try await fromStore({ try await store.tenant(id: id) }) else {
            cache[id] = nil
            return nil
        }
        cache[id] = (record, ContinuousClock.now)
        return record
    }
}

import Foundation
import PushRelayProtocol
import RelayStore

/// Whether credentials are still valid, read from the store and kept for ``lifetime``, so that a revoke
/// reaches every open connection of every relay process within that time without a query per request.
actor CredentialDirectory {
    /// How long an answer is kept: a revoked credential is refused at most this long after the revoke.
    static let lifetime: Duration = .seconds(2)

    private let store: RelayStore
    private var cache: [String: (valid: Bool, readAt: ContinuousClock.Instant)] = [:]

    init(store: RelayStore) {
        self.store = store
    }

    /// Whether credential `id` is valid, as read at most ``lifetime`` ago.
    func isValid(_ id: String) async throws(ProtocolError) -> Bool {
        let now = ContinuousClock.now
        if let cached = cache[id], now - cached.readAt < Self.lifetime { return cached.valid }
        let store = store
        let valid = try await fromStore { try await store.credentialIsValid(id: id) }
        // Answers of credentials no connection asked about for a while go, so the cache stays small.
        cache = cache.filter { now - $0.value.readAt < Self.lifetime }
        cache[id] = (valid, now)
        return valid
    }
}

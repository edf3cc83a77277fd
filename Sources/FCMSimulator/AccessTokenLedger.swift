import Foundation

/// The access tokens the simulator issued and what each is good for: the account it was issued to and when it
/// expires by the simulator's clock. A value kept under the simulator's lock; time is passed in.
struct AccessTokenLedger: Sendable {
    /// What one access token is good for.
    struct Grant: Sendable, Hashable {
        /// The account it was issued to.
        var account: FCMSimulatorAccount
        /// When it stops being accepted.
        var expiresAt: Date
    }

    /// Above this many tokens, issuing one first forgets the expired ones.
    private static let pruneThreshold = 1_024

    /// The tokens issued and not revoked, expired ones included until pruned.
    private var grants: [String: Grant] = [:]

    /// A ledger with no token.
    init() {}

    /// Records `token`, issued at `now` to `account` for `lifetime` seconds.
    mutating func record(_ token: String, for account: FCMSimulatorAccount, now: Date, lifetime: Int) {
        if grants.count >= Self.pruneThreshold { grants = grants.filter { $0.value.expiresAt > now } }
        grants[token] = Grant(account: account, expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
    }

    /// The grant of `token` at `now`; nil when it was never issued, was revoked, or has expired.
    func grant(of token: String, now: Date) -> Grant? {
        guard let grant = grants[token], now < grant.expiresAt else { return nil }
        return grant
    }

    /// Forgets every token: each is refused from now on, as when Google revokes them.
    mutating func revokeAll() {
        grants = [:]
    }

    /// A new access token's text: `ya29.` and 120 random base64url characters, like Google's.
    static func makeToken(using random: inout some RandomNumberGenerator) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        return "ya29." + String((0..<120).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }
}

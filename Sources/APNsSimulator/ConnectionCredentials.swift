import APNs
import Foundation

/// What one connection knows about how its client authenticates: the client certificate's topic, or the
/// provider tokens it presented, the team it is bound to, and the token in use.
struct ConnectionCredentials {
    /// How the connection authenticates; decided at its first request.
    enum Mode {
        /// Not known yet.
        case undetermined
        /// No client certificate: each request carries a provider token.
        case token
        /// A client certificate the CA verified; `topic` is its subject UID (nil when it has none).
        case certificate(topic: String?)
    }

    /// The token in use and when this connection first saw it.
    struct CurrentToken {
        var token: String
        var firstSeen: Date
    }

    /// Why a presented token was refused.
    enum Refusal {
        case missing, invalid, expired, otherTeam, updatedTooSoon
    }

    /// A token older than this is ExpiredProviderToken (one hour).
    static let maximumTokenAge: TimeInterval = 3600
    /// A token issued further in the future than this is InvalidProviderToken (clock skew allowance).
    static let maximumClockSkew: TimeInterval = 60
    /// A different token sooner than this after the current one was first seen is
    /// TooManyProviderTokenUpdates (20 minutes).
    static let minimumTokenInterval: TimeInterval = 20 * 60
    /// How many verification results are cached; the cache starts over when full.
    private static let cacheCapacity = 16

    /// What checking one request's token found.
    struct TokenCheck {
        /// The token's claims, when it verified.
        var claims: VerifiedProviderToken?
        /// True when the token verified and differs from the one presented before it on this connection.
        var newlyPresented = false
        /// Why the request is refused, if it is.
        var refusal: Refusal?
    }

    /// How the connection authenticates.
    var mode = Mode.undetermined
    /// The team the connection is bound to by its first accepted token.
    private(set) var team: String?
    /// The token in use.
    private(set) var current: CurrentToken?
    /// The last valid token presented, accepted or not.
    private var lastPresented: String?
    /// Verification results by token (nil: the token is invalid), so each token is verified once.
    private var verified: [String: VerifiedProviderToken?] = [:]

    /// Checks the `authorization` header of a request at `now`: the token must verify, be at most an hour
    /// old, belong to the connection's team, and be the current token unless that is 20 minutes old.
    ///
    /// A token of another team than the connection's is refused as UnrelatedKeyIdInToken, Apple's reason
    /// for a key unrelated to the one of the connection's first push; another key of the same team is
    /// accepted (a key serves all apps of its team).
    mutating func check(_ authorization: String?, at now: Date, verifier: ProviderTokenVerifier) -> TokenCheck {
        guard let authorization else { return TokenCheck(refusal: .missing) }
        guard authorization.utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return TokenCheck(refusal: .invalid)
        }
        let token = String(authorization.dropFirst(7))
        guard let claims = verify(token, verifier: verifier) else { return TokenCheck(refusal: .invalid) }
        var check = TokenCheck(claims: claims)
        let age = now.timeIntervalSince1970 - TimeInterval(claims.issuedAt)
        if age > Self.maximumTokenAge {
            check.refusal = .expired
        } else if age < -Self.maximumClockSkew {
            check.refusal = .invalid
        } else if let team, team != claims.teamID {
            check.refusal = .otherTeam
        } else {
            team = claims.teamID
            check.newlyPresented = lastPresented != token
            lastPresented = token
            if let current, current.token != token {
                if now.timeIntervalSince(current.firstSeen) < Self.minimumTokenInterval {
                    check.refusal = .updatedTooSoon
                } else {
                    self.current = CurrentToken(token: token, firstSeen: now)
                }
            } else if current == nil {
                current = CurrentToken(token: token, firstSeen: now)
            }
        }
        return check
    }

    private mutating func verify(_ token: String, verifier: ProviderTokenVerifier) -> VerifiedProviderToken? {
        if let cached = verified[token] { return cached }
        if verified.count >= Self.cacheCapacity { verified.removeAll(keepingCapacity: true) }
        let result = verifier.verify(token)
        verified[token] = .some(result)
        return result
    }
}

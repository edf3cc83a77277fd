/// One service account's access token, as a value: when to fetch one, who waits for it, when to refresh it, and
/// what a 401 does. Time is passed in; a thin shell posts the assertions and carries out the actions.
///
/// One fetch at a time per account, never one per message: requests that need a token while it is being fetched
/// wait for that fetch. A token is used until ``refreshMargin`` before it expires; from then on the next request
/// starts a refresh and keeps using the old token until the new one comes. A 401 for the token in use drops it
/// (once: a 401 for a token already replaced changes nothing). A failed fetch answers the requests that waited
/// with the error, and the next request fetches again no sooner than ``retryDelay`` after it.
public struct AccessTokenStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// How long before it expires a token is refreshed (google-auth refreshes 3 min 45 s early).
    public static var refreshMargin: Duration { .seconds(225) }
    /// How long after a failed fetch the next one may start.
    public static var retryDelay: Duration { .seconds(1) }

    /// A token and when it stops being valid.
    public struct Token: Sendable, Hashable {
        /// The bearer token.
        public var value: String
        /// When it expires.
        public var expiresAt: Instant

        /// A token `value` that expires at `expiresAt`.
        public init(value: String, expiresAt: Instant) {
            self.value = value
            self.expiresAt = expiresAt
        }
    }

    /// What the shell does for a request that needs a token.
    public enum TokenAction: Sendable, Hashable {
        /// Send with this token.
        case use(String)
        /// Send with this token, and fetch a new one meanwhile (it expires soon).
        case useAndRefresh(String)
        /// Fetch a token, and wait for it.
        case fetchAndWait
        /// A fetch is under way: wait for it.
        case wait
        /// The last fetch failed less than ``retryDelay`` ago: fail the request with its reason.
        case fail(String)
    }

    private enum State: Sendable {
        case empty
        case fetching(current: Token?)
        case ready(Token)
        case failed(reason: String, at: Instant)
    }

    private var state: State = .empty

    /// A machine with no token yet.
    public init() {}

    /// A request needs a token at `now`.
    public mutating func tokenNeeded(now: Instant) -> TokenAction {
        switch state {
        case .empty:
            state = .fetching(current: nil)
            return .fetchAndWait
        case .fetching(let current?) where now < current.expiresAt:
            return .use(current.value)
        case .fetching:
            return .wait
        case .ready(let token) where now >= token.expiresAt:
            state = .fetching(current: nil)
            return .fetchAndWait
        case .ready(let token) where now >= token.expiresAt.advanced(by: .zero - Self.refreshMargin):
            state = .fetching(current: token)
            return .useAndRefresh(token.value)
        case .ready(let token):
            return .use(token.value)
        case .failed(let reason, let at) where now < at.advanced(by: Self.retryDelay):
            return .fail(reason)
        case .failed:
            state = .fetching(current: nil)
            return .fetchAndWait
        }
    }

    /// The fetch brought `token`, valid for `expiresIn` from `now`: the waiting requests use it (its value is
    /// returned for them).
    public mutating func fetched(_ token: String, expiresIn: Duration, now: Instant) -> String {
        state = .ready(Token(value: token, expiresAt: now.advanced(by: expiresIn)))
        return token
    }

    /// The fetch failed at `now` for `reason`: the waiting requests fail with it, unless a token that is still
    /// valid was being refreshed (it stays in use, and the next request refreshes again).
    public mutating func fetchFailed(_ reason: String, now: Instant) -> String? {
        if case .fetching(let current?) = state, now < current.expiresAt {
            state = .ready(current)
            return nil
        }
        state = .failed(reason: reason, at: now)
        return reason
    }

    /// FCM answered 401 to a request sent with `token`: if it is the token in use, it is dropped and the next
    /// request fetches another; returns whether the request should be sent again (once) with a new token.
    public mutating func refused(_ token: String) -> Bool {
        switch state {
        case .ready(let current) where current.value == token:
            state = .empty
            return true
        case .fetching(let current?) where current.value == token:
            state = .fetching(current: nil)
            return true
        default:
            // A token already replaced: the request goes again with the new one.
            return true
        }
    }
}

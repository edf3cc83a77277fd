import Synchronization

/// A per-credential request limit for the wire: each key (a credential id, a tenant) gets its own token bucket
/// of `requestsPerSecond` with bursts of `burst`.
///
/// ``admit(_:)`` never waits: it answers at once with the time after which the caller may retry. Buckets that
/// have refilled are forgotten when many keys accumulate, so unused keys cost nothing for long.
package final class RequestLimiter: Sendable {
    private struct State {
        var buckets: [String: TokenBucket] = [:]
        var pruneAt: Int
    }

    /// Keys held before full buckets are pruned.
    static let pruneThreshold = 1_024

    private let state: Mutex<State>
    private let prototype: TokenBucket
    private let clock: any LimiterClock

    /// A limiter allowing each key `requestsPerSecond` (positive) on average and `burst` (at least 1) at once.
    package convenience init(requestsPerSecond: Double, burst: Int) {
        self.init(requestsPerSecond: requestsPerSecond, burst: burst, clock: SystemLimiterClock())
    }

    /// A limiter reading `clock`.
    init(requestsPerSecond: Double, burst: Int, clock: any LimiterClock) {
        self.prototype = TokenBucket(ratePerSecond: requestsPerSecond, burst: burst)
        self.clock = clock
        self.state = Mutex(State(pruneAt: Self.pruneThreshold))
    }

    /// Admits one request of `key` that costs `cost` tokens (``RequestCost``; at most the burst): `nil` when
    /// admitted, else the milliseconds after which it will be (at least 1), for a `RATE_LIMITED` answer's
    /// retry-after: the real wait for that many tokens.
    package func admit(_ key: String, cost: Int = 1) -> UInt32? {
        let now = clock.now
        let wait: Duration? = state.withLock { state in
            let wait = state.buckets[key, default: prototype].take(cost, now: now)
            if state.buckets.count >= state.pruneAt {
                state.buckets = state.buckets.filter { !$0.value.isFull(at: now) }
                state.pruneAt = max(Self.pruneThreshold, state.buckets.count * 2)
            }
            return wait
        }
        return wait.map(Self.retryAfterMilliseconds)
    }

    /// The keys the limiter currently holds a bucket for.
    var trackedKeys: Int { state.withLock { $0.buckets.count } }

    /// `wait` in whole milliseconds, rounded up, at least 1.
    static func retryAfterMilliseconds(_ wait: Duration) -> UInt32 {
        let (seconds, attoseconds) = wait.components
        let milliseconds = seconds * 1_000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return UInt32(clamping: max(milliseconds, 1))
    }
}

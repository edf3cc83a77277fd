import PushRelayProtocol
package import RelayStore
import Synchronization

/// The monotonic clock the limiters read and sleep on; tests inject one that counts its sleeps.
protocol LimiterClock: Sendable {
    /// The current instant.
    var now: ContinuousClock.Instant { get }
    /// Suspends until `deadline`; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// The process's continuous clock and `Task.sleep`.
struct SystemLimiterClock: LimiterClock {
    var now: ContinuousClock.Instant { .now }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, tolerance: .zero, clock: .continuous)
    }
}

/// A token bucket as a generic cell rate algorithm: `rate` tokens per second, at most `burst` at once.
///
/// A value with no clock of its own: every call takes the instant to decide at, so it is deterministic under
/// test. Share it between tasks inside a `Mutex` (``RequestLimiter``, ``TenantPacer``). The state is one
/// instant, the theoretical arrival time of the next token (exact `Duration` arithmetic, no drift).
struct TokenBucket: Sendable, Hashable {
    /// The time one token takes to come back: 1 / rate.
    private(set) var interval: Duration
    /// The most tokens available at once.
    private(set) var burst: Int
    /// When the bucket's debt is paid off: before it, tokens are owed; `nil` for a full bucket.
    private var theoreticalArrival: ContinuousClock.Instant?

    /// A full bucket of `burst` tokens (at least 1) refilled at `ratePerSecond` (positive).
    init(ratePerSecond: Double, burst: Int) {
        precondition(ratePerSecond > 0 && ratePerSecond.isFinite, "a token bucket's rate must be positive")
        self.interval = .seconds(1 / ratePerSecond)
        self.burst = max(burst, 1)
    }

    /// A full bucket of `burst` tokens (at least 1) refilled at `ratePerSecond` (at least 1), exactly.
    init(ratePerSecond: Int, burst: Int) {
        self.interval = .seconds(1) / max(ratePerSecond, 1)
        self.burst = max(burst, 1)
    }

    /// Changes the rate and burst from now on; tokens already owed stay owed.
    mutating func reconfigure(interval: Duration, burst: Int) {
        self.interval = interval
        self.burst = max(burst, 1)
    }

    /// Takes `count` tokens (1 to the burst) at `now`: `nil` when they were available (and are now used), else how
    /// long until they are (nothing is taken).
    mutating func take(_ count: Int = 1, now: ContinuousClock.Instant) -> Duration? {
        let start = max(theoreticalArrival ?? now, now)
        let arrival = start + interval * min(max(count, 1), burst)
        let allowedAt = arrival - interval * burst
        guard allowedAt <= now else { return allowedAt - now }
        theoreticalArrival = arrival
        return nil
    }

    /// Takes `count` tokens at `now`, going into debt when there are not enough, and returns how long the
    /// caller must wait before using them (`.zero` when they were there). Later callers queue behind the debt,
    /// in the order they called.
    mutating func reserve(count: Int, now: ContinuousClock.Instant) -> Duration {
        let start = max(theoreticalArrival ?? now, now)
        let arrival = start + interval * max(count, 0)
        theoreticalArrival = arrival
        let allowedAt = arrival - interval * burst
        return allowedAt > now ? allowedAt - now : .zero
    }

    /// Whether a send asked for at `now` would have to wait: the bucket owes more than its burst.
    func owes(at now: ContinuousClock.Instant) -> Bool {
        theoreticalArrival.map { $0 - interval * burst > now } ?? false
    }

    /// Whether the bucket is full at `now` (nothing owed, every token back): such a bucket can be forgotten.
    func isFull(at now: ContinuousClock.Instant) -> Bool {
        theoreticalArrival.map { $0 <= now } ?? true
    }
}

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

/// This process's share of each tenant's `notifications_per_second` among the relay processes on one
/// database, so that together they stay within it. A tenant whose pages are being sent is shared by demand:
/// a relay holding `mine` of the `all` pages leased for it paces at `rate × mine / all`, so a relay that
/// holds most of a job's pages gets most of the rate, and relays with no page of the tenant take none of it.
/// Until the heartbeat has seen this relay hold a page of the tenant, it paces at the rate divided by the
/// live relays (rounded down, at least 1). ``RelayHeartbeat/run(node:every:share:)`` keeps both
/// current from the heartbeats (`relay_nodes`) and page leases (`job_pages`) every 2 s; in between, shares
/// computed at different instants may add up to a little more than the rate.
package final class RelayShare: Sendable {
    private let state = Mutex<NodeHeartbeat>(NodeHeartbeat(liveRelays: 1, leasedPages: [:]))

    /// The share of the pacers of this process (a relay runs one per process).
    package static let process = RelayShare()

    /// A share of one relay: the whole rate, until told otherwise.
    package init() {}

    /// The live relays the rate is divided among (at least 1).
    package var liveRelays: Int {
        state.withLock { $0.liveRelays }
    }

    /// Takes a heartbeat's findings: the live relays (at least 1) and each tenant's leased pages.
    package func update(_ heartbeat: NodeHeartbeat) {
        var heartbeat = heartbeat
        heartbeat.liveRelays = max(1, heartbeat.liveRelays)
        state.withLock { $0 = heartbeat }
    }

    /// This relay's part of `tenant`'s `rate`: by its leased pages when it holds some, else `rate` / live
    /// relays; rounded down, at least 1.
    package func part(of rate: Int, tenant: String) -> Int {
        state.withLock { state in
            if let pages = state.leasedPages[tenant], pages.mine > 0, pages.all >= pages.mine {
                return max(1, rate * pages.mine / pages.all)
            }
            return max(1, rate / state.liveRelays)
        }
    }
}

/// Paces each tenant's fan-out to its `rate_limits.notifications_per_second`: more than the rate wait their
/// turn, nothing is dropped. With several relays on one database, each paces at its ``RelayShare`` of the
/// rate.
///
/// One token bucket per tenant, allowing bursts of ``burstWindow`` worth of the rate. ``acquire(tenant:rate:count:)``
/// reserves its sends under a lock and sleeps only when the tenant is over its rate, until its reserved slot:
/// callers are served in the order they asked, and since slots are reserved in the bucket's time rather than
/// when sleepers wake, late wake-ups do not lower the rate over time.
package final class TenantPacer: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])
    private let clock: any LimiterClock
    private let share: RelayShare

    /// How much of a second's rate may go out at once after an idle period.
    package let burstWindow: Duration

    /// A pacer allowing bursts of `burstWindow` (50 ms by default) worth of each tenant's rate, pacing at
    /// `share` of each rate (by default the process's).
    package convenience init(burstWindow: Duration = .milliseconds(50), share: RelayShare = .process) {
        self.init(burstWindow: burstWindow, share: share, clock: SystemLimiterClock())
    }

    /// A pacer reading and sleeping on `clock`.
    init(burstWindow: Duration = .milliseconds(50), share: RelayShare = RelayShare(), clock: any LimiterClock) {
        self.burstWindow = burstWindow
        self.share = share
        self.clock = clock
    }

    /// Suspends until `count` sends of `tenant` are allowed at this relay's share of `rate` notifications
    /// per second (at least 1), at once when the tenant is under it.
    ///
    /// A cancelled task returns early, its sends still counted against the tenant.
    package func acquire(tenant: String, rate: Int, count: Int = 1) async {
        await acquire(tenant: tenant, rate: rate, count: count, beforeWaiting: {})
    }

    /// ``acquire(tenant:rate:count:)``, calling `beforeWaiting` first when it has to wait (so that a caller
    /// holding sends back for a batch lets them go before it sleeps).
    func acquire(tenant: String, rate: Int, count: Int = 1, beforeWaiting: () -> Void) async {
        let (now, wait) = reserve(tenant: tenant, rate: rate, count: count)
        guard wait > .zero else { return }
        beforeWaiting()
        try? await clock.sleep(until: now + wait)
    }

    /// Reserves up to `limit` sends of `tenant` (at least one, at most a burst at this relay's share of `rate`) as
    /// ``acquire(tenant:rate:count:)`` does, calling `beforeWaiting` first when it has to wait, and returns how
    /// many: a caller that starts its sends one at a time asks once per burst instead of once per send.
    func acquire(tenant: String, rate: Int, upTo limit: Int, beforeWaiting: () -> Void) async -> Int {
        let count = min(max(limit, 1), burstSize(rate: share.part(of: max(rate, 1), tenant: tenant)))
        await acquire(tenant: tenant, rate: rate, count: count, beforeWaiting: beforeWaiting)
        return count
    }

    /// Reserves `count` sends of `tenant` at this relay's share of `rate`: the instant it did so, and how long
    /// after it the caller may use them (`.zero`: at once).
    func reserve(tenant: String, rate: Int, count: Int) -> (now: ContinuousClock.Instant, wait: Duration) {
        let rate = share.part(of: max(rate, 1), tenant: tenant)
        let interval = Duration.seconds(1) / rate
        let burst = burstSize(rate: rate)
        let now = clock.now
        return buckets.withLock { buckets in
            var bucket = buckets[tenant] ?? TokenBucket(ratePerSecond: rate, burst: burst)
            if bucket.interval != interval || bucket.burst != burst {
                bucket.reconfigure(interval: interval, burst: burst)
            }
            let wait = bucket.reserve(count: count, now: now)
            buckets[tenant] = bucket
            return (now, wait)
        }
    }

    /// Whether `tenant`'s sends are held back by its rate now: one more would wait for its turn. A page loop
    /// then takes no further page of the tenant (``FanOutWorker``): it would only wait too.
    func isBehind(tenant: String) -> Bool {
        let now = clock.now
        return buckets.withLock { $0[tenant]?.owes(at: now) ?? false }
    }

    /// The burst allowed at `rate`: ``burstWindow`` worth of it, at least 1.
    func burstSize(rate: Int) -> Int {
        max(1, Int(Double(rate) * burstWindow.seconds))
    }
}

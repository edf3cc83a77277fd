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

/// A Firebase project's send quota as a value: FCM takes so many messages a minute per project (600,000 by
/// default) and answers 429 `QUOTA_EXCEEDED` with `Retry-After` beyond it, so the pool paces itself below it, and
/// pauses the whole project for as long as a 429 asks. Time is passed in.
///
/// A token bucket refilled continuously at the quota's rate, holding at most a second of it; a batch may take more
/// than is left (the balance goes negative) and the next one waits until it is paid back.
public struct ProjectQuota<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// Messages a minute.
    public let messagesPerMinute: Int
    private var balance: Double
    private var updatedAt: Instant?
    private var pausedUntil: Instant?

    /// A quota of `messagesPerMinute` (at least 1), full.
    public init(messagesPerMinute: Int) {
        self.messagesPerMinute = max(1, messagesPerMinute)
        balance = Double(self.messagesPerMinute) / 60
    }

    private var perSecond: Double { Double(messagesPerMinute) / 60 }

    /// How long a batch must wait at `now` before it may go: zero when it may go now (then ``take(_:now:)`` it).
    public mutating func delay(now: Instant) -> Duration {
        refill(now: now)
        if let pausedUntil, now < pausedUntil { return now.duration(to: pausedUntil) }
        pausedUntil = nil
        guard balance < 0 else { return .zero }
        return .milliseconds(Int64((-balance / perSecond * 1_000).rounded(.up)))
    }

    /// `count` messages go at `now`.
    public mutating func take(_ count: Int, now: Instant) {
        refill(now: now)
        balance -= Double(count)
    }

    /// FCM answered 429 at `now` asking to wait `retryAfter`: nothing goes to the project before then.
    public mutating func pause(for retryAfter: Duration, now: Instant) {
        let until = now.advanced(by: retryAfter)
        if pausedUntil.map({ until > $0 }) ?? true { pausedUntil = until }
    }

    private mutating func refill(now: Instant) {
        defer { updatedAt = now }
        guard let updatedAt, updatedAt < now else { return }
        let elapsed = updatedAt.duration(to: now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        balance = min(perSecond, balance + seconds * perSecond)
    }
}

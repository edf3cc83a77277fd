import Synchronization

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

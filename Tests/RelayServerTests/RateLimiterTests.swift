import RelayStore
import Synchronization
import Testing

@testable import RelayServer

/// A clock that moves only when told to, or when something sleeps on it (to the sleep's deadline), and
/// records every sleep.
final class ManualLimiterClock: LimiterClock {
    private let state: Mutex<(now: ContinuousClock.Instant, sleeps: [Duration])>

    /// A clock starting at the real clock's current instant.
    init() {
        state = Mutex((now: ContinuousClock.now, sleeps: []))
    }

    var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// The durations slept so far, in order.
    var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// Moves the clock forward by `duration`.
    func advance(by duration: Duration) {
        state.withLock { $0.now = $0.now.advanced(by: duration) }
    }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        state.withLock { state in
            state.sleeps.append(deadline - state.now)
            state.now = max(state.now, deadline)
        }
    }
}

/// A clock that reads the real time and counts its sleeps, which really happen.
final class CountingLimiterClock: LimiterClock {
    private let count = Atomic<Int>(0)

    var now: ContinuousClock.Instant { .now }

    /// How many times something slept on this clock.
    var sleepCount: Int { count.load(ordering: .relaxed) }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        count.add(1, ordering: .relaxed)
        try await Task.sleep(until: deadline, tolerance: .zero, clock: .continuous)
    }
}

@Suite("Rate limiters")
struct RateLimiterTests {
    @Test("token bucket: a burst at once, then one token per interval; take never goes into debt")
    func tokenBucketTake() {
        let start = ContinuousClock.now
        var bucket = TokenBucket(ratePerSecond: 10, burst: 3)
        #expect(bucket.take(now: start) == nil)
        #expect(bucket.take(now: start) == nil)
        #expect(bucket.take(now: start) == nil)
        #expect(bucket.take(now: start) == .milliseconds(100))
        // Refusals take nothing: asking again later gives the remaining time.
        #expect(bucket.take(now: start + .milliseconds(99)) == .milliseconds(1))
        #expect(bucket.take(now: start + .milliseconds(100)) == nil)
        #expect(bucket.take(now: start + .milliseconds(100)) == .milliseconds(100))
        // An idle bucket refills to its burst, never beyond.
        let later = start + .seconds(10)
        #expect(bucket.isFull(at: later))
        #expect((0..<5).map { _ in bucket.take(now: later) == nil } == [true, true, true, false, false])
        #expect(!bucket.isFull(at: later))
    }

    @Test("token bucket with a fractional rate: 0.5 per second is a token every 2 s")
    func tokenBucketFractionalRate() {
        let start = ContinuousClock.now
        var bucket = TokenBucket(ratePerSecond: 0.5, burst: 1)
        #expect(bucket.take(now: start) == nil)
        #expect(bucket.take(now: start + .seconds(1)) == .seconds(1))
        #expect(bucket.take(now: start + .seconds(2)) == nil)
    }

    @Test("token bucket reservations go into debt and queue in the order they are made")
    func tokenBucketReserve() {
        let start = ContinuousClock.now
        var bucket = TokenBucket(ratePerSecond: 10, burst: 2)
        let waits = (0..<5).map { _ in bucket.reserve(count: 1, now: start) }
        #expect(waits == [.zero, .zero, .milliseconds(100), .milliseconds(200), .milliseconds(300)])
        #expect(bucket.take(now: start + .milliseconds(300)) == .milliseconds(100))
        #expect(bucket.reserve(count: 10, now: start + .milliseconds(400)) == .milliseconds(900))
        // 1,000 reservations at 1,000/s, one every millisecond: exactly the rate, nobody waits.
        var paced = TokenBucket(ratePerSecond: 1_000, burst: 1)
        let paid = (0..<1_000).map { paced.reserve(count: 1, now: start + .milliseconds($0)) }
        #expect(paid.allSatisfy { $0 == .zero })
    }

    @Test("request limiter: each key has its own bucket; retry-after is in whole milliseconds, rounded up")
    func requestLimiter() {
        let clock = ManualLimiterClock()
        let limiter = RequestLimiter(requestsPerSecond: 3, burst: 2, clock: clock)
        #expect(limiter.admit("a") == nil)
        #expect(limiter.admit("a") == nil)
        #expect(limiter.admit("a") == 334)  // 333.33… ms
        #expect(limiter.admit("b") == nil)
        clock.advance(by: .milliseconds(333))
        #expect(limiter.admit("a") == 1)
        clock.advance(by: .milliseconds(1))
        #expect(limiter.admit("a") == nil)
        #expect(limiter.admit("a") == 333)  // 332.66… ms: a token every 333.33… ms, taken 1 ms late
        #expect(RequestLimiter.retryAfterMilliseconds(.nanoseconds(1)) == 1)
        #expect(RequestLimiter.retryAfterMilliseconds(.seconds(2)) == 2_000)
        #expect(RequestLimiter.retryAfterMilliseconds(.seconds(10_000_000)) == UInt32.max)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("request limiter charges a request by its cost; its retry-after is the wait for that many tokens")
    func requestLimiterCharges() {
        let clock = ManualLimiterClock()
        let limiter = RequestLimiter(requestsPerSecond: 10, burst: 10, clock: clock)
        #expect(limiter.admit("a", cost: 10) == nil)
        #expect(limiter.admit("a") == 100)
        clock.advance(by: .milliseconds(500))
        // Five tokens are back: a request of 8 waits for three more.
        #expect(limiter.admit("a", cost: 8) == 300)
        #expect(limiter.admit("a", cost: 5) == nil)
        // A cost above the burst is charged the burst, so that it can be admitted at all.
        clock.advance(by: .seconds(2))
        #expect(limiter.admit("a", cost: 50) == nil)
        #expect(limiter.admit("a") == 100)
    }

    @Test("request limiter forgets refilled buckets once many keys accumulate")
    func requestLimiterPrunes() {
        let clock = ManualLimiterClock()
        let limiter = RequestLimiter(requestsPerSecond: 10, burst: 1, clock: clock)
        for key in 0..<1_000 { #expect(limiter.admit("k\(key)") == nil) }
        #expect(limiter.trackedKeys == 1_000)
        clock.advance(by: .seconds(1))
        // The 1,024th key triggers a prune: the first 1,000 buckets refilled and go, the 24 new ones stay.
        for key in 1_000..<1_100 { #expect(limiter.admit("k\(key)") == nil) }
        #expect(limiter.trackedKeys == 100)
        // A pruned key starts with a full bucket, as it would have anyway.
        #expect(limiter.admit("k1") == nil)
        #expect(limiter.admit("k1") == 100)
    }

    @Test("pacer under the rate never sleeps: bursts of the window's worth, then one every interval")
    func pacerUnderRate() async {
        let clock = ManualLimiterClock()
        let pacer = TenantPacer(burstWindow: .milliseconds(50), clock: clock)
        #expect(pacer.burstSize(rate: 100) == 5)
        #expect(pacer.burstSize(rate: 10) == 1)
        for _ in 0..<5 { await pacer.acquire(tenant: "circl", rate: 100) }
        #expect(clock.sleeps.isEmpty)
        for _ in 0..<1_000 {
            clock.advance(by: .milliseconds(10))
            await pacer.acquire(tenant: "circl", rate: 100)
        }
        clock.advance(by: .milliseconds(50))
        await pacer.acquire(tenant: "circl", rate: 100, count: 5)
        #expect(clock.sleeps.isEmpty)
        // One more than the rate allows waits exactly one interval.
        await pacer.acquire(tenant: "circl", rate: 100)
        #expect(clock.sleeps == [.milliseconds(10)])
    }

    @Test("pacer asked for up to n sends grants at most a burst, at least one, and paces them as n single sends")
    func pacerUpTo() async {
        let clock = ManualLimiterClock()
        let pacer = TenantPacer(burstWindow: .milliseconds(50), clock: clock)
        #expect(await pacer.acquire(tenant: "circl", rate: 100, upTo: 32, beforeWaiting: {}) == 5)
        #expect(clock.sleeps.isEmpty)
        var waited = false
        #expect(await pacer.acquire(tenant: "circl", rate: 100, upTo: 3, beforeWaiting: { waited = true }) == 3)
        #expect(waited)
        #expect(clock.sleeps == [.milliseconds(30)])
        #expect(await pacer.acquire(tenant: "circl", rate: 100, upTo: 0, beforeWaiting: {}) == 1)
        #expect(clock.sleeps == [.milliseconds(30), .milliseconds(10)])
        // 1,000 sends asked for 32 at a time take as long as 1,000 single sends: 9.95 s after the burst.
        let start = clock.now
        var granted = 0
        while granted < 1_000 {
            granted += await pacer.acquire(tenant: "anky", rate: 100, upTo: min(32, 1_000 - granted), beforeWaiting: {})
        }
        #expect(granted == 1_000)
        #expect(clock.now - start == .milliseconds(9_950))
    }

    @Test("pacer over the rate: 1,000 sends at 100/s take 9.95 s of the clock (the first 5 are the burst)")
    func pacerOverRate() async {
        let clock = ManualLimiterClock()
        let pacer = TenantPacer(burstWindow: .milliseconds(50), clock: clock)
        let start = clock.now
        for _ in 0..<1_000 { await pacer.acquire(tenant: "anky", rate: 100) }
        #expect(clock.now - start == .milliseconds(9_950))
        #expect(clock.sleeps.count == 995)
        #expect(clock.sleeps.allSatisfy { $0 == .milliseconds(10) })
    }

    @Test("pacer: callers are served in the order they asked; tenants do not wait for each other")
    func pacerFairness() {
        let clock = ManualLimiterClock()
        let pacer = TenantPacer(burstWindow: .milliseconds(10), clock: clock)
        // Rate 1,000, burst 10: a caller taking 100 owes 90 ms; the callers after it queue behind.
        #expect(pacer.reserve(tenant: "circl", rate: 1_000, count: 100).wait == .milliseconds(90))
        #expect(pacer.reserve(tenant: "circl", rate: 1_000, count: 1).wait == .milliseconds(91))
        #expect(pacer.reserve(tenant: "circl", rate: 1_000, count: 1).wait == .milliseconds(92))
        #expect(pacer.reserve(tenant: "argus", rate: 1_000, count: 1).wait == .zero)
        // A rate change applies from now on; what is owed stays owed.
        #expect(pacer.reserve(tenant: "circl", rate: 100, count: 1).wait == .milliseconds(92) + .milliseconds(10))
        clock.advance(by: .seconds(1))
        #expect(pacer.reserve(tenant: "circl", rate: 100, count: 1).wait == .zero)
    }

    @Test("pacer with three live relays: each paces its third of the tenant's rate, rounded down")
    func pacerShare() {
        let clock = ManualLimiterClock()
        let share = RelayShare()
        let pacer = TenantPacer(burstWindow: .milliseconds(50), share: share, clock: clock)
        // One relay: 1,000 sends at 1,000/s with a burst of 50 owe 950 ms.
        #expect(pacer.reserve(tenant: "circl", rate: 1_000, count: 1_000).wait == .milliseconds(950))
        share.update(NodeHeartbeat(liveRelays: 3, leasedPages: [:]))
        #expect(share.part(of: 1_000, tenant: "circl") == 333)
        #expect(share.part(of: 2, tenant: "circl") == 1)
        // Three: 333/s with a burst of 16, so 1,000 sends owe 984 intervals of 1/333 s.
        #expect(pacer.reserve(tenant: "argus", rate: 1_000, count: 1_000).wait == .seconds(1) / 333 * 984)
        share.update(NodeHeartbeat(liveRelays: 0, leasedPages: [:]))
        #expect(share.liveRelays == 1)
    }

    @Test("relays share a tenant's rate by the pages each holds; without a page of it, by the live relays")
    func shareByDemand() {
        let share = RelayShare()
        share.update(
            NodeHeartbeat(
                liveRelays: 3,
                leasedPages: [
                    "circl": LeasedPages(mine: 3, all: 4), "argus": LeasedPages(mine: 0, all: 5),
                    "anky": LeasedPages(mine: 1, all: 1000),
                ]
            )
        )
        #expect(share.part(of: 500, tenant: "circl") == 375)
        #expect(share.part(of: 500, tenant: "argus") == 166)
        #expect(share.part(of: 500, tenant: "familyportal") == 166)
        #expect(share.part(of: 500, tenant: "anky") == 1)
        // The pacer follows: circl at 375/s (burst 18) owes 1,000 - 18 intervals of 1/375 s.
        let pacer = TenantPacer(burstWindow: .milliseconds(50), share: share, clock: ManualLimiterClock())
        #expect(pacer.reserve(tenant: "circl", rate: 500, count: 1_000).wait == .seconds(1) / 375 * 982)
    }

    @Test("pacer on the real clock: 2,000 sends at 1,000/s from 8 tasks take at least 1.5 s")
    func pacerRealTime() async {
        let clock = CountingLimiterClock()
        let pacer = TenantPacer(clock: clock)
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<250 { await pacer.acquire(tenant: "circl", rate: 1_000) }
                }
            }
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(1_500), "2,000 sends at 1,000/s took \(elapsed)")
        #expect(clock.sleepCount > 0)

        // Under the rate nothing sleeps: 40 sends, at most the 50 of a burst at 1,000/s, on a fresh tenant.
        let before = clock.sleepCount
        for _ in 0..<40 { await pacer.acquire(tenant: "anky", rate: 1_000) }
        #expect(clock.sleepCount == before)
    }
}

import Testing

@testable import RelayServer

@Suite("Fair share of the page loops")
struct FairShareTests {
    private let start = ContinuousClock.now

    @Test("a tenant with a backlog goes after a tenant that was not served: the other's due page goes next")
    func backlogGoesLast() {
        var share = FairShare()
        // circl's backlog: eight pages of 2,000 devices taken one after the other.
        for page in 0..<8 {
            share.charge("circl", devices: 2_000, weight: 1, now: start + .milliseconds(page * 100))
        }
        #expect(share.order(now: start + .seconds(1)) == ["circl"])
        // familyportal, unlisted, goes first; once served one device it still goes before circl.
        share.charge("familyportal", devices: 1, weight: 1, now: start + .seconds(1))
        #expect(share.order(now: start + .seconds(1)) == ["familyportal", "circl"])
    }

    @Test("two tenants with backlogs take turns by devices, in proportion to their weights")
    func weightedTurns() {
        var share = FairShare()
        var now = start
        var served = ["circl": 0, "argus": 0]
        for _ in 0..<300 {
            // Whoever is first in the order (an unlisted tenant before the listed ones) takes the next page.
            let order = share.order(now: now)
            let next = served.keys.sorted().first { !order.contains($0) } ?? order[0]
            served[next, default: 0] += 1_000
            share.charge(next, devices: 1_000, weight: next == "argus" ? 2 : 1, now: now)
            now += .milliseconds(50)
        }
        let ratio = Double(served["argus"]!) / Double(served["circl"]!)
        #expect(ratio > 1.9 && ratio < 2.1, "argus (weight 2) was served \(ratio) × circl's devices")
    }

    @Test("service fades with the half-life and is then forgotten")
    func fades() {
        var share = FairShare(halfLife: .seconds(10))
        share.charge("circl", devices: 4_000, weight: 1, now: start)
        share.charge("argus", devices: 1_000, weight: 1, now: start)
        #expect(share.order(now: start) == ["argus", "circl"])
        // 20 s (two half-lives) later circl's 4,000 count as 1,000 and argus's 1,000 as 250: 700 more keep argus
        // first, 100 more again put it behind.
        share.charge("argus", devices: 700, weight: 1, now: start + .seconds(20))
        #expect(share.order(now: start + .seconds(20)) == ["argus", "circl"])
        share.charge("argus", devices: 100, weight: 1, now: start + .seconds(20))
        #expect(share.order(now: start + .seconds(20)) == ["circl", "argus"])
        // After 13 half-lives, 4,000 devices fade below one: nobody is listed.
        #expect(share.order(now: start + .seconds(140)) == [])
    }

    @Test("a pacer says a tenant is behind once a send would wait its turn, and not before")
    func pacerBehind() {
        let clock = ManualLimiterClock()
        let pacer = TenantPacer(burstWindow: .milliseconds(50), clock: clock)
        #expect(!pacer.isBehind(tenant: "circl"))
        // 500/s: a burst of 25; 25 go at once, the 26th waits.
        _ = pacer.reserve(tenant: "circl", rate: 500, count: 25)
        #expect(!pacer.isBehind(tenant: "circl"))
        _ = pacer.reserve(tenant: "circl", rate: 500, count: 100)
        #expect(pacer.isBehind(tenant: "circl"))
        #expect(!pacer.isBehind(tenant: "familyportal"))
        clock.advance(by: .milliseconds(200))
        #expect(!pacer.isBehind(tenant: "circl"))
    }
}

import FCM
import Testing

@Suite struct ProjectQuotaTests {
    @Test func batchesGoWhileTheQuotaLastsAndThenWaitForIt() {
        var quota = ProjectQuota<TestInstant>(messagesPerMinute: 600)
        let start = TestInstant.seconds(100)
        // A second of the quota (10 messages) goes at once, and a batch may overdraw it.
        #expect(quota.delay(now: start) == .zero)
        quota.take(25, now: start)
        // 15 messages of debt at 10 a second: 1.5 s.
        #expect(quota.delay(now: start) == .milliseconds(1_500))
        #expect(quota.delay(now: start.advanced(by: .seconds(1))) == .milliseconds(500))
        #expect(quota.delay(now: start.advanced(by: .milliseconds(1_500))) == .zero)
        // The bucket never holds more than a second's worth.
        let later = start.advanced(by: .seconds(60))
        quota.take(11, now: later)
        #expect(quota.delay(now: later) == .milliseconds(100))
    }

    @Test func aRetryAfterPausesTheProjectForAsLongAsItAsks() {
        var quota = ProjectQuota<TestInstant>(messagesPerMinute: 600_000)
        let now = TestInstant.seconds(5)
        quota.pause(for: .seconds(30), now: now)
        quota.pause(for: .seconds(10), now: now)
        #expect(quota.delay(now: now) == .seconds(30))
        #expect(quota.delay(now: now.advanced(by: .seconds(29))) == .seconds(1))
        #expect(quota.delay(now: now.advanced(by: .seconds(30))) == .zero)
    }
}

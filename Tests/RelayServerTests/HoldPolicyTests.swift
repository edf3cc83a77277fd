import APNs
import Foundation
import RelayStore
import Testing

@testable import RelayServer

/// Which answers hold a device instead of recording it, and when a held device is tried again: plain values.
@Suite struct HoldPolicyTests {
    @Test func theRetryDelayDoublesFromOneSecondUpToAMinuteWithinItsJitter() {
        var random = SeededGenerator(seed: 39)
        let schedule = RetrySchedule.standard
        let bases: [Double] = [1, 2, 4, 8, 16, 32, 60, 60, 60]
        for (index, base) in bases.enumerated() {
            for _ in 0..<200 {
                let delay = schedule.delay(round: index + 1, using: &random).seconds
                #expect(delay >= base * 0.8 && delay <= base * 1.2, "round \(index + 1): \(delay) s")
            }
        }
        // The jitter spreads the retries of one round: not every device comes back at the same instant.
        let spread = Set((0..<50).map { _ in schedule.delay(round: 3, using: &random) })
        #expect(spread.count > 40)
        #expect(schedule.delay(round: 10_000, using: &random).seconds <= 72)
    }

    /// The hold of an engine report, as the APNs pool's adapter makes it.
    private func hold(_ report: APNsDeliveryReport) -> HoldCause? {
        APNsProviderPool.report(.success(report)).hold
    }

    /// The hold of an error a pool answered instead of a report.
    private func hold(_ error: any Error) -> HoldCause? {
        APNsProviderPool.report(.failure(error)).hold
    }

    @Test func transportFailures5xxAnd429AreHeldAsAnOutage() {
        let unreachable = APNsDeliveryReport(
            outcome: .retryLater, failure: .connectFailed("connection refused"), attempts: 0)
        #expect(hold(unreachable) == .outage(reason: "connect_failed"))
        let lost = APNsDeliveryReport(outcome: .retryLater, failure: .connectionLost, attempts: 1)
        #expect(hold(lost) == .outage(reason: "connection_lost"))
        let unavailable = APNsDeliveryReport(
            outcome: .retryLater, response: APNsResponse(status: 503, reason: .serviceUnavailable), attempts: 5)
        #expect(hold(unavailable) == .outage(reason: "ServiceUnavailable"))
        let throttled = APNsDeliveryReport(
            outcome: .retryLater, response: APNsResponse(status: 429, reason: .tooManyRequests), attempts: 5)
        #expect(hold(throttled) == .outage(reason: "TooManyRequests"))
        #expect(hold(APNsPoolError.connectFailed("refused") as any Error) == .outage(reason: "connect_failed"))
        #expect(hold(APNsPoolError.queueFull(capacity: 10) as any Error) == .outage(reason: "pool_full"))
    }

    @Test func refusedCredentialsAndTopicsAreHeldAsAConfigurationFault() {
        for reason in [APNsReason.invalidProviderToken, .badTopic, .topicDisallowed, .forbidden] {
            let report = APNsDeliveryReport(
                outcome: .configurationFault, response: APNsResponse(status: 403, reason: reason), attempts: 1)
            #expect(hold(report) == .configuration(reason: reason.rawValue))
        }
    }

    @Test func settledAnswersAreRecordedNotHeld() {
        let delivered = APNsDeliveryReport(outcome: .delivered, response: APNsResponse(status: 200), attempts: 1)
        #expect(hold(delivered) == nil)
        let dead = APNsDeliveryReport(
            outcome: .tokenDead, response: APNsResponse(status: 410, reason: .unregistered), attempts: 1)
        #expect(hold(dead) == nil)
        // A notification APNs refuses for its own content fails the same way every time: recorded rejected.
        let tooLarge = APNsDeliveryReport(
            outcome: .configurationFault, response: APNsResponse(status: 413, reason: .payloadTooLarge), attempts: 1)
        #expect(hold(tooLarge) == nil)
        let badExpiration = APNsDeliveryReport(
            outcome: .configurationFault, response: APNsResponse(status: 400, reason: .badExpirationDate),
            attempts: 1)
        #expect(hold(badExpiration) == nil)
        #expect(hold(APNsValidationError.emptyTopic as any Error) == nil)
    }
}

/// Readiness answers within its deadline whatever its dependency does.
@Suite struct FirstAnswerTests {
    @Test func aCheckThatDoesNotAnswerGivesTheLateAnswer() async {
        let answer = await answer(within: .milliseconds(50), orElse: "late") {
            try? await Task.sleep(for: .seconds(2))
            return "on time"
        }
        #expect(answer == "late")
    }

    @Test func aCheckThatAnswersGivesItsAnswer() async {
        let answer = await answer(within: .seconds(30), orElse: "late") { "on time" }
        #expect(answer == "on time")
    }
}

/// The tenant file's names for APNs' values are the engine's, one for one.
@Suite struct APNsTypesTests {
    @Test func everyPushTypeOfTheTenantFileIsTheEnginesOfTheSameNameAndBack() {
        for pushType in TenantConfiguration.PushType.allCases {
            #expect(APNsPushType(pushType).rawValue == pushType.rawValue)
        }
        #expect(
            Set(APNsPushType.allCases.map(\.rawValue)) == Set(TenantConfiguration.PushType.allCases.map(\.rawValue)))
        for level in TenantConfiguration.InterruptionLevel.allCases {
            #expect(APNsPayload.InterruptionLevel(level).rawValue == level.rawValue)
        }
        for environment in TenantConfiguration.Environment.allCases {
            #expect(APNsEnvironment(environment).rawValue == environment.rawValue)
        }
    }
}

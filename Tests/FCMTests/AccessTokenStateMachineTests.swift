import FCM
import Testing

/// A manual clock's instant: whole milliseconds since the test began.
struct TestInstant: InstantProtocol {
    var milliseconds: Int64

    func advanced(by duration: Duration) -> TestInstant {
        TestInstant(
            milliseconds: milliseconds + duration.components.seconds * 1000
                + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    func duration(to other: TestInstant) -> Duration { .milliseconds(other.milliseconds - milliseconds) }

    static func < (lhs: TestInstant, rhs: TestInstant) -> Bool { lhs.milliseconds < rhs.milliseconds }

    static func seconds(_ seconds: Int64) -> TestInstant { TestInstant(milliseconds: seconds * 1000) }
}

@Suite struct AccessTokenStateMachineTests {
    typealias Machine = AccessTokenStateMachine<TestInstant>

    @Test func oneFetchServesEveryRequestUntilTheTokenNearsItsEnd() {
        var machine = Machine()
        let answer1 = machine.tokenNeeded(now: .seconds(0))
        #expect(answer1 == .fetchAndWait)
        // Requests while the first fetch runs wait for it: no second fetch.
        let answer2 = machine.tokenNeeded(now: .seconds(0))
        #expect(answer2 == .wait)
        let answer3 = machine.fetched("ya29.a", expiresIn: .seconds(3_599), now: .seconds(1))
        #expect(answer3 == "ya29.a")
        let answer4 = machine.tokenNeeded(now: .seconds(2))
        #expect(answer4 == .use("ya29.a"))
        let answer5 = machine.tokenNeeded(now: .seconds(3_374))
        #expect(answer5 == .use("ya29.a"))
        // 225 s before it expires, the next request refreshes it and goes on with the old token meanwhile.
        let answer6 = machine.tokenNeeded(now: .seconds(3_375))
        #expect(answer6 == .useAndRefresh("ya29.a"))
        let answer7 = machine.tokenNeeded(now: .seconds(3_376))
        #expect(answer7 == .use("ya29.a"))
        let answer8 = machine.fetched("ya29.b", expiresIn: .seconds(3_599), now: .seconds(3_380))
        #expect(answer8 == "ya29.b")
        let answer9 = machine.tokenNeeded(now: .seconds(3_381))
        #expect(answer9 == .use("ya29.b"))
    }

    @Test func anExpiredTokenIsNotUsed() {
        var machine = Machine()
        _ = machine.tokenNeeded(now: .seconds(0))
        _ = machine.fetched("ya29.a", expiresIn: .seconds(60), now: .seconds(0))
        let answer10 = machine.tokenNeeded(now: .seconds(60))
        #expect(answer10 == .fetchAndWait)
        let answer11 = machine.tokenNeeded(now: .seconds(61))
        #expect(answer11 == .wait)
    }

    @Test func aRefusedTokenIsFetchedAgainOnceAndAFailedFetchIsNotRetriedAtOnce() {
        var machine = Machine()
        _ = machine.tokenNeeded(now: .seconds(0))
        _ = machine.fetched("ya29.a", expiresIn: .seconds(3_599), now: .seconds(0))
        let answer12 = machine.refused("ya29.a")
        #expect(answer12)
        let answer13 = machine.tokenNeeded(now: .seconds(1))
        #expect(answer13 == .fetchAndWait)
        let answer14 = machine.fetchFailed("invalid_grant: Invalid JWT Signature.", now: .seconds(2))
        #expect(answer14 != nil)
        // Within the retry delay, requests fail with the reason instead of hammering the token endpoint.
        let answer15 = machine.tokenNeeded(now: .seconds(2))
        #expect(answer15 == .fail("invalid_grant: Invalid JWT Signature."))
        let answer16 = machine.tokenNeeded(now: .seconds(3))
        #expect(answer16 == .fetchAndWait)
        _ = machine.fetched("ya29.b", expiresIn: .seconds(3_599), now: .seconds(3))
        // A 401 for a token already replaced drops nothing.
        let answer17 = machine.refused("ya29.a")
        #expect(answer17)
        let answer18 = machine.tokenNeeded(now: .seconds(4))
        #expect(answer18 == .use("ya29.b"))
    }

    @Test func aFailedRefreshKeepsTheTokenThatIsStillValid() {
        var machine = Machine()
        _ = machine.tokenNeeded(now: .seconds(0))
        _ = machine.fetched("ya29.a", expiresIn: .seconds(3_599), now: .seconds(0))
        let answer19 = machine.tokenNeeded(now: .seconds(3_400))
        #expect(answer19 == .useAndRefresh("ya29.a"))
        let answer20 = machine.fetchFailed("UNAVAILABLE", now: .seconds(3_401))
        #expect(answer20 == nil)
        let answer21 = machine.tokenNeeded(now: .seconds(3_402))
        #expect(answer21 == .useAndRefresh("ya29.a"))
    }
}

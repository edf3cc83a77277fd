import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore
import SwiftProtobuf
import Testing

@testable import RelayServer

/// The session's state machine on a manual clock: plain values, no channel, no service, no waiting.
@Suite struct SessionStateMachineTests {
    @Test func aConnectionWithoutAnAcceptedHelloByTheDeadlineIsToldHelloRequiredAndClosed() {
        var clock = SessionClock()
        var session = Session(configure: { $0.helloTimeout = .seconds(10) })
        let opened = session.machine.channelActive(now: clock.now)
        #expect(opened.scheduled(.hello) == clock.now + .seconds(10))

        // Another frame first: answered HELLO_REQUIRED on its own id, and the connection stays.
        clock.advance(.seconds(1))
        let early = session.receive(frame(.ping, 3, Pushrelay_V1_Ping()), at: clock.now)
        #expect(early.writes.map(\.code) == [.helloRequired])
        #expect(early.writes.map(\.requestID) == [3])
        #expect(!early.closes)

        // A timer that fires early is armed again for the deadline.
        clock.advance(.milliseconds(8_999))
        #expect(session.machine.timerFired(.hello, now: clock.now).scheduled(.hello) == clock.now + .milliseconds(1))
        clock.advance(.milliseconds(1))
        let passed = session.machine.timerFired(.hello, now: clock.now)
        #expect(passed.logs == [.helloDeadlinePassed])
        let error = ProtocolError(.helloRequired, "no HELLO within the deadline; the connection closes")
        #expect(passed.writes == [.error(error, requestID: 0, kind: nil)])
        #expect(passed.closes)
        #expect(session.machine.state == .closed)
        #expect(session.machine.isReadingPaused)
    }

    @Test func theHelloDeadlineAlsoEndsAHelloStillBeingCheckedAndItsLateOutcomeIsIgnored() {
        var clock = SessionClock()
        var session = Session(configure: { $0.helloTimeout = .seconds(10) })
        _ = session.machine.channelActive(now: clock.now)
        let hello = session.receive(helloFrame(), at: clock.now)
        #expect(hello.authenticates)
        #expect(session.machine.isReadingPaused, "nothing is read while HELLO is checked")
        clock.advance(.seconds(10))
        let passed = session.machine.timerFired(.hello, now: clock.now)
        #expect(passed.writes.map(\.code) == [.helloRequired])
        #expect(passed.closes)
        let late = session.machine.authenticated(.success(credential), now: clock.now, ledger: session.ledger)
        #expect(late.isEmpty)
        #expect(session.ledger.connections.isEmpty, "a HELLO that came too late takes no connection")
    }

    @Test func anAcceptedHelloDisarmsTheDeadlineArmsTheRightsCheckAndTheIdleTimeoutAndHandlesWhatCameMeanwhile() {
        var clock = SessionClock()
        var session = Session(configure: { $0.idleTimeout = .seconds(300) })
        _ = session.machine.channelActive(now: clock.now)
        _ = session.receive(helloFrame(), at: clock.now)
        clock.advance(.milliseconds(40))
        let accepted = session.machine.authenticated(.success(credential), now: clock.now, ledger: session.ledger)
        #expect(accepted.cancels(.hello))
        #expect(session.machine.deadline(of: .hello) == nil)
        #expect(accepted.scheduled(.rights) == clock.now + .seconds(1))
        // Idle from the HELLO frame, the last one that came.
        #expect(accepted.scheduled(.idle) == clock.now - .milliseconds(40) + .seconds(300))
        #expect(accepted.writes == [.helloOK(requestID: 1, tenant: "circl")])
        #expect(accepted.handlesBufferedFrames)
        #expect(session.machine.state == .open(credential))
        #expect(session.ledger.connections == ["circl": 1])
        // A stale firing of the disarmed deadline does nothing.
        clock.advance(.seconds(10))
        #expect(session.machine.timerFired(.hello, now: clock.now).isEmpty)
    }

    @Test func aTenantAtItsConnectionCapIsRefusedAtHelloAndClosed() {
        let clock = SessionClock()
        var session = Session()
        session.ledger.cap = 0
        _ = session.machine.channelActive(now: clock.now)
        _ = session.receive(helloFrame(), at: clock.now)
        let refused = session.machine.authenticated(.success(credential), now: clock.now, ledger: session.ledger)
        #expect(refused.writes.map(\.code) == [.tooManyConnections])
        #expect(refused.logs == [.tenantAtCap(tenant: "circl", cap: 0)])
        #expect(refused.closes)
    }

    @Test func theRightsAreCheckedEverySecondOneCheckAtATimeAndARevokedCredentialClosesTheConnection() {
        var clock = SessionClock()
        var session = Session()
        let subscription = UUID()
        session.open(at: clock.now)
        _ = session.receive(frame(.subscribeResults, 7, Pushrelay_V1_SubscribeResults()), at: clock.now)
        _ = session.machine.subscribed(requestID: 7, subscription: subscription)

        clock.advance(.seconds(1))
        let first = session.machine.timerFired(.rights, now: clock.now)
        #expect(first.checksRights == [credential])
        #expect(first.scheduled(.rights) == clock.now + .seconds(1))
        // The check is slow: the next firing starts no second one.
        clock.advance(.seconds(1))
        let second = session.machine.timerFired(.rights, now: clock.now)
        #expect(second.checksRights.isEmpty)
        #expect(second.scheduled(.rights) == clock.now + .seconds(1))
        // A database that does not answer ends nothing.
        #expect(session.machine.rightsChecked(ProtocolError(.unavailable, "the database did not answer")).isEmpty)
        #expect(session.machine.rightsChecked(nil).isEmpty)

        clock.advance(.seconds(1))
        #expect(session.machine.timerFired(.rights, now: clock.now).checksRights == [credential])
        let revoked = ProtocolError(.authenticationFailed, "the credential was revoked")
        let lost = session.machine.rightsChecked(revoked)
        #expect(lost.logs == [.rightsLost(message: "the credential was revoked")])
        #expect(lost.writes == [.error(revoked, requestID: 0, kind: nil)])
        #expect(lost.unsubscribes == [subscription])
        #expect(lost.closes)
        #expect(session.machine.state == .closed)
        clock.advance(.seconds(1))
        #expect(session.machine.timerFired(.rights, now: clock.now).isEmpty)
    }

    @Test func aPeerThatLeavesItsAnswersUnreadIsNotReadAndIsClosedAfterTheWriteStallTimeout() {
        var clock = SessionClock()
        var session = Session(configure: { $0.writeStallTimeout = .seconds(30) })
        session.open(at: clock.now)

        let stalled = session.machine.writabilityChanged(isWritable: false, now: clock.now)
        #expect(stalled.scheduled(.writeStall) == clock.now + .seconds(30))
        #expect(session.machine.isReadingPaused)
        #expect(session.machine.readRequested().isEmpty, "the read waits")
        // Still not writable: the deadline stays where it was.
        clock.advance(.seconds(5))
        #expect(session.machine.writabilityChanged(isWritable: false, now: clock.now).isEmpty)

        // The peer reads: the deadline is disarmed, and the read that waited is done once the buffered frames are.
        clock.advance(.seconds(5))
        let drained = session.machine.writabilityChanged(isWritable: true, now: clock.now)
        #expect(drained.cancels(.writeStall))
        #expect(drained.handlesBufferedFrames)
        #expect(!session.machine.isReadingPaused)
        #expect(session.machine.inboundHandled(turnEnded: false).reads)

        // It stops reading again, for good.
        let again = session.machine.writabilityChanged(isWritable: false, now: clock.now)
        #expect(again.scheduled(.writeStall) == clock.now + .seconds(30))
        clock.advance(.seconds(30))
        let closed = session.machine.timerFired(.writeStall, now: clock.now)
        #expect(closed.logs == [.writeStalled])
        #expect(closed.closes)
    }

    @Test func resultEventsWaitWhileThePeerDoesNotReadAndGoOutInOrderWhenItDoes() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        _ = session.receive(frame(.subscribeResults, 7, Pushrelay_V1_SubscribeResults()), at: clock.now)
        #expect(session.machine.subscribed(requestID: 7, subscription: UUID()).writes == [.subscribed(requestID: 7)])
        var first = Pushrelay_V1_ResultEvent()
        first.held.jobID = "j1"
        var second = Pushrelay_V1_ResultEvent()
        second.held.jobID = "j2"
        #expect(session.machine.resultEvent(first, requestID: 7).writes == [.resultEvent(requestID: 7, first)])
        _ = session.machine.writabilityChanged(isWritable: false, now: clock.now)
        #expect(session.machine.resultEvent(first, requestID: 7).isEmpty)
        #expect(session.machine.resultEvent(second, requestID: 7).isEmpty)
        #expect(session.machine.resultEvent(second, requestID: 8).isEmpty, "no such subscription")
        #expect(session.machine.subscriptions.queuedCount == 2)
        let drained = session.machine.writabilityChanged(isWritable: true, now: clock.now)
        #expect(drained.writes == [.resultEvent(requestID: 7, first), .resultEvent(requestID: 7, second)])
    }

    @Test func readingPausesAtMaxInFlightAndResumesWhenAnAnswerIsWritten() {
        let clock = SessionClock()
        var session = Session(configure: { $0.limits.maxInFlight = 2 })
        session.open(at: clock.now)
        #expect(session.receive(frame(.jobStatus, 5, Pushrelay_V1_JobStatus()), at: clock.now).startedRequests == [5])
        #expect(!session.machine.isReadingPaused)
        #expect(session.receive(frame(.jobStatus, 6, Pushrelay_V1_JobStatus()), at: clock.now).startedRequests == [6])
        #expect(session.machine.isReadingPaused)
        #expect(session.machine.readRequested().isEmpty)
        #expect(session.machine.inboundHandled(turnEnded: false).isEmpty, "the read waits while two run")

        let answered = session.machine.requestEnded(
            5, kind: .jobStatus, result: .success((FrameKind.jobStatus.answer, [1, 2])), ledger: session.ledger)
        #expect(
            answered.writes == [
                .answer(request: .jobStatus, requestID: 5, kind: FrameKind.jobStatus.answer, body: [1, 2])
            ])
        #expect(answered.handlesBufferedFrames)
        #expect(!session.machine.isReadingPaused)
        #expect(session.machine.inboundHandled(turnEnded: false).reads)
    }

    @Test func aRequestThatChangesStateStartsOnlyOnceTheOnesBeforeItTookEffect() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        #expect(session.receive(frame(.send, 5, Pushrelay_V1_Send()), at: clock.now).startedRequests == [5])
        let change = session.receive(frame(.registerDevice, 6, Pushrelay_V1_RegisterDevice()), at: clock.now)
        #expect(change.startedRequests.isEmpty)
        let read = session.receive(frame(.jobStatus, 7, Pushrelay_V1_JobStatus()), at: clock.now)
        #expect(read.startedRequests.isEmpty, "a read after a change waits for it")
        // The SEND's job is stored: the change starts, the read after it still waits.
        #expect(session.machine.requestTookEffect(5).startedRequests == [6])
        let changed = session.machine.requestEnded(
            6, kind: .registerDevice, result: .success((FrameKind.registerDevice.answer, [])), ledger: session.ledger)
        #expect(changed.startedRequests == [7])
    }

    @Test func aConnectionHoldsAtMostItsInflatedBytesAndReadsOnWhenTheyAreGivenBack() {
        let clock = SessionClock()
        var session = Session(configure: { $0.maximumInflightBytesPerConnection = 100_000 })
        session.open(at: clock.now)
        let large = header(.send, 5)
        #expect(session.machine.admit(large, bodyBytes: 80_000, now: clock.now, ledger: session.ledger).isAdmitted)
        #expect(session.receive(frame(.send, 5, Pushrelay_V1_Send()), at: clock.now).startedRequests == [5])
        #expect(session.ledger.held == 80_000)

        // The next does not fit the connection's bytes: it waits, unread.
        let next = header(.send, 6)
        #expect(session.machine.admit(next, bodyBytes: 30_000, now: clock.now, ledger: session.ledger).waits)
        #expect(session.machine.isReadingPaused)
        // The answer is written: the bytes go back, and the frame that waited is offered again.
        let answered = session.machine.requestEnded(
            5, kind: .send, result: .success((FrameKind.send.answer, [])), ledger: session.ledger)
        #expect(session.ledger.held == 0)
        #expect(answered.handlesBufferedFrames)
        #expect(!session.machine.isReadingPaused)
        #expect(session.machine.admit(next, bodyBytes: 30_000, now: clock.now, ledger: session.ledger).isAdmitted)
        #expect(session.ledger.held == 30_000)
        // A frame that did not become a request in flight (a duplicate id) gives its bytes back.
        _ = session.receive(frame(.send, 6, Pushrelay_V1_Send()), at: clock.now)
        #expect(
            session.machine.admit(header(.send, 6), bodyBytes: 10_000, now: clock.now, ledger: session.ledger)
                .isAdmitted)
        let duplicate = session.receive(frame(.send, 6, Pushrelay_V1_Send()), at: clock.now)
        #expect(duplicate.writes.map(\.code) == [.duplicateRequestID])
        #expect(session.ledger.held == 30_000)
    }

    @Test func aConnectionWaitingForTheProcessBudgetReadsOnWhenAnotherGivesBytesBack() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        session.ledger.budget = 0
        #expect(session.machine.admit(header(.send, 5), bodyBytes: 1_000, now: clock.now, ledger: session.ledger).waits)
        #expect(session.machine.isReadingPaused)
        let woken = session.machine.bytesReleased()
        #expect(woken.handlesBufferedFrames)
        #expect(!session.machine.isReadingPaused)
        #expect(session.machine.bytesReleased().isEmpty, "woken once")
    }

    @Test func aConnectionOutOfTokensIsToldOnceThenNotReadUntilTheTokensAreBack() {
        var clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        session.ledger.tokenRefusals = [250, 250]
        guard
            case .refuse(let error) = session.machine.admit(
                header(.ping, 5), bodyBytes: 2, now: clock.now, ledger: session.ledger
            ).verdict
        else {
            Issue.record("the first frame over the limit was not refused")
            return
        }
        #expect(error.code == .rateLimited && error.retryAfterMilliseconds == 250)
        let waiting = session.machine.admit(header(.ping, 6), bodyBytes: 2, now: clock.now, ledger: session.ledger)
        #expect(waiting.waits)
        #expect(waiting.actions.scheduled(.tokenWait) == clock.now + .milliseconds(250))
        #expect(session.machine.isReadingPaused)
        #expect(session.machine.readRequested().isEmpty)

        clock.advance(.milliseconds(250))
        let back = session.machine.timerFired(.tokenWait, now: clock.now)
        #expect(back.handlesBufferedFrames)
        #expect(!session.machine.isReadingPaused)
        #expect(
            session.machine.admit(header(.ping, 6), bodyBytes: 2, now: clock.now, ledger: session.ledger).isAdmitted)
        #expect(session.machine.inboundHandled(turnEnded: false).reads)
    }

    @Test func anIdleConnectionIsSaidGoodbyeAndClosedAFrameMovesTheDeadline() {
        var clock = SessionClock()
        var session = Session(configure: { $0.idleTimeout = .seconds(300) })
        session.open(at: clock.now)
        clock.advance(.seconds(100))
        #expect(session.receive(frame(.ping, 2, Pushrelay_V1_Ping()), at: clock.now).writes.map(\.requestID) == [2])
        clock.advance(.seconds(200))
        let moved = session.machine.timerFired(.idle, now: clock.now)
        #expect(moved.scheduled(.idle) == clock.now + .seconds(100))
        clock.advance(.seconds(100))
        let idle = session.machine.timerFired(.idle, now: clock.now)
        #expect(idle.logs == [.idleTimeout])
        #expect(idle.writes == [.goodbye(reason: "idle timeout")])
        #expect(idle.closes)
    }

    @Test func afterGoodbyeFramesAreAnsweredShuttingDownAndTheConnectionClosesOnceTheLastAnswerIsWritten() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        #expect(session.receive(frame(.jobStatus, 5, Pushrelay_V1_JobStatus()), at: clock.now).startedRequests == [5])
        let goodbye = session.receive(frame(.goodbye, 6, Pushrelay_V1_Goodbye()), at: clock.now)
        #expect(goodbye.counts == [.goodbye])
        #expect(!goodbye.closes)
        let after = session.receive(frame(.ping, 7, Pushrelay_V1_Ping()), at: clock.now)
        #expect(after.writes.map(\.code) == [.shuttingDown])
        #expect(!session.machine.inboundHandled(turnEnded: false).closes, "a request is in flight")
        let last = session.machine.requestEnded(
            5, kind: .jobStatus, result: .success((FrameKind.jobStatus.answer, [])), ledger: session.ledger)
        #expect(last.writes.count == 1)
        #expect(last.closes)
    }

    @Test func aHalfClosedPeerGetsItsAnswersThenTheConnectionCloses() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        #expect(session.receive(frame(.jobStatus, 5, Pushrelay_V1_JobStatus()), at: clock.now).startedRequests == [5])
        #expect(session.machine.inputClosed().handlesBufferedFrames)
        #expect(!session.machine.inboundHandled(turnEnded: false).closes)
        let answered = session.machine.requestEnded(
            5, kind: .jobStatus, result: .success((FrameKind.jobStatus.answer, [])), ledger: session.ledger)
        #expect(answered.writes.count == 1 && answered.handlesBufferedFrames)
        #expect(session.machine.inboundHandled(turnEnded: false).closes)
    }

    @Test func theRelaysShutdownSaysGoodbyeAndClosesOnceInFlightRequestsAreAnswered() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        _ = session.receive(frame(.jobStatus, 5, Pushrelay_V1_JobStatus()), at: clock.now)
        let shutdown = session.machine.shutdownRequested()
        #expect(shutdown.writes == [.goodbye(reason: "the relay is shutting down")])
        #expect(!shutdown.closes)
        let answered = session.machine.requestEnded(
            5, kind: .jobStatus, result: .failure(ProtocolError(.unavailable, "no database")), ledger: session.ledger)
        #expect(answered.writes.map(\.code) == [.unavailable])
        #expect(answered.closes)
        // An answer that comes after the close is counted, not written.
        let late = session.machine.requestEnded(
            9, kind: .jobStatus, result: .success((FrameKind.jobStatus.answer, [])), ledger: session.ledger)
        #expect(late.writes.isEmpty && late.counts == [.jobStatus])
    }

    @Test func aRequestThatFindsItsRightsLostClosesTheConnectionAfterItsAnswer() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        _ = session.receive(frame(.jobStatus, 5, Pushrelay_V1_JobStatus()), at: clock.now)
        let disabled = ProtocolError(.authenticationFailed, "tenant 'circl' is disabled")
        let answered = session.machine.requestEnded(
            5, kind: .jobStatus, result: .failure(disabled), ledger: session.ledger)
        #expect(answered.writes == [.error(disabled, requestID: 5, kind: .jobStatus)])
        #expect(answered.logs == [.rightsLost(message: "tenant 'circl' is disabled")])
        #expect(answered.closes)
        #expect(!answered.handlesBufferedFrames)
        #expect(
            session.machine.channelInactive(ledger: session.ledger).contains {
                if case .stopTimers = $0 { true } else { false }
            })
        #expect(session.ledger.connections.isEmpty, "the tenant's connection is given back")
    }

    @Test func manyFramesGoOnInALaterTurn() {
        let clock = SessionClock()
        var session = Session()
        session.open(at: clock.now)
        let ended = session.machine.inboundHandled(turnEnded: true)
        #expect(ended.continuesInNextTurn)
        #expect(session.machine.inboundHandled(turnEnded: true).isEmpty, "one later turn at a time")
        #expect(session.machine.nextTurnBegan().handlesBufferedFrames)
    }
}

// MARK: Fixtures

/// A monotonic clock that only moves when a test moves it: the state machine takes its time as an argument.
private struct SessionClock {
    private(set) var now = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    mutating func advance(_ amount: TimeAmount) {
        now = now + amount
    }
}

/// The budgets a session draws on, as the test sets them: the process's bytes, scripted token refusals, the
/// tenants' connections.
private final class FakeLedger: SessionLedger {
    /// Bytes the process may hold.
    var budget = Int.max
    /// Bytes held.
    var held = 0
    /// The retry-afters of the next refusals of tokens, in order; tokens are taken once it is empty.
    var tokenRefusals: [UInt32] = []
    /// Each tenant's connections.
    var connections: [String: Int] = [:]
    /// The connections a tenant may hold.
    var cap = 4

    func takeBodyBytes(_ bytes: Int, connectionHeld: Int) -> Bool {
        guard held + bytes <= budget else { return false }
        held += bytes
        return true
    }

    func releaseBodyBytes(_ bytes: Int) {
        held -= bytes
    }

    func admitTokens(_ cost: Int, key: String) -> UInt32? {
        tokenRefusals.isEmpty ? nil : tokenRefusals.removeFirst()
    }

    func admitConnection(of tenant: String) -> Bool {
        guard connections[tenant, default: 0] < cap else { return false }
        connections[tenant, default: 0] += 1
        return true
    }

    func releaseConnection(of tenant: String) {
        connections[tenant, default: 0] -= 1
        if connections[tenant] == 0 { connections[tenant] = nil }
    }

    var connectionsPerTenant: Int { cap }
}

/// A state machine and its ledger.
private struct Session {
    var machine: SessionStateMachine
    let ledger = FakeLedger()

    init(configure: (inout RelayListenerConfiguration) -> Void = { _ in }) {
        var configuration = RelayListenerConfiguration(port: 0)
        configure(&configuration)
        machine = SessionStateMachine(configuration: .init(configuration))
    }

    /// Frame `frame` came whole at `now`: admitted (before HELLO, or holding no body), then parsed.
    mutating func receive(_ frame: Frame, at now: NIODeadline) -> [SessionAction] {
        machine.frameParsed(.frame(frame), now: now, unixMilliseconds: 1_700_000_000_000, ledger: ledger)
    }

    /// Connects and has HELLO accepted for ``credential`` at `now`.
    mutating func open(at now: NIODeadline) {
        _ = machine.channelActive(now: now)
        _ = receive(helloFrame(), at: now)
        _ = machine.authenticated(.success(credential), now: now, ledger: ledger)
    }
}

/// The credential the test HELLOs are accepted for.
private let credential = VerifiedCredential(tenantID: "circl", id: "credential-1")

/// A frame of `kind` and request id `id` with `message` as its body.
private func frame(_ kind: FrameKind, _ id: UInt32, _ message: some SwiftProtobuf.Message) -> Frame {
    let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
    return Frame(kind: kind, requestID: id, body: ByteBuffer(bytes: bytes))
}

/// A HELLO of circl, request id 1.
private func helloFrame(credential: String = "prk_test") -> Frame {
    var hello = Pushrelay_V1_Hello()
    (hello.minVersion, hello.maxVersion) = (1, 1)
    hello.tenant = "circl"
    hello.credential = credential
    return frame(.hello, 1, hello)
}

/// The header of a frame of `kind` and request id `id`, as the parser asks about it.
private func header(_ kind: FrameKind, _ id: UInt32) -> FrameHeader {
    FrameHeader(length: 0, version: ProtocolLimits.currentVersion, flags: [], kind: kind, requestID: id)
}

extension SessionStateMachine.Admission {
    var isAdmitted: Bool {
        if case .admit = verdict { true } else { false }
    }

    var waits: Bool {
        if case .wait = verdict { true } else { false }
    }
}

extension SessionOutput {
    /// The error code of an ERROR, else `nil`.
    var code: Pushrelay_V1_ErrorCode? {
        if case .error(let error, _, _) = self { error.code } else { nil }
    }

    /// The request id the frame carries.
    var requestID: UInt32 {
        switch self {
        case .error(_, let id, _), .helloOK(let id, _), .pong(let id, _), .subscribed(let id), .unsubscribed(let id),
            .answer(_, let id, _, _), .resultEvent(let id, _):
            id
        case .goodbye:
            0
        }
    }
}

extension [SessionAction] {
    /// The frames written, in order.
    var writes: [SessionOutput] {
        compactMap { if case .write(let output) = $0 { output } else { nil } }
    }

    /// The requests counted as answered without a frame, by kind.
    var counts: [FrameKind?] {
        compactMap { if case .count(let kind, _, _) = $0 { kind } else { nil } }
    }

    /// The lines logged, in order.
    var logs: [SessionNote] {
        compactMap { if case .log(let note) = $0 { note } else { nil } }
    }

    /// Where `timer` is armed, when it is.
    func scheduled(_ timer: SessionTimer) -> NIODeadline? {
        for case .scheduleTimer(timer, let deadline) in self { return deadline }
        return nil
    }

    /// Whether `timer` is disarmed.
    func cancels(_ timer: SessionTimer) -> Bool {
        contains { if case .cancelTimer(timer) = $0 { true } else { false } }
    }

    /// The credentials whose rights are checked.
    var checksRights: [VerifiedCredential] {
        compactMap { if case .checkRights(let credential) = $0 { credential } else { nil } }
    }

    /// The requests started, by request id.
    var startedRequests: [UInt32] {
        compactMap { if case .startRequest(let frame, _) = $0 { frame.requestID } else { nil } }
    }

    /// The subscriptions ended.
    var unsubscribes: [UUID] {
        compactMap { if case .unsubscribe(let id) = $0 { id } else { nil } }
    }

    var authenticates: Bool { contains { if case .authenticate = $0 { true } else { false } } }
    var closes: Bool { contains { if case .close = $0 { true } else { false } } }
    var reads: Bool { contains { if case .read = $0 { true } else { false } } }
    var handlesBufferedFrames: Bool { contains { if case .handleBufferedFrames = $0 { true } else { false } } }
    var continuesInNextTurn: Bool { contains { if case .continueInNextTurn = $0 { true } else { false } } }
}

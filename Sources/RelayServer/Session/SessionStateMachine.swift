import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

/// One backend connection's session, as a value: HELLO first and within a deadline, then pipelined requests
/// answered by request id in any order, at most `max_in_flight` at once, an idle timeout, the rights re-checked
/// every ``ConnectionBounds/rightsCheckInterval``, the results stream, and graceful close.
///
/// It takes the connection's events (the channel's life, each frame parsed, the answers of the tasks it started,
/// the channel's writability, each timer that fires) with the time passed in, and answers each with the
/// ``SessionAction``s that follow, which its channel handler (``RelaySessionHandler``) carries out. It reads no
/// clock and touches no channel, so its deadlines run on a test clock as on the event loop's. The only outside
/// state it reaches is a ``SessionLedger`` passed in: the budgets every connection shares.
///
/// Memory per connection is bounded whatever the peer does (``isReadingPaused``): the socket is not read while
/// `max_in_flight` requests run, while their bodies hold the connection's inflated bytes (or the process's are
/// taken), while the connection waits for its credential's tokens, or while the answers already written wait for
/// a peer that does not read them (the channel is not writable: more than
/// ``ConnectionBounds/outboundHighWaterMark`` bytes queued), and a connection whose answers wait longer than the
/// write-stall timeout is closed. A revoked credential or a disabled tenant ends the connection.
struct SessionStateMachine {
    /// The settings a session keeps.
    struct Configuration {
        /// The limits frames are held to once HELLO is accepted.
        var limits: ProtocolLimits
        /// How long after connecting HELLO must be accepted.
        var helloTimeout: TimeAmount
        /// How long an authenticated connection may go without a frame; `nil`: for ever.
        var idleTimeout: TimeAmount?
        /// How long the peer may leave its answers unread (the channel not writable) before it is closed.
        var writeStallTimeout: TimeAmount
        /// How often an authenticated connection's rights are checked again.
        var rightsCheckInterval: TimeAmount
        /// The inflated request bodies one connection's requests in flight may hold.
        var maximumInflightBytesPerConnection: Int

        /// The settings of a listener's `server` configuration.
        init(_ server: RelayListenerConfiguration) {
            limits = server.limits
            helloTimeout = TimeAmount(server.helloTimeout)
            idleTimeout = server.idleTimeout.map { TimeAmount($0) }
            writeStallTimeout = TimeAmount(server.writeStallTimeout)
            rightsCheckInterval = TimeAmount(ConnectionBounds.rightsCheckInterval)
            maximumInflightBytesPerConnection = server.maximumInflightBytesPerConnection
        }
    }

    /// What the parser's question about a frame gets: the answer, and what follows it (the timer of a wait for
    /// tokens).
    struct Admission {
        /// Whether the frame is taken, refused, or waits.
        var verdict: FrameAdmission
        /// What to carry out whatever the parser does next.
        var actions: [SessionAction] = []
    }

    /// The session's settings.
    let configuration: Configuration
    /// Where the session is in its life.
    var state = State.awaitingHello
    /// What holds the socket unread.
    var reading = Reading()
    /// The requests in flight.
    var requests = SessionRequests()
    /// The results-stream subscriptions.
    var subscriptions = SessionSubscriptions()
    /// The armed timers' deadlines.
    var deadlines: [SessionTimer: NIODeadline] = [:]
    /// When the last frame came (refused and unreadable frames do not count).
    var lastActivity = NIODeadline.uptimeNanoseconds(0)
    /// A check of the rights runs: the next one is not started before it ends.
    var checkingRights = false
    /// Bytes taken for the frame being handled, until it becomes a request in flight (or they are given back).
    var admittedBytes = 0
    /// The credential's key in the request limit: its tenant and id, never the secret.
    var limiterKey = ""
    /// The tenant whose connection this is once its HELLO was admitted (given back when it closes).
    var admittedTenant: String?

    /// A session that has not connected yet.
    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// When `timer` is due; `nil` when it is not armed.
    func deadline(of timer: SessionTimer) -> NIODeadline? {
        deadlines[timer]
    }

    // MARK: The channel's life

    /// The connection opened at `now`: HELLO must be accepted by the HELLO deadline.
    mutating func channelActive(now: NIODeadline) -> [SessionAction] {
        lastActivity = now
        return [arm(.hello, at: now + configuration.helloTimeout)]
    }

    /// The channel closed, on either side: the tenant's connection is given back, the subscriptions end, and the
    /// timers stop.
    mutating func channelInactive(ledger: some SessionLedger) -> [SessionAction] {
        state = .closed
        if let tenant = admittedTenant {
            ledger.releaseConnection(of: tenant)
            admittedTenant = nil
        }
        return stop()
    }

    /// The handler left the pipeline: the subscriptions end and the timers stop.
    mutating func handlerRemoved() -> [SessionAction] {
        stop()
    }

    /// The relay shuts down: GOODBYE and nothing new taken; the connection closes once in-flight requests are
    /// answered (at once before HELLO is accepted).
    mutating func shutdownRequested() -> [SessionAction] {
        beginClose(reason: "the relay is shutting down", closesNow: true)
    }

    /// The peer shut down its sending side (a half-close): what it sent is handled and answered, then the
    /// connection closes.
    mutating func inputClosed() -> [SessionAction] {
        reading.peerClosedInput = true
        return [.handleBufferedFrames]
    }

    /// The channel failed: it closes.
    mutating func errorCaught() -> [SessionAction] {
        close()
    }

    // MARK: Reading, with back-pressure

    /// Whether the socket is not read now, nor the frames already buffered handled: while HELLO is checked; while
    /// `max_in_flight` requests run; while the next frame waits for inflated bytes or for tokens; while the channel
    /// is not writable. While closing, frames are still read and each answered `SHUTTING_DOWN` (an unread frame
    /// would make the close a reset, which can lose answers on their way), as long as the peer reads its answers.
    var isReadingPaused: Bool {
        switch state {
        case .authenticating, .closed:
            true
        case .closing:
            reading.waitingForTokens || !reading.writable
        case .awaitingHello, .open:
            requests.count >= configuration.limits.maxInFlight || reading.waitingForBytes
                || reading.waitingForTokens || !reading.writable
        }
    }

    /// The pipeline asks for a read: `.read` now, or nothing while reading is paused (the read is done once it
    /// goes on).
    mutating func readRequested() -> [SessionAction] {
        guard isReadingPaused else { return [.read] }
        reading.pendingRead = true
        return []
    }

    /// The handler handled the buffered frames it could; `turnEnded` when it stopped at
    /// ``ConnectionBounds/framesPerTurn`` with frames left, which are handled in a later event-loop turn, after
    /// the loop's other connections had theirs. Closes a closing connection with nothing in flight, and a
    /// half-closed one whose frames are all answered; else reads on when a read waits and reading may go on.
    mutating func inboundHandled(turnEnded: Bool) -> [SessionAction] {
        if turnEnded {
            guard !reading.nextTurnScheduled else { return [] }
            reading.nextTurnScheduled = true
            return [.continueInNextTurn]
        }
        if case .closing = state, requests.isEmpty {
            // A GOODBYE among the frames just handled: the frames after it were answered SHUTTING_DOWN.
            return close()
        }
        var actions: [SessionAction] = []
        if !reading.nextTurnScheduled, !isReadingPaused, reading.pendingRead {
            reading.pendingRead = false
            actions.append(.read)
        }
        if reading.peerClosedInput, state != .closed, requests.isEmpty, !reading.nextTurnScheduled,
            !reading.waitingForBytes, !reading.waitingForTokens
        {
            actions += close()
        }
        return actions
    }

    /// The later event-loop turn asked by `.continueInNextTurn` has come.
    mutating func nextTurnBegan() -> [SessionAction] {
        reading.nextTurnScheduled = false
        return state == .closed ? [] : [.handleBufferedFrames]
    }

    /// The channel became writable or not at `now`. Not writable: the write-stall deadline is armed, and reading
    /// pauses. Writable again: the deadline is disarmed, the result events kept meanwhile are written, and the
    /// buffered frames are handled on.
    mutating func writabilityChanged(isWritable: Bool, now: NIODeadline) -> [SessionAction] {
        reading.writable = isWritable
        guard isWritable else {
            guard deadlines[.writeStall] == nil, state != .closed else { return [] }
            return [arm(.writeStall, at: now + configuration.writeStallTimeout)]
        }
        var actions: [SessionAction] = []
        if let cancel = disarm(.writeStall) { actions.append(cancel) }
        let (events, dropped) = subscriptions.takeQueued()
        actions += events.map { .write($0) }
        if dropped > 0 { actions.append(.log(.eventsDropped(count: dropped))) }
        if state != .closed { actions.append(.handleBufferedFrames) }
        return actions
    }

    // MARK: Timers

    /// `timer` fired at `now`. One fired before its deadline is armed again for it; one disarmed since does
    /// nothing.
    mutating func timerFired(_ timer: SessionTimer, now: NIODeadline) -> [SessionAction] {
        guard let deadline = deadlines[timer] else { return [] }
        guard now >= deadline else { return [.scheduleTimer(timer, at: deadline)] }
        deadlines[timer] = nil
        switch timer {
        case .hello:
            return helloDeadlinePassed()
        case .idle:
            return idleDeadlinePassed(now: now)
        case .rights:
            return rightsCheckDue(now: now)
        case .writeStall:
            return [.log(.writeStalled)] + close()
        case .tokenWait:
            reading.waitingForTokens = false
            reading.resumedFromTokenWait = true
            return state == .closed ? [] : [.handleBufferedFrames]
        }
    }

    /// No HELLO accepted in time: `HELLO_REQUIRED` on request id 0, and the connection closes.
    mutating func helloDeadlinePassed() -> [SessionAction] {
        switch state {
        case .awaitingHello, .authenticating:
            let error = ProtocolError(.helloRequired, "no HELLO within the deadline; the connection closes")
            return [.log(.helloDeadlinePassed), .write(.error(error, requestID: 0, kind: nil))] + close()
        case .open, .closing, .closed:
            return []
        }
    }

    /// GOODBYE and close when no frame came for the idle timeout; else the deadline moves to the idle timeout after
    /// the last frame.
    mutating func idleDeadlinePassed(now: NIODeadline) -> [SessionAction] {
        guard case .open = state, let timeout = configuration.idleTimeout else { return [] }
        let due = lastActivity + timeout
        guard now >= due else { return [arm(.idle, at: due)] }
        return [.log(.idleTimeout)] + beginClose(reason: "idle timeout", closesNow: true)
    }

    /// Checks the rights again (unless the last check is still running), and arms the next check.
    mutating func rightsCheckDue(now: NIODeadline) -> [SessionAction] {
        guard case .open(let credential) = state else { return [] }
        var actions = [arm(.rights, at: now + configuration.rightsCheckInterval)]
        if !checkingRights {
            checkingRights = true
            actions.append(.checkRights(credential))
        }
        return actions
    }

    /// The rights check ended with `error` (`nil`: the rights stand). Only a lost right ends the connection, with
    /// the error on request id 0; a database that does not answer does not.
    mutating func rightsChecked(_ error: ProtocolError?) -> [SessionAction] {
        checkingRights = false
        guard let error, error.code == .authenticationFailed, state != .closed else { return [] }
        return [.log(.rightsLost(message: error.message)), .write(.error(error, requestID: 0, kind: nil))] + close()
    }

    /// Arms `timer` for `deadline`.
    mutating func arm(_ timer: SessionTimer, at deadline: NIODeadline) -> SessionAction {
        deadlines[timer] = deadline
        return .scheduleTimer(timer, at: deadline)
    }

    /// Disarms `timer`; `nil` when it was not armed.
    mutating func disarm(_ timer: SessionTimer) -> SessionAction? {
        deadlines.removeValue(forKey: timer).map { _ in .cancelTimer(timer) }
    }

    // MARK: HELLO

    /// Takes the HELLO `frame`: `.authenticate` its credential, nothing read meanwhile; a HELLO that cannot be
    /// read is answered with its error, one of a version this relay does not speak closes the connection.
    mutating func hello(_ frame: Frame, unixMilliseconds: Int64) -> [SessionAction] {
        let hello: Pushrelay_V1_Hello
        do throws(ProtocolError) {
            hello = try frame.request(limits: configuration.limits, nowMilliseconds: unixMilliseconds)
        } catch {
            return [.write(.error(error, requestID: frame.requestID, kind: .hello))]
        }
        let version = UInt32(ProtocolLimits.currentVersion)
        guard hello.minVersion <= version, version <= hello.maxVersion else {
            let error = ProtocolError(
                .unsupportedVersion,
                "the client speaks versions \(hello.minVersion)-\(hello.maxVersion); this relay speaks \(version)")
            return [.write(.error(error, requestID: frame.requestID, kind: .hello))] + close()
        }
        state = .authenticating(requestID: frame.requestID, hello: hello)
        return [.authenticate(hello)]
    }

    /// The HELLO's credential was checked at `now`. Accepted: the tenant's connection is taken (refused
    /// `TOO_MANY_CONNECTIONS` at its cap), HELLO_OK is written, the HELLO deadline is disarmed, the rights check
    /// and idle deadline armed, and the frames that came meanwhile are handled. Refused: its error, and the
    /// connection closes.
    mutating func authenticated(
        _ result: Result<VerifiedCredential, ProtocolError>,
        now: NIODeadline,
        ledger: some SessionLedger
    ) -> [SessionAction] {
        guard case .authenticating(let requestID, let hello) = state else { return [] }
        switch result {
        case .success(let credential):
            let tenant = credential.tenantID
            guard ledger.admitConnection(of: tenant) else {
                let cap = ledger.connectionsPerTenant
                let error = ProtocolError(
                    .tooManyConnections,
                    "\(tenant) holds its \(cap) connections to this relay; close one or try another relay",
                    retryAfterMilliseconds: 1_000)
                return [
                    .log(.tenantAtCap(tenant: tenant, cap: cap)),
                    .write(.error(error, requestID: requestID, kind: .hello)),
                ]
                    + close()
            }
            admittedTenant = tenant
            state = .open(credential)
            limiterKey = tenant + "/" + credential.id
            var actions: [SessionAction] = []
            if let cancel = disarm(.hello) { actions.append(cancel) }
            actions.append(.open(tenant: tenant, acceptsZstd: hello.acceptZstd))
            actions.append(arm(.rights, at: now + configuration.rightsCheckInterval))
            if let idle = configuration.idleTimeout { actions.append(arm(.idle, at: lastActivity + idle)) }
            actions.append(.write(.helloOK(requestID: requestID, tenant: tenant)))
            actions.append(.log(.authenticated(clientName: hello.clientName, requestID: requestID)))
            actions.append(.handleBufferedFrames)
            return actions
        case .failure(let error):
            // The claimed tenant is logged only when it is a valid id holding no secret (a backend that swapped
            // its tenant and its secret), and so of bounded size.
            let claimed =
                hello.tenant.contains(RelayStore.credentialSecretPrefix)
                ? "(a secret)"
                : ((try? FieldChecker("hello").id(hello.tenant, "tenant")) != nil ? hello.tenant : "(invalid)")
            var actions: [SessionAction] = [.log(.authenticationFailed(claimedTenant: claimed, requestID: requestID))]
            // Each failure is logged at debug; the failures per address are summed up (ConnectionAdmission).
            if error.code == .authenticationFailed { actions.append(.noteFailedHello) }
            actions.append(.write(.error(error, requestID: requestID, kind: .hello)))
            return actions + close()
        }
    }

    // MARK: Frames

    /// The parser's question about a whole frame whose body has `bodyBytes` once decompressed, asked at `now`
    /// before it is decompressed. Before HELLO there is nothing to charge: the frame is within
    /// ``ConnectionBounds/helloFrameBytes``. After it, every frame pays ``RequestCost/frameTokens(bodyBytes:)``
    /// and, for a write, ``RequestCost/writeTokens(of:)`` against the credential's request limit (`RATE_LIMITED` when they are not there; a connection told so that
    /// sends on waits for them, unread), and a request that will run in flight first takes its bytes from the
    /// connection's `max_inflight_bytes_per_connection` and from the process's budget; when they do not fit, the
    /// frame waits and the socket is not read until answers give bytes back.
    mutating func admit(
        _ header: FrameHeader,
        bodyBytes: Int,
        now: NIODeadline,
        ledger: some SessionLedger
    ) -> Admission {
        guard case .open = state else { return Admission(verdict: .admit) }
        let holds = header.requestID != 0 && FrameKind.requests.contains(header.kind)
        if holds {
            // One request is always taken, however large: the budget may be below max_decompressed_bytes.
            let held = requests.heldBytes
            let fits = held == 0 || held + bodyBytes <= configuration.maximumInflightBytesPerConnection
            guard fits, ledger.takeBodyBytes(bodyBytes, connectionHeld: held) else {
                reading.waitingForBytes = true
                return Admission(verdict: .wait)
            }
        }
        let tokens = RequestCost.frameTokens(bodyBytes: bodyBytes) + RequestCost.writeTokens(of: header.kind)
        if let retryAfter = ledger.admitTokens(tokens, key: limiterKey) {
            if holds { ledger.releaseBodyBytes(bodyBytes) }
            if reading.toldRateLimited {
                return Admission(verdict: .wait, actions: waitForTokens(retryAfter: retryAfter, now: now))
            }
            reading.toldRateLimited = true
            let error = ProtocolError(
                .rateLimited, "this credential's request limit is reached (the frame costs \(tokens) tokens)",
                retryAfterMilliseconds: retryAfter)
            return Admission(verdict: .refuse(error))
        }
        // A frame taken at once ends the episode: the next refusal is told again.
        if !reading.resumedFromTokenWait { reading.toldRateLimited = false }
        reading.resumedFromTokenWait = false
        if holds { admittedBytes = bodyBytes }
        return Admission(verdict: .admit)
    }

    /// A frame the parser gave at `now` (`unixMilliseconds` by the wall clock, for the rules relative to it): a
    /// frame is handled by the session's state; a refused one answered with its error (and charged its token); an
    /// unreadable one answered on request id 0, and the connection closes.
    mutating func frameParsed(
        _ parsed: ParsedFrame,
        now: NIODeadline,
        unixMilliseconds: Int64,
        ledger: some SessionLedger
    ) -> [SessionAction] {
        let actions: [SessionAction]
        switch parsed {
        case .fatal(let requestID, let error):
            // About the connection, which closes: request id 0.
            actions =
                [.log(.unreadableFrame(requestID: requestID, error)), .write(.error(error, requestID: 0, kind: nil))]
                + close()
        case .refused(let requestID, let kind, let error):
            actions =
                [.write(.error(error, requestID: requestID, kind: kind))] + chargeRefusal(now: now, ledger: ledger)
        case .frame(let frame):
            lastActivity = now
            actions = handle(frame, unixMilliseconds: unixMilliseconds, ledger: ledger)
        }
        // Bytes admitted for a frame that did not become a request in flight (refused, a duplicate id) go back.
        if admittedBytes > 0 {
            ledger.releaseBodyBytes(admittedBytes)
            admittedBytes = 0
        }
        return actions
    }

    /// Handles a well-formed frame as the session's state says: a HELLO first, requests once open, `SHUTTING_DOWN`
    /// once closing.
    mutating func handle(
        _ frame: Frame,
        unixMilliseconds: Int64,
        ledger: some SessionLedger
    ) -> [SessionAction] {
        switch state {
        case .awaitingHello:
            guard frame.kind == .hello else {
                let error = ProtocolError(.helloRequired, "send HELLO first; kind \(frame.kind) came before it")
                return [.write(.error(error, requestID: frame.requestID, kind: frame.kind))]
            }
            return hello(frame, unixMilliseconds: unixMilliseconds)
        case .open(let caller):
            return request(frame, caller: caller, unixMilliseconds: unixMilliseconds, ledger: ledger)
        case .closing:
            let error = ProtocolError(.shuttingDown, "the connection is closing")
            return [.write(.error(error, requestID: frame.requestID, kind: frame.kind))]
        case .authenticating, .closed:
            return []
        }
    }

    /// Charges a frame the parser refused (a bad version or flags, a body beyond its ratio) its one token, so that a
    /// flood of refused frames is throttled as any other: past the limit, the connection is not read until the wait.
    mutating func chargeRefusal(now: NIODeadline, ledger: some SessionLedger) -> [SessionAction] {
        guard case .open = state, let retryAfter = ledger.admitTokens(1, key: limiterKey) else { return [] }
        // Each refused frame was answered its own error; past the limit the connection is just not read for a while.
        reading.toldRateLimited = true
        return waitForTokens(retryAfter: retryAfter, now: now)
    }

    /// Stops reading the connection for `retryAfter` milliseconds, the wait for the tokens of the frame it holds: it
    /// was answered `RATE_LIMITED` and kept sending. A connection is told once per episode; what it sends meanwhile
    /// stays unread (TCP back-pressure) and is taken, in order, as the tokens come back.
    mutating func waitForTokens(retryAfter: UInt32, now: NIODeadline) -> [SessionAction] {
        guard !reading.waitingForTokens else { return [] }
        reading.waitingForTokens = true
        return [arm(.tokenWait, at: now + .milliseconds(Int64(max(retryAfter, 1))))]
    }

    /// Another connection gave inflated bytes back: a connection that waited for them reads on.
    mutating func bytesReleased() -> [SessionAction] {
        guard reading.waitingForBytes, state != .closed else { return [] }
        reading.waitingForBytes = false
        return [.handleBufferedFrames]
    }

    // MARK: Closing

    /// GOODBYE (with `reason`, when the relay closes) and no new requests; the connection closes once in-flight
    /// requests are answered: at once when `closesNow` and none is, else when the frames being handled have
    /// been (``inboundHandled(turnEnded:)``) or the last answer is written.
    mutating func beginClose(reason: String?, closesNow: Bool) -> [SessionAction] {
        switch state {
        case .closed, .closing:
            return []
        case .awaitingHello, .authenticating:
            return close()
        case .open(let credential):
            var actions: [SessionAction] = []
            if let reason { actions.append(.write(.goodbye(reason: reason))) }
            state = .closing(credential)
            if closesNow, requests.isEmpty { actions += close() }
            return actions
        }
    }

    /// Closes the connection (after the answers written so far): the subscriptions end, the timers stop.
    mutating func close() -> [SessionAction] {
        guard state != .closed else { return [] }
        state = .closed
        return stop() + [.close]
    }

    /// Ends the subscriptions and disarms the timers.
    mutating func stop() -> [SessionAction] {
        deadlines = [:]
        return subscriptions.removeAll().map { .unsubscribe($0) } + [.stopTimers]
    }
}

import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import SwiftProtobuf

/// Sent through a connection's pipeline to close it gracefully: GOODBYE, answer what is in flight, close.
struct RelayShutdownEvent: Sendable {}

/// One backend connection: the channel's I/O around a ``SessionStateMachine``, which decides everything else.
///
/// The handler cuts the bytes read into frames (``FrameParser``, held to ``ConnectionBounds/helloFrameBytes``
/// until HELLO is accepted), and feeds them, the channel's events, the answers of the tasks it runs and the timers
/// it arms to the state machine with the event loop's time. It carries out the ``SessionAction``s the machine
/// answers: it encodes and writes frames (flushed once per batch of frames handled, or per event), arms and
/// disarms timers, runs HELLO checks, rights checks and requests as tasks of its ``SessionService``, subscribes to
/// the results stream, reads the socket, and closes. At most ``ConnectionBounds/framesPerTurn`` frames are handled
/// in one event-loop turn: a connection that sent many small frames goes on in a later turn, after the loop's
/// other connections had theirs.
///
/// All state lives on the channel's event loop; tasks come back to it.
final class RelaySessionHandler: ChannelDuplexHandler {
    /// The bytes read from the socket.
    typealias InboundIn = ByteBuffer
    /// Writes from handlers after this one (none in the relay's pipeline).
    typealias OutboundIn = ByteBuffer
    /// The frames written.
    typealias OutboundOut = ByteBuffer

    private let service: any SessionService
    private let configuration: RelayListenerConfiguration
    /// The tenants' connection caps and the failed HELLOs per peer address.
    private let admission: ConnectionAdmission
    /// The budgets shared by all connections, as the machine draws on them.
    private var ledger: ProcessLedger
    private var logger: Logger
    private var machine: SessionStateMachine
    private var parser: FrameParser
    private var encoder = FrameEncoder()
    /// Bytes read and not yet cut into frames.
    private var inbound: ByteBuffer?
    /// The armed timers, each the machine's (``SessionStateMachine/deadline(of:)``).
    private var timers: [SessionTimer: Scheduled<Void>] = [:]
    /// While buffered frames are handled, answers are written and flushed once at the end.
    private var batchingWrites = false
    private var unflushedWrites = false
    /// The peer's address as its HELLO was checked: its failures are counted against it.
    private var peerAddress = "unknown"

    /// A session of `service` with the listener's `configuration`, its connection caps and failed HELLOs in
    /// `admission`, its requests' inflated bodies in the process's `bodies`; `connectionID` names it in logs.
    init(
        service: any SessionService, configuration: RelayListenerConfiguration, admission: ConnectionAdmission,
        bodies: InflatedBytesBudget, connectionID: String, logger: Logger
    ) {
        self.service = service
        self.configuration = configuration
        self.admission = admission
        self.ledger = ProcessLedger(bodies: bodies, requests: service.requests, admission: admission, wake: {})
        self.machine = SessionStateMachine(configuration: .init(configuration))
        // Until HELLO is answered, frames are held to the few KiB a HELLO needs.
        var helloLimits = configuration.limits
        helloLimits.maxFrameBytes = min(helloLimits.maxFrameBytes, ConnectionBounds.helloFrameBytes)
        helloLimits.maxDecompressedBytes = min(helloLimits.maxDecompressedBytes, ConnectionBounds.helloFrameBytes)
        self.parser = FrameParser(limits: helloLimits)
        var logger = logger
        logger[metadataKey: "connection"] = "\(connectionID)"
        self.logger = logger
    }

    // MARK: Channel events

    /// Gives the ledger the way back to this handler when bytes are given back.
    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        ledger.wake = {
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.run(handler.machine.bytesReleased(), context: context)
            }
        }
    }

    /// Ends the subscriptions and disarms the timers.
    func handlerRemoved(context: ChannelHandlerContext) {
        run(machine.handlerRemoved(), context: context)
        ledger.wake = {}  // It held the handler.
    }

    /// Arms the HELLO deadline.
    func channelActive(context: ChannelHandlerContext) {
        run(machine.channelActive(now: context.eventLoop.now), context: context)
        context.fireChannelActive()
    }

    /// Gives back the tenant's connection, ends the subscriptions and disarms the timers.
    func channelInactive(context: ChannelHandlerContext) {
        run(machine.channelInactive(ledger: ledger), context: context)
        context.fireChannelInactive()
    }

    /// Takes ``RelayShutdownEvent`` (GOODBYE and close) and the peer's half-close; passes on the rest.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RelayShutdownEvent {
            run(machine.shutdownRequested(), context: context)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            run(machine.inputClosed(), context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Closes the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        run(machine.errorCaught(), context: context)
    }

    /// Tells the machine whether the peer reads its answers (the write-stall deadline, reading paused or resumed).
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let isWritable = context.channel.isWritable
        run(machine.writabilityChanged(isWritable: isWritable, now: context.eventLoop.now), context: context)
        context.fireChannelWritabilityChanged()
    }

    // MARK: Reading

    /// Reads the socket, unless the machine pauses reading: then the read waits until it goes on.
    func read(context: ChannelHandlerContext) {
        run(machine.readRequested(), context: context)
    }

    /// Buffers the bytes read and handles the frames they complete.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if inbound == nil {
            inbound = bytes
        } else {
            inbound!.writeBuffer(&bytes)
        }
        processInbound(context: context)
    }

    /// Handles buffered frames until none is complete, the machine pauses reading, or
    /// ``ConnectionBounds/framesPerTurn`` were handled; their answers go out in one flush.
    private func processInbound(context: ChannelHandlerContext) {
        batchingWrites = true
        var handled = 0
        var turnEnded = false
        while !machine.isReadingPaused, var buffer = inbound {
            guard handled < ConnectionBounds.framesPerTurn else {
                turnEnded = true
                break
            }
            inbound = nil  // Keep the buffer uniquely referenced while the parser consumes it.
            let now = context.eventLoop.now
            var admissionActions: [SessionAction] = []
            let parsed = parser.next(from: &buffer) { header, bodyBytes in
                let admission = machine.admit(header, bodyBytes: bodyBytes, now: now, ledger: ledger)
                admissionActions = admission.actions
                return admission.verdict
            }
            inbound = buffer
            run(admissionActions, context: context)
            guard let parsed else { break }
            let actions = machine.frameParsed(
                parsed, now: now, unixMilliseconds: Date().unixMilliseconds, ledger: ledger)
            run(actions, context: context)
            handled += 1
        }
        batchingWrites = false
        flushWrites(context: context)
        if let buffer = inbound, buffer.readableBytes == 0 {
            inbound = nil
        } else if inbound != nil, inbound!.readerIndex > 65_536 {
            inbound!.discardReadBytes()
        }
        run(machine.inboundHandled(turnEnded: turnEnded), context: context)
    }

    // MARK: Carrying out the machine's actions

    /// Carries out `actions` in order, then flushes what they wrote (unless buffered frames are being handled:
    /// their end flushes).
    private func run(_ actions: [SessionAction], context: ChannelHandlerContext) {
        for action in actions {
            carryOut(action, context: context)
        }
        flushWrites(context: context)
    }

    private func carryOut(_ action: SessionAction, context: ChannelHandlerContext) {
        switch action {
        case .write(let output):
            write(output, context: context)
        case .count(let kind, let requestID, let error):
            answered(kind, requestID: requestID, error: error)
        case .log(let note):
            log(note)
        case .scheduleTimer(let timer, let deadline):
            arm(timer, at: deadline, context: context)
        case .cancelTimer(let timer):
            timers.removeValue(forKey: timer)?.cancel()
        case .stopTimers:
            for timer in timers.values { timer.cancel() }
            timers = [:]
        case .authenticate(let hello):
            authenticate(hello, context: context)
        case .noteFailedHello:
            admission.noteFailure(from: peerAddress)
        case .open(let tenant, let acceptsZstd):
            parser.limits = configuration.limits
            logger[metadataKey: "tenant"] = "\(tenant)"
            if acceptsZstd { encoder.compressionThreshold = configuration.compressionThreshold }
        case .checkRights(let credential):
            checkRights(credential, context: context)
        case .startRequest(let frame, let caller):
            start(frame, caller: caller, context: context)
        case .subscribe(let requestID, let tenant, let receipts):
            subscribe(requestID: requestID, tenant: tenant, receipts: receipts, context: context)
        case .unsubscribe(let subscription):
            service.results.unsubscribe(subscription)
        case .handleBufferedFrames:
            processInbound(context: context)
        case .continueInNextTurn:
            context.eventLoop.assumeIsolated().execute {
                self.run(self.machine.nextTurnBegan(), context: context)
            }
        case .read:
            context.read()
        case .close:
            // The last answers (an ERROR that says why) go out before the close.
            batchingWrites = false
            flushWrites(context: context)
            context.close(promise: nil)
        }
    }

    /// Arms `timer` for `deadline` on the event loop's clock, in place of the one armed before.
    private func arm(_ timer: SessionTimer, at deadline: NIODeadline, context: ChannelHandlerContext) {
        timers[timer]?.cancel()
        timers[timer] = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timers[timer] = nil
            self.run(self.machine.timerFired(timer, now: context.eventLoop.now), context: context)
        }
    }

    // MARK: Tasks

    /// Checks `hello`'s credential as a task (spaced out for an address that keeps failing HELLOs; the HELLO
    /// deadline still applies) and hands the outcome to the machine.
    private func authenticate(_ hello: Pushrelay_V1_Hello, context: ChannelHandlerContext) {
        peerAddress = context.channel.remoteAddress?.ipAddress ?? "unknown"
        let service = self.service
        let delay = admission.checkDelay(for: peerAddress)
        let future = context.eventLoop.makeFutureWithTask { () -> Result<VerifiedCredential, ProtocolError> in
            if delay > .zero { try? await Task.sleep(for: delay) }
            do throws(ProtocolError) {
                return .success(try await service.authenticate(hello))
            } catch {
                return .failure(error)
            }
        }
        future.assumeIsolated().whenSuccess { result in
            let now = context.eventLoop.now
            self.run(self.machine.authenticated(result, now: now, ledger: self.ledger), context: context)
        }
    }

    /// Checks as a task that `credential` still gives its rights and hands the outcome to the machine.
    private func checkRights(_ credential: VerifiedCredential, context: ChannelHandlerContext) {
        let service = self.service
        let future = context.eventLoop.makeFutureWithTask { () -> ProtocolError? in
            do throws(ProtocolError) {
                try await service.checkRights(credential)
                return nil
            } catch {
                return error
            }
        }
        future.assumeIsolated().whenSuccess { error in
            self.run(self.machine.rightsChecked(error), context: context)
        }
    }

    /// Runs request `frame` (its turn in ``RequestOrder`` has come) as a task and hands its answer to the machine.
    private func start(_ frame: Frame, caller: VerifiedCredential, context: ChannelHandlerContext) {
        let (id, kind) = (frame.requestID, frame.kind)
        let service = self.service
        var requestLogger = logger
        requestLogger[metadataKey: "request"] = "\(requestName(id))"
        let serviceLogger = requestLogger
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        // A SEND takes effect when its job is stored, before it waits for outcomes.
        let stored: @Sendable () -> Void = {
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.run(handler.machine.requestTookEffect(id), context: context)
            }
        }
        let future = context.eventLoop.makeFutureWithTask { () -> Result<(FrameKind, [UInt8]), ProtocolError> in
            do throws(ProtocolError) {
                return .success(
                    try await service.handle(frame, caller: caller, logger: serviceLogger, jobStored: stored))
            } catch {
                return .failure(error)
            }
        }
        future.assumeIsolated().whenSuccess { result in
            self.run(self.machine.requestEnded(id, kind: kind, result: result, ledger: self.ledger), context: context)
        }
    }

    /// Subscribes to `tenant`'s results for the SUBSCRIBE_RESULTS of `requestID`; each event comes back to the
    /// event loop and goes to the machine.
    private func subscribe(requestID: UInt32, tenant: String, receipts: Bool, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let subscription = service.results.subscribe(tenant: tenant, receipts: receipts) { event in
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.run(handler.machine.resultEvent(event, requestID: requestID), context: context)
            }
        }
        run(machine.subscribed(requestID: requestID, subscription: subscription), context: context)
    }

    // MARK: Writing

    /// Counts `output` when it answers a request, and writes its frame.
    private func write(_ output: SessionOutput, context: ChannelHandlerContext) {
        switch output {
        case .error(let error, let requestID, let kind):
            answered(kind, requestID: requestID, error: error)
            write(kind: .error, requestID: requestID, message: error.wireError, context: context)
        case .helloOK(let requestID, let tenant):
            answered(.hello, requestID: requestID, error: nil)
            write(kind: FrameKind.hello.answer, requestID: requestID, message: helloOK(tenant), context: context)
        case .pong(let requestID, let nonce):
            var pong = Pushrelay_V1_Pong()
            pong.nonce = nonce
            answered(.ping, requestID: requestID, error: nil)
            write(kind: FrameKind.ping.answer, requestID: requestID, message: pong, context: context)
        case .subscribed(let requestID):
            answered(.subscribeResults, requestID: requestID, error: nil)
            write(
                kind: FrameKind.subscribeResults.answer, requestID: requestID, message: Pushrelay_V1_Subscribed(),
                context: context)
        case .unsubscribed(let requestID):
            answered(.unsubscribeResults, requestID: requestID, error: nil)
            write(
                kind: FrameKind.unsubscribeResults.answer, requestID: requestID, message: Pushrelay_V1_Subscribed(),
                context: context)
        case .answer(let request, let requestID, let kind, let body):
            answered(request, requestID: requestID, error: nil)
            var buffer = context.channel.allocator.buffer(capacity: body.count + FrameHeader.size)
            encoder.encode(kind: kind, requestID: requestID, body: body, into: &buffer)
            context.write(wrapOutboundOut(buffer), promise: nil)
            unflushedWrites = true
        case .goodbye(let reason):
            var goodbye = Pushrelay_V1_Goodbye()
            goodbye.reason = reason
            write(kind: .goodbye, requestID: 0, message: goodbye, context: context)
        case .resultEvent(let requestID, let event):
            write(kind: .resultEvent, requestID: requestID, message: event, context: context)
        }
    }

    private func write(
        kind: FrameKind, requestID: UInt32, message: some SwiftProtobuf.Message, context: ChannelHandlerContext
    ) {
        var buffer = context.channel.allocator.buffer(capacity: 64)
        encoder.encode(kind: kind, requestID: requestID, message: message, into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: nil)
        unflushedWrites = true
    }

    /// Flushes what was written, unless buffered frames are being handled (their end flushes).
    private func flushWrites(context: ChannelHandlerContext) {
        guard unflushedWrites, !batchingWrites else { return }
        unflushedWrites = false
        context.flush()
    }

    private func helloOK(_ tenant: String) -> Pushrelay_V1_HelloOk {
        var ok = Pushrelay_V1_HelloOk()
        ok.version = UInt32(ProtocolLimits.currentVersion)
        ok.tenant = tenant
        ok.connectionID = "\(logger[metadataKey: "connection"] ?? "")"
        ok.maxFrameBytes = UInt32(configuration.limits.maxFrameBytes)
        ok.maxDecompressedBytes = UInt32(configuration.limits.maxDecompressedBytes)
        ok.maxInFlight = UInt32(configuration.limits.maxInFlight)
        ok.maxRecipients = UInt32(configuration.limits.maxRecipients)
        ok.idleTimeoutMs = configuration.idleTimeout.map { UInt32(clamping: $0.components.seconds * 1000) } ?? 0
        ok.server = "pushrelay/\(RelayVersion.current)"
        return ok
    }

    // MARK: Logging

    /// The request's name in logs: the connection id and the frame's request id (`c12/7`), unique in the
    /// process.
    private func requestName(_ requestID: UInt32) -> String {
        "\(logger[metadataKey: "connection"] ?? "")/\(requestID)"
    }

    /// Counts an answered request of `kind` (`nil`: a frame too broken to say) and logs it at debug level
    /// with its tenant, connection and request id.
    private func answered(_ kind: FrameKind?, requestID: UInt32, error: ProtocolError?) {
        RelayMetrics.request(kind, error: error)
        logger.debug(
            "request answered",
            metadata: [
                "request": "\(requestName(requestID))", "method": "\(kind?.metricName ?? "unknown")",
                "outcome": "\(error.map { $0.code.name } ?? "ok")",
            ]
        )
    }

    private func log(_ note: SessionNote) {
        switch note {
        case .helloDeadlinePassed:
            logger.info("no HELLO within the deadline; closing")
        case .idleTimeout:
            logger.info("idle timeout; closing")
        case .rightsLost(let message):
            logger.info("rights lost; closing", metadata: ["error": "\(message)"])
        case .writeStalled:
            logger.info("the peer has not read its answers within the write-stall timeout; closing")
        case .unreadableFrame(let requestID, let error):
            logger.info(
                "unreadable frame; closing", metadata: ["request": "\(requestName(requestID))", "error": "\(error)"])
        case .tenantAtCap(let tenant, let cap):
            logger.warning(
                "HELLO refused: the tenant holds its connection cap",
                metadata: ["tenant": "\(tenant)", "cap": "\(cap)"])
        case .authenticated(let clientName, let requestID):
            logger.info(
                "authenticated", metadata: ["client": "\(clientName)", "request": "\(requestName(requestID))"])
        case .authenticationFailed(let claimedTenant, let requestID):
            logger.debug(
                "authentication failed",
                metadata: ["tenant": "\(claimedTenant)", "request": "\(requestName(requestID))"])
        case .eventsDropped(let count):
            logger.warning("result events dropped for a slow subscriber", metadata: ["dropped": "\(count)"])
        }
    }
}

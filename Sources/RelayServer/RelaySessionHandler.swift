import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import SwiftProtobuf

/// Sent through a connection's pipeline to close it gracefully: GOODBYE, answer what is in flight, close.
struct RelayShutdownEvent: Sendable {}

/// One backend connection: HELLO first and within a deadline, then pipelined requests answered by
/// request id in any order, at most `maxInFlight` at once (beyond that the socket is not read), an idle
/// timeout, the results stream, and graceful close.
///
/// Memory per connection is bounded whatever the peer does: the socket is not read while `maxInFlight`
/// requests run, while their bodies hold the connection's inflated bytes (or the process's are taken:
/// RelaySessionHandler+Bodies.swift), or while the answers already written wait for a peer that does not read them
/// (the channel is not writable: more than ``ConnectionBounds/outboundHighWaterMark`` bytes queued), and a connection
/// whose answers wait longer than the write-stall timeout is closed. Before HELLO a frame is at most
/// ``ConnectionBounds/helloFrameBytes``. Its rights are checked again every
/// ``ConnectionBounds/rightsCheckInterval``: a revoked credential or a disabled tenant ends it.
///
/// All state lives on the channel's event loop; requests run as tasks and come back to the loop.
final class RelaySessionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum State: Equatable {
        case awaitingHello
        case authenticating
        case open(VerifiedCredential)
        /// GOODBYE said or heard: in-flight requests are answered, nothing new is taken.
        case closing
        case closed
    }

    let service: RelayService
    let configuration: RelayServerConfiguration
    var logger: Logger
    var state = State.awaitingHello
    private var parser: FrameParser
    private var encoder = FrameEncoder()
    private var inbound: ByteBuffer?
    var inFlight: Set<UInt32> = []
    /// The order in which the requests in flight take effect (``RequestOrder``).
    var order = RequestOrder()
    /// The requests in flight that wait for their turn in ``order``, by request id.
    var waitingInOrder: [UInt32: Frame] = [:]
    /// The process's budget of inflated request bodies, shared by every connection.
    let bodies: InflatedBytesBudget
    /// The inflated body bytes each in-flight request holds, by request id, and their sum.
    var heldBodies: [UInt32: Int] = [:]
    var heldBytes = 0
    /// Bytes taken for the frame being handled, until it becomes a request in flight (or they are given back).
    var admittedBytes = 0
    /// The next frame waits for inflated bytes to be given back; the socket is not read meanwhile.
    var waitingForBytes = false
    /// The connection waits for its credential's tokens: it was answered `RATE_LIMITED` and kept sending, so the
    /// socket is not read until the frame it holds can pay.
    var waitingForTokens = false
    /// The connection was answered `RATE_LIMITED` and has not had a frame taken without waiting since.
    var toldRateLimited = false
    /// The frame being admitted is read again after a wait for tokens.
    var resumedFromTokenWait = false
    private var pendingRead = false
    /// The peer shut down its sending side: nothing more comes; the connection closes once what came is answered.
    private var peerClosedInput = false
    var subscriptions: [UInt32: UUID] = [:]
    var queuedEvents: [(UInt32, Pushrelay_V1_ResultEvent)] = []
    var droppedEvents = 0
    private var helloTimer: Scheduled<Void>?
    private var idleTimer: RepeatedTask?
    private var rightsTimer: RepeatedTask?
    private var checkingRights = false
    /// Closes the connection when its answers have waited for the peer for the write-stall timeout.
    private var stallTimer: Scheduled<Void>?
    private var lastActivity = NIODeadline.now()
    /// The credential's key in the request limiter: its public prefix, never the secret.
    var limiterKey = ""
    /// The tenants' connection caps and the failed HELLOs per peer address.
    let admission: ConnectionAdmission
    /// The tenant whose connection this is once its HELLO was admitted (given back when it closes).
    private var admittedTenant: String?

    init(
        service: RelayService, configuration: RelayServerConfiguration, admission: ConnectionAdmission,
        bodies: InflatedBytesBudget, connectionID: String, logger: Logger
    ) {
        self.service = service
        self.configuration = configuration
        self.admission = admission
        self.bodies = bodies
        // Until HELLO is answered, frames are held to the few KiB a HELLO needs.
        var helloLimits = configuration.limits
        helloLimits.maxFrameBytes = min(helloLimits.maxFrameBytes, ConnectionBounds.helloFrameBytes)
        helloLimits.maxDecompressedBytes = min(helloLimits.maxDecompressedBytes, ConnectionBounds.helloFrameBytes)
        self.parser = FrameParser(limits: helloLimits)
        var logger = logger
        logger[metadataKey: "connection"] = "\(connectionID)"
        self.logger = logger
    }

    // MARK: Lifecycle

    func channelActive(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        helloTimer = context.eventLoop.scheduleTask(in: TimeAmount(configuration.helloTimeout)) {
            let (handler, context) = bound.value
            guard handler.state == .awaitingHello || handler.state == .authenticating else { return }
            handler.logger.info("no HELLO within the deadline; closing")
            handler.writeError(
                ProtocolError(.helloRequired, "no HELLO within the deadline; the connection closes"), requestID: 0,
                kind: nil, context: context)
            handler.close(context: context)
        }
        if let idle = configuration.idleTimeout {
            let timeout = TimeAmount(idle)
            let interval = max(TimeAmount.milliseconds(100), .nanoseconds(timeout.nanoseconds / 4))
            idleTimer = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                let (handler, context) = bound.value
                guard NIODeadline.now() - handler.lastActivity > timeout, case .open = handler.state else { return }
                handler.logger.info("idle timeout; closing")
                handler.beginClose(context: context, reason: "idle timeout")
            }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        if let tenant = admittedTenant {
            admission.release(tenant: tenant)
            admittedTenant = nil
        }
        stopTimersAndSubscriptions()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimersAndSubscriptions()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RelayShutdownEvent {
            beginClose(context: context, reason: "the relay is shutting down")
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The peer sent all it will (a half-close): what it sent is handled and answered, then the relay closes.
            peerClosedInput = true
            processInbound(context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        close(context: context)
    }

    // MARK: Reading, with back-pressure

    func read(context: ChannelHandlerContext) {
        if readingPaused {
            pendingRead = true
        } else {
            context.read()
        }
    }

    private var readingPaused: Bool {
        switch state {
        case .authenticating, .closed: true
        // While closing, frames are still read and each answered SHUTTING_DOWN (an unread frame would make the
        // close a reset, which can lose answers on their way), as long as the peer reads its answers.
        case .closing: waitingForTokens || context?.channel.isWritable == false
        case .awaitingHello, .open:
            inFlight.count >= configuration.limits.maxInFlight || waitingForBytes || waitingForTokens
                || context?.channel.isWritable == false
        }
    }

    /// Closes a connection whose peer closed its sending side, once every frame it sent is handled and answered.
    private func closeIfPeerIsDone(context: ChannelHandlerContext) {
        guard peerClosedInput, state != .closed, inFlight.isEmpty, !nextTurnScheduled, !waitingForBytes,
            !waitingForTokens
        else {
            return
        }
        close(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if inbound == nil {
            inbound = bytes
        } else {
            inbound!.writeBuffer(&bytes)
        }
        processInbound(context: context)
    }

    /// Handles buffered frames until none is complete or the connection must wait (authenticating, full).
    ///
    /// At most ``ConnectionBounds/framesPerTurn`` frames are handled in one event-loop turn: a connection that sent
    /// many small frames goes on in a later turn, after the loop's other connections had theirs, and its socket
    /// is not read meanwhile.
    func processInbound(context: ChannelHandlerContext) {
        // Answers written while the buffered frames are handled (PONGs, ERRORs) go out in one flush.
        batchingWrites = true
        var handled = 0
        var turnEnded = false
        while !readingPaused, var buffer = inbound {
            guard handled < ConnectionBounds.framesPerTurn else {
                turnEnded = true
                break
            }
            inbound = nil  // Keep the buffer uniquely referenced while the parser consumes it.
            let parsed = parser.next(from: &buffer) { header, bodyBytes in
                admit(header, bodyBytes: bodyBytes, context: context)
            }
            inbound = buffer
            guard let parsed else { break }
            handle(parsed, context: context)
            returnUnclaimedBytes()
            handled += 1
        }
        batchingWrites = false
        flushWrites(context: context)
        if let buffer = inbound, buffer.readableBytes == 0 {
            inbound = nil
        } else if inbound != nil, inbound!.readerIndex > 65_536 {
            inbound!.discardReadBytes()
        }
        if turnEnded {
            continueInNextTurn(context: context)
            return
        }
        if state == .closing, inFlight.isEmpty {
            // A GOODBYE among the frames just handled: the frames after it were answered SHUTTING_DOWN.
            close(context: context)
            return
        }
        if !nextTurnScheduled, !readingPaused, pendingRead {
            pendingRead = false
            context.read()
        }
        closeIfPeerIsDone(context: context)
    }

    /// Whether ``processInbound(context:)`` goes on in a later event-loop turn.
    private var nextTurnScheduled = false

    private func continueInNextTurn(context: ChannelHandlerContext) {
        guard !nextTurnScheduled else { return }
        nextTurnScheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.nextTurnScheduled = false
            if handler.state != .closed { handler.processInbound(context: context) }
        }
    }

    func handle(_ parsed: ParsedFrame, context: ChannelHandlerContext) {
        switch parsed {
        case .fatal(let requestID, let error):
            logger.info(
                "unreadable frame; closing", metadata: ["request": "\(requestName(requestID))", "error": "\(error)"])
            // About the connection, which closes: request id 0.
            writeError(error, requestID: 0, kind: nil, context: context)
            close(context: context)
        case .refused(let requestID, let kind, let error):
            writeError(error, requestID: requestID, kind: kind, context: context)
            chargeRefusal(context: context)
        case .frame(let frame):
            lastActivity = .now()
            handle(frame, context: context)
        }
    }

    func handle(_ frame: Frame, context: ChannelHandlerContext) {
        switch state {
        case .awaitingHello:
            if frame.kind == .hello {
                hello(frame, context: context)
            } else {
                writeError(
                    ProtocolError(.helloRequired, "send HELLO first; kind \(frame.kind) came before it"),
                    requestID: frame.requestID, kind: frame.kind, context: context
                )
            }
        case .open(let caller):
            request(frame, caller: caller, context: context)
        case .closing:
            writeError(
                ProtocolError(.shuttingDown, "the connection is closing"), requestID: frame.requestID,
                kind: frame.kind, context: context
            )
        case .authenticating, .closed:
            break
        }
    }

    // MARK: HELLO

    func hello(_ frame: Frame, context: ChannelHandlerContext) {
        let hello: Pushrelay_V1_Hello
        do throws(ProtocolError) {
            hello = try frame.request(limits: configuration.limits, nowMilliseconds: Date().unixMilliseconds)
        } catch {
            writeError(error, requestID: frame.requestID, kind: .hello, context: context)
            return
        }
        let version = UInt32(ProtocolLimits.currentVersion)
        guard hello.minVersion <= version, version <= hello.maxVersion else {
            writeError(
                ProtocolError(
                    .unsupportedVersion,
                    "the client speaks versions \(hello.minVersion)-\(hello.maxVersion); this relay speaks \(version)"
                ), requestID: frame.requestID, kind: .hello, context: context
            )
            close(context: context)
            return
        }
        let peer = context.channel.remoteAddress?.ipAddress ?? "unknown"
        state = .authenticating
        let service = self.service
        // An address that keeps failing HELLOs has its checks spaced out (the HELLO deadline still applies).
        let delay = admission.checkDelay(for: peer)
        let future = context.eventLoop.makeFutureWithTask { () -> Result<VerifiedCredential, ProtocolError> in
            if delay > .zero { try? await Task.sleep(for: delay) }
            do throws(ProtocolError) {
                return .success(try await service.authenticate(hello))
            } catch {
                return .failure(error)
            }
        }
        future.assumeIsolated().whenSuccess { result in
            guard self.state == .authenticating else { return }
            switch result {
            case .success(let credential):
                let tenant = credential.tenantID
                guard self.admission.admit(tenant: tenant) else {
                    self.logger.warning(
                        "HELLO refused: the tenant holds its connection cap",
                        metadata: ["tenant": "\(tenant)", "cap": "\(self.admission.maximumPerTenant)"])
                    self.writeError(
                        ProtocolError(
                            .tooManyConnections,
                            "\(tenant) holds its \(self.admission.maximumPerTenant) connections to this relay; close "
                                + "one or try another relay", retryAfterMilliseconds: 1_000),
                        requestID: frame.requestID, kind: .hello, context: context)
                    self.close(context: context)
                    return
                }
                self.admittedTenant = tenant
                self.parser.limits = self.configuration.limits
                self.helloTimer?.cancel()
                self.state = .open(credential)
                self.limiterKey = tenant + "/" + credential.id
                self.logger[metadataKey: "tenant"] = "\(tenant)"
                self.startRightsChecks(context: context)
                self.answered(.hello, requestID: frame.requestID, error: nil)
                self.logger.info(
                    "authenticated",
                    metadata: ["client": "\(hello.clientName)", "request": "\(self.requestName(frame.requestID))"]
                )
                if hello.acceptZstd { self.encoder.compressionThreshold = self.configuration.compressionThreshold }
                self.write(kind: FrameKind.hello.answer, requestID: frame.requestID, message: self.helloOK(tenant))
                self.processInbound(context: context)
            case .failure(let error):
                // The claimed tenant is logged only when it is a valid id holding no secret (a backend that swapped
                // its tenant and its secret), and so of bounded size.
                let claimed =
                    hello.tenant.contains(RelayStore.credentialSecretPrefix)
                    ? "(a secret)"
                    : ((try? FieldChecker("hello").id(hello.tenant, "tenant")) != nil ? hello.tenant : "(invalid)")
                // Each failure at debug; the failures per address are summed up in the log (ConnectionAdmission).
                self.logger.debug(
                    "authentication failed",
                    metadata: ["tenant": "\(claimed)", "request": "\(self.requestName(frame.requestID))"]
                )
                if error.code == .authenticationFailed { self.admission.noteFailure(from: peer) }
                self.writeError(error, requestID: frame.requestID, kind: .hello, context: context)
                self.close(context: context)
            }
        }
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

    // MARK: Rights

    /// Checks every ``ConnectionBounds/rightsCheckInterval`` that the credential is not revoked and its tenant not disabled; when
    /// either is, says so with an ERROR (request id 0) and closes, so that a subscription or an idle connection
    /// loses its rights too.
    private func startRightsChecks(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let interval = TimeAmount(ConnectionBounds.rightsCheckInterval)
        rightsTimer = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            guard case .open(let credential) = handler.state, !handler.checkingRights else { return }
            handler.checkingRights = true
            let service = handler.service
            context.eventLoop.makeFutureWithTask { () -> ProtocolError? in
                do throws(ProtocolError) {
                    try await service.checkRights(credential)
                    return nil
                } catch {
                    return error
                }
            }.assumeIsolated().whenSuccess { error in
                let (handler, context) = bound.value
                handler.checkingRights = false
                // Only a lost right ends the connection; a database that does not answer does not.
                guard let error, error.code == .authenticationFailed, handler.state != .closed else { return }
                handler.logger.info("rights lost; closing", metadata: ["error": "\(error.message)"])
                handler.writeError(error, requestID: 0, kind: nil, context: context)
                handler.close(context: context)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil, state != .closed {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            stallTimer = context.eventLoop.scheduleTask(in: TimeAmount(configuration.writeStallTimeout)) {
                let (handler, context) = bound.value
                handler.logger.info("the peer has not read its answers within the write-stall timeout; closing")
                handler.close(context: context)
            }
        }
        if context.channel.isWritable, !queuedEvents.isEmpty {
            let events = queuedEvents
            queuedEvents = []
            for (requestID, event) in events where subscriptions[requestID] != nil {
                write(kind: .resultEvent, requestID: requestID, message: event, flush: false)
            }
            context.flush()
            if droppedEvents > 0 {
                logger.warning("result events dropped for a slow subscriber", metadata: ["dropped": "\(droppedEvents)"])
                droppedEvents = 0
            }
        }
        context.fireChannelWritabilityChanged()
        if context.channel.isWritable, state != .closed {
            processInbound(context: context)
        }
    }

    // MARK: Writing and closing

    var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// While buffered frames are handled, answers are written and flushed once at the end.
    private var batchingWrites = false
    private var unflushedWrites = false

    func write(kind: FrameKind, requestID: UInt32, message: some SwiftProtobuf.Message, flush: Bool = true) {
        guard let context, state != .closed else { return }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        encoder.encode(kind: kind, requestID: requestID, message: message, into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: nil)
        unflushedWrites = true
        if flush { flushWrites(context: context) }
    }

    func write(kind: FrameKind, requestID: UInt32, body: [UInt8]) {
        guard let context, state != .closed else { return }
        var buffer = context.channel.allocator.buffer(capacity: body.count + FrameHeader.size)
        encoder.encode(kind: kind, requestID: requestID, body: body, into: &buffer)
        context.write(wrapOutboundOut(buffer), promise: nil)
        unflushedWrites = true
        flushWrites(context: context)
    }

    /// Flushes what was written, unless buffered frames are being handled (their end flushes).
    private func flushWrites(context: ChannelHandlerContext) {
        guard unflushedWrites, !batchingWrites else { return }
        unflushedWrites = false
        context.flush()
    }

    /// Answers a request with an ERROR frame, counting it under `kind` (`nil` when the frame could not be read).
    func writeError(
        _ error: ProtocolError,
        requestID: UInt32,
        kind: FrameKind?,
        context: ChannelHandlerContext
    ) {
        answered(kind, requestID: requestID, error: error)
        write(kind: .error, requestID: requestID, message: error.wireError)
    }

    /// GOODBYE (when the relay closes) and no new requests; closes once in-flight requests are answered.
    func beginClose(context: ChannelHandlerContext, reason: String?) {
        switch state {
        case .closed, .closing:
            return
        case .awaitingHello, .authenticating:
            close(context: context)
            return
        case .open:
            if let reason {
                var goodbye = Pushrelay_V1_Goodbye()
                goodbye.reason = reason
                write(kind: .goodbye, requestID: 0, message: goodbye)
            }
            state = .closing
            // Frames being handled now go on to their end (each answered SHUTTING_DOWN), which closes.
            if inFlight.isEmpty, !batchingWrites { close(context: context) }
        }
    }

    func close(context: ChannelHandlerContext) {
        guard state != .closed else { return }
        // The last answers (an ERROR that says why) go out before the close.
        batchingWrites = false
        flushWrites(context: context)
        state = .closed
        stopTimersAndSubscriptions()
        context.close(promise: nil)
    }

    private func stopTimersAndSubscriptions() {
        helloTimer?.cancel()
        helloTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
        rightsTimer?.cancel()
        rightsTimer = nil
        stallTimer?.cancel()
        stallTimer = nil
        for id in subscriptions.values { service.results.unsubscribe(id) }
        subscriptions = [:]
        queuedEvents = []
    }
}

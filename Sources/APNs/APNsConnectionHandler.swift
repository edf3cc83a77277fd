import Logging
import NIOCore
import NIOTLS

/// What a connection tells its pool. Every call happens on the connection's event loop; `now` is the time by the
/// pool's clock at the event (for a frame, when its read began).
protocol APNsConnectionDelegate: AnyObject {
    /// The connection finished its TLS handshake with ALPN h2 and received the peer's first SETTINGS.
    func connectionBecameReady(_ connection: APNsConnectionHandler, now: NIODeadline)
    /// The connection can take more streams than before (a stream ended, or SETTINGS raised the limit).
    func connectionHasCapacity(_ connection: APNsConnectionHandler, now: NIODeadline)
    /// The connection takes no new streams (GOAWAY, a provider-token fault, stream ids running out).
    func connectionIsDraining(_ connection: APNsConnectionHandler)
    /// The connection closed; every request it held has been finished already. `setupError` is set
    /// when it closed before it became ready (TLS refused, no h2, no SETTINGS in time).
    func connectionClosed(_ connection: APNsConnectionHandler, setupError: (any Error)?)
    /// One attempt of a request ended.
    func connection(
        _ connection: APNsConnectionHandler,
        finished request: PendingRequest,
        with result: Result<APNsResponse, APNsTransportFailure>,
        now: NIODeadline
    )
}

/// One HTTP/2 connection to APNs over the TLS stream: the channel's I/O around a ``ConnectionStateMachine``.
///
/// The handler cuts the bytes read into frames, feeds them, the requests the pool sends, the TLS handshake's
/// outcome and a housekeeping tick to the state machine with the time by the pool's clock, and carries out what it
/// answers: it tells the pool, closes the channel, and writes the frames the state machine wrote, as one buffer and
/// one flush per read batch, or per event-loop tick for writes outside a read. It also keeps the connection's
/// provider token. Everything runs on the channel's event loop.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The connection's id within its pool (shared by the sockets of one attempt, of which one is kept).
    let id: Int
    weak var delegate: (any APNsConnectionDelegate)?
    private let clock: any APNsClock
    private let logger: Logger
    private let housekeepingInterval: TimeAmount
    /// The key provider tokens are signed with; nil with certificate credentials.
    private let signingKey: APNsSigningKey?
    private var context: ChannelHandlerContext?
    private var state: ConnectionStateMachine
    private var tokens = ProviderTokenRotation()
    private var reader = HTTP2FrameReader()
    private var flushScheduled = false
    private var inRead = false
    private var housekeeping: RepeatedTask?

    init(id: Int, configuration: APNsPoolConfiguration, clock: any APNsClock, logger: Logger) {
        self.id = id
        self.clock = clock
        var logger = logger
        logger[metadataKey: "apns.connection"] = "\(id)"
        self.logger = logger
        self.housekeepingInterval = configuration.housekeepingInterval
        if case .token(let key) = configuration.credential {
            signingKey = key
        } else {
            signingKey = nil
        }
        let port = configuration.endpoint.port
        let authority = port == 443 ? configuration.endpoint.host : "\(configuration.endpoint.host):\(port)"
        self.state = ConnectionStateMachine(
            configuration: .init(configuration), authority: authority, now: clock.uptime()
        )
    }

    // MARK: Capacity

    /// Whether the connection takes new streams.
    var isReady: Bool { state.isReady }

    /// How many more streams may be opened now (``ConnectionStateMachine/availableStreams``).
    var availableStreams: Int { state.availableStreams }

    /// Streams in flight now.
    var streamsInFlight: Int { state.streams.count }

    /// Streams opened since the connection began.
    var streamsOpened: Int { state.streams.opened }

    /// How many streams may be in flight at once now (``ConnectionStateMachine/streamLimit``).
    var streamLimit: Int { state.streamLimit }

    /// Whether APNs has answered 200 on this connection: it authenticated and is known good.
    var hasDelivered: Bool { state.hasDelivered }

    /// The connection's counts, for the pool's snapshot.
    var snapshot: APNsConnectionSnapshot {
        APNsConnectionSnapshot(
            id: id, isReady: state.isReady, peerMaxConcurrentStreams: state.flow.peerMaxConcurrentStreams,
            streamsInFlight: state.streams.count, streamsOpened: state.streams.opened, tokensMade: tokens.tokensMade,
            peakStreamsPerLimit: state.streams.peakPerLimit, pingsSent: state.pings.sent,
            pingsAcknowledged: state.pings.acknowledged
        )
    }

    // MARK: Sending

    /// Opens a stream for `request`. The caller checked ``availableStreams`` first; a connection that is not
    /// ready (any more) hands the request back as not processed.
    func send(_ request: PendingRequest) {
        guard let context, state.isReady else {
            let now = clock.uptime()
            delegate?.connection(
                self, finished: request, with: .failure(.notProcessed("connection not ready")), now: now)
            return
        }
        var authorization: String?
        if let signingKey { authorization = tokens.authorization(at: clock.now(), key: signingKey) }
        let result = state.sendRequest(request, authorization: authorization)
        scheduleFlush(context)
        if result == .sentLastStream { drained(reason: "stream ids exhausted") }
    }

    /// Tells the pool the connection drains; closes it when no stream is left.
    private func drained(reason: String) {
        logger.debug("connection draining", metadata: ["reason": "\(reason)"])
        delegate?.connectionIsDraining(self)
        if state.streams.isEmpty { close() }
    }

    // MARK: Flushing

    /// Coalesces flushes: one per read batch, or one per event-loop tick for writes outside a read.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        if !inRead {
            context.eventLoop.assumeIsolated().execute { self.flushIfNeeded() }
        }
    }

    /// Schedules a flush when the state machine wrote frames.
    private func flushWrites() {
        if state.hasPendingWrites, let context { scheduleFlush(context) }
    }

    private func flushIfNeeded() {
        guard flushScheduled, let context else { return }
        flushScheduled = false
        guard state.hasPendingWrites else { return }
        let bytes = state.takeOutbound(allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    /// Closes at once (after writing what is pending); streams in flight finish as `connectionLost`.
    func close() {
        guard let context else { return }
        flushScheduled = true
        flushIfNeeded()
        context.close(promise: nil)
    }

    /// Closes when the time for TLS and the HTTP/2 setup ran out before the connection became ready.
    func setupTimedOut() {
        if state.setupTimedOut() { close() }
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        state.channelActive()
        flushScheduled = true
        flushIfNeeded()
        let this = NIOLoopBound(self, eventLoop: context.eventLoop)
        housekeeping = context.eventLoop.scheduleRepeatedTask(
            initialDelay: housekeepingInterval, delay: housekeepingInterval
        ) { _ in
            this.value.houseKeep()
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        housekeeping?.cancel()
        housekeeping = nil
        let closed = state.channelInactive()
        if !closed.lost.isEmpty {
            let now = clock.uptime()
            for request in closed.lost {
                delegate?.connection(self, finished: request, with: .failure(.connectionLost), now: now)
            }
        }
        delegate?.connectionClosed(self, setupError: closed.setupError)
        self.context = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            switch state.tlsHandshakeCompleted(alpn: negotiated) {
            case .none:
                break
            case .becameReady:
                delegate?.connectionBecameReady(self, now: clock.uptime())
            case .close:
                logger.error("APNs endpoint did not negotiate h2", metadata: ["alpn": "\(negotiated ?? "none")"])
                context.close(promise: nil)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs connection error", metadata: ["error": "\(error)"])
        state.channelFailed(error)
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inRead = true
        let now = clock.uptime()
        state.bytesRead(now: now)
        reader.append(unwrapInboundIn(data))
        do {
            while let frame = try reader.next() {
                try perform(state.receive(frame), now: now)
            }
        } catch {
            logger.warning("APNs connection protocol error", metadata: ["error": "\(error)"])
            state.protocolError(error)
            close()
            return
        }
        flushWrites()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inRead = false
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    // MARK: Carrying out the state machine's answers

    private func perform(_ action: ConnectionStateMachine.FrameAction, now: NIODeadline) {
        switch action {
        case .none:
            break
        case .finish(let request, let result, let then):
            finished(request, result, then: then, now: now)
        case .settings(let limit, let readiness):
            if let limit { logger.debug("peer max concurrent streams", metadata: ["value": "\(limit)"]) }
            switch readiness {
            case .unchanged: break
            case .becameReady: delegate?.connectionBecameReady(self, now: now)
            case .hasCapacity: delegate?.connectionHasCapacity(self, now: now)
            }
        case .hasCapacity:
            delegate?.connectionHasCapacity(self, now: now)
        case .goAway(let goAway):
            logger.info(
                "APNs sent GOAWAY", metadata: ["last_stream": "\(goAway.lastStreamID)", "reason": "\(goAway.reason)"])
            let failure = APNsTransportFailure.notProcessed("GOAWAY \(goAway.reason)")
            for request in goAway.unprocessed {
                delegate?.connection(self, finished: request, with: .failure(failure), now: now)
            }
            delegate?.connectionIsDraining(self)
            if goAway.close { close() }
        }
    }

    /// Hands a request's result to the pool, then does what follows the end of its stream.
    private func finished(
        _ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>,
        then: ConnectionStateMachine.StreamEnd, now: NIODeadline
    ) {
        switch then {
        case .hasCapacity:
            delegate?.connection(self, finished: request, with: result, now: now)
            delegate?.connectionHasCapacity(self, now: now)
        case .notReady(let close):
            delegate?.connection(self, finished: request, with: result, now: now)
            if close { self.close() }
        case .beganDraining(let reason, let close):
            logger.debug("connection draining", metadata: ["reason": "\(reason)"])
            delegate?.connectionIsDraining(self)
            delegate?.connection(self, finished: request, with: result, now: now)
            if close { self.close() }
        }
    }

    // MARK: Deadlines and PING

    private func houseKeep() {
        guard context != nil else { return }
        let now = clock.uptime()
        if let expired = state.expireStreams(now: now) {
            flushWrites()
            for request in expired.requests {
                delegate?.connection(self, finished: request, with: .failure(.deadlineExceeded), now: now)
            }
            switch expired.then {
            case .hasCapacity: delegate?.connectionHasCapacity(self, now: now)
            case .notReady(let close), .beganDraining(_, let close): if close { self.close() }
            }
        }
        switch state.checkPing(now: now) {
        case .none:
            break
        case .sent:
            flushWrites()
        case .timedOut(let lost, let wasReady):
            logger.warning("APNs did not answer PING; closing the connection")
            housekeeping?.cancel()
            housekeeping = nil
            // The streams finish as `connectionLost` now (so the pool sends them again on another connection),
            // the pool replaces the connection, and the channel is closed. The close itself may take a while,
            // since TLS waits for the silent peer's close_notify.
            for request in lost {
                delegate?.connection(self, finished: request, with: .failure(.connectionLost), now: now)
            }
            if wasReady { delegate?.connectionIsDraining(self) }
            close()
        }
    }
}

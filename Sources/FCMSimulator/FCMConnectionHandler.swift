import APNsSimulator
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 connection at the frame level: gathers each stream's request, has the core judge it, applies
/// the latency and the connection faults (GOAWAY, dropped connection), and answers, all on the connection's event
/// loop. Answers are flushed once per read batch, or one by one when a latency delays them.
final class FCMConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What the connection still does.
    private enum Phase {
        /// Serving every stream.
        case serving
        /// GOAWAY sent: serving the streams up to `lastStreamID`, then closing.
        case goingAway(lastStreamID: HTTP2StreamID)
        /// Closed or dropped: answering nothing.
        case finished
    }

    /// A connection-level fault due after an answer.
    private enum ConnectionFault {
        /// GOAWAY, then close once the streams up to this one are answered.
        case goaway
        /// Close the TCP connection at once.
        case drop
    }

    /// A request whose headers arrived and whose body is still coming.
    private struct PendingRequest {
        /// The request's headers.
        var headers: HPACKHeaders
        /// The body so far (no more than the validator reads, plus one frame).
        var body: [UInt8] = []
    }

    /// The simulator's shared state and judgement.
    private let core: FCMSimulatorCore
    /// This connection's id.
    private let connectionID: Int
    /// Cuts the TCP connection for the drop fault.
    private let gate: TransportGate
    /// Keeps the connection's inbound window open.
    private var window = ConnectionWindow(target: 1 << 20)
    /// Draws the random faults and the latency jitter.
    private var random: SplitMix64
    /// What the connection still does.
    private var phase = Phase.serving
    /// The requests still coming in.
    private var pending: [HTTP2StreamID: PendingRequest] = [:]
    /// Streams whose answer waits for the configured latency.
    private var delayed: Set<HTTP2StreamID> = []
    /// Complete requests on this connection, for the GOAWAY and drop faults.
    private var requestsReceived = 0
    /// The message bodies this connection already judged.
    private var shapes = ValidatedShapes()
    /// Whether something was written since the last flush.
    private var needsFlush = false

    /// A handler for connection `connectionID`, cutting the connection with `gate` for the drop fault.
    init(core: FCMSimulatorCore, connectionID: Int, gate: TransportGate) {
        self.core = core
        self.connectionID = connectionID
        self.gate = gate
        self.random = SplitMix64(seed: core.seed &+ UInt64(connectionID) &* 0x9E37_79B9_7F4A_7C15)
    }

    /// Gathers HEADERS and DATA; NIOHTTP2Handler deals with the other frames.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            guard answers(frame.streamID) else { return }
            if pending[frame.streamID] == nil {
                pending[frame.streamID] = PendingRequest(headers: headers.headers)
            }
            if headers.endStream { complete(frame.streamID, context: context) }
        case .data(let payload):
            guard answers(frame.streamID), pending[frame.streamID] != nil,
                case .byteBuffer(let buffer) = payload.data
            else { return }
            if pending[frame.streamID]!.body.count <= FCMRequestValidator.maximumBodyBytes {
                pending[frame.streamID]!.body.append(contentsOf: buffer.readableBytesView)
            }
            if payload.endStream { complete(frame.streamID, context: context) }
        default:
            break
        }
    }

    /// Flushes the batch's answers.
    func channelReadComplete(context: ChannelHandlerContext) {
        flush(context: context)
        context.fireChannelReadComplete()
    }

    /// Keeps the connection window open, and forgets streams the client reset.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let event as NIOHTTP2WindowUpdatedEvent where event.streamID == .rootStream:
            if let size = event.inboundWindowSize, let increment = window.increment(forWindowSize: size) {
                let update = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
                context.write(wrapOutboundOut(update), promise: nil)
                needsFlush = true
            }
        case let event as StreamClosedEvent:
            pending[event.streamID] = nil
            closeIfDrained(context: context)
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The connection is gone: nothing more is answered.
    func channelInactive(context: ChannelHandlerContext) {
        phase = .finished
        pending = [:]
        context.fireChannelInactive()
    }

    /// A stream error (one stream too many) ends that stream only; anything else ends the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            pending[error.streamID] = nil
            if error.baseError is NIOHTTP2Errors.MaxStreamsViolation { core.count { $0.streamsOverLimit += 1 } }
            return
        }
        context.close(promise: nil)
    }

    /// Judges a complete request, and answers now or after the latency.
    private func complete(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let request = pending.removeValue(forKey: streamID) else { return }
        requestsReceived += 1
        let faults = core.faults
        let answer = core.answer(
            method: request.headers.first(name: ":method") ?? "", path: request.headers.first(name: ":path") ?? "",
            authorization: request.headers.first(name: "authorization"), body: request.body,
            connectionID: connectionID, random: &random, shapes: &shapes)
        let fault: ConnectionFault? =
            requestsReceived == faults.dropConnectionAfter
            ? .drop : requestsReceived == faults.goawayAfter ? .goaway : nil
        guard faults.latency > .zero || faults.latencyJitter > .zero else {
            send(answer, streamID: streamID, fault: fault, context: context)
            return
        }
        var delay = faults.latency
        if faults.latencyJitter > .zero {
            delay = delay + .nanoseconds(Int64.random(in: 0...faults.latencyJitter.nanoseconds, using: &random))
        }
        delayed.insert(streamID)
        context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            self.delayed.remove(streamID)
            self.send(answer, streamID: streamID, fault: fault, context: context)
            self.flush(context: context)
        }
    }

    /// Writes an answer (unless its stream is no longer answered), then the fault that follows it.
    private func send(
        _ answer: FCMSimulatorAnswer, streamID: HTTP2StreamID, fault: ConnectionFault?, context: ChannelHandlerContext
    ) {
        guard answers(streamID) else { return }
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(answer.status))
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: String(retryAfter)) }
        let head = HTTP2Frame.FramePayload.Headers(headers: headers, endStream: false)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(head))), promise: nil)
        let body = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(bytes: answer.body)), endStream: true)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(body))), promise: nil)
        needsFlush = true
        switch fault {
        case nil:
            closeIfDrained(context: context)
        case .goaway:
            goAway(lastStreamID: streamID, context: context)
        case .drop:
            core.count { $0.connectionsDropped += 1 }
            flush(context: context)
            phase = .finished
            gate.closeAbruptly()
        }
    }

    /// Sends GOAWAY: streams after `lastStreamID` are dropped unanswered, the others are still answered.
    private func goAway(lastStreamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard case .serving = phase else { return }
        phase = .goingAway(lastStreamID: lastStreamID)
        pending = pending.filter { $0.key <= lastStreamID }
        delayed = delayed.filter { $0 <= lastStreamID }
        let goaway = HTTP2Frame(
            streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: nil))
        context.write(wrapOutboundOut(goaway), promise: nil)
        core.count { $0.goawaysSent += 1 }
        needsFlush = true
        closeIfDrained(context: context)
    }

    /// After GOAWAY, closes the connection once every stream up to the last one has been answered, and once what
    /// was written has reached the socket (a PING's write completes after every frame written before it).
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard case .goingAway = phase, pending.isEmpty, delayed.isEmpty else { return }
        phase = .finished
        needsFlush = false
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false))),
            promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    /// Whether `streamID` is still served.
    private func answers(_ streamID: HTTP2StreamID) -> Bool {
        switch phase {
        case .serving: true
        case .goingAway(let lastStreamID): streamID <= lastStreamID
        case .finished: false
        }
    }

    /// Flushes what was written, if anything.
    private func flush(context: ChannelHandlerContext) {
        guard needsFlush else { return }
        needsFlush = false
        context.flush()
    }
}

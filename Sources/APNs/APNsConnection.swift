import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// Why an attempt ended without an answer from APNs.
public enum APNsTransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// APNs did not process the request (a stream above GOAWAY's last-stream-id, or REFUSED_STREAM):
    /// it is safe to send it again at once on another connection.
    case notProcessed(String)
    /// The connection closed while the request was in flight; APNs may or may not have it.
    case connectionLost
    /// The peer reset the stream with this HTTP/2 error code.
    case streamReset(String)
    /// The request's deadline passed before an answer came.
    case deadlineExceeded
    /// No connection of the pool could be established.
    case connectFailed(String)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case .notProcessed(let why): "not processed by APNs (\(why))"
        case .connectionLost: "connection lost while the request was in flight"
        case .streamReset(let code): "stream reset by APNs (\(code))"
        case .deadlineExceeded: "deadline exceeded before APNs answered"
        case .connectFailed(let why): "could not connect to APNs: \(why)"
        }
    }
}

/// A request as the pool tracks it across attempts. Event-loop bound: touched only on the pool's loop.
final class PendingRequest {
    let notification: APNsNotification
    let deadline: NIODeadline
    let promise: EventLoopPromise<APNsDeliveryReport>
    var attempts = 0
    var requeues = 0

    init(notification: APNsNotification, deadline: NIODeadline, promise: EventLoopPromise<APNsDeliveryReport>) {
        self.notification = notification
        self.deadline = deadline
        self.promise = promise
    }
}

/// What a connection tells its pool. Every call happens on the connection's event loop.
protocol APNsConnectionDelegate: AnyObject {
    /// The connection finished its TLS handshake with ALPN h2 and received the peer's first SETTINGS.
    func connectionBecameReady(_ connection: APNsConnectionHandler)
    /// The connection can take more streams than before (a stream ended, or SETTINGS raised the limit).
    func connectionHasCapacity(_ connection: APNsConnectionHandler)
    /// The connection takes no new streams (GOAWAY, a provider-token fault, stream ids running out).
    func connectionIsDraining(_ connection: APNsConnectionHandler)
    /// The connection closed; every request it held has been finished already. `setupError` is set
    /// when it closed before it became ready (TLS refused, no h2, no SETTINGS in time).
    func connectionClosed(_ connection: APNsConnectionHandler, setupError: (any Error)?)
    /// One attempt of a request ended.
    func connection(
        _ connection: APNsConnectionHandler,
        finished request: PendingRequest,
        with result: Result<APNsResponse, APNsTransportFailure>
    )
}

/// A snapshot of one connection, for tests, metrics and the `apns push` report.
public struct APNsConnectionSnapshot: Sendable, Hashable {
    /// The connection's id within its pool (increasing).
    public var id: Int
    /// Whether it is taking new streams.
    public var isReady: Bool
    /// The peer's current SETTINGS_MAX_CONCURRENT_STREAMS.
    public var peerMaxConcurrentStreams: Int
    /// Streams in flight now.
    public var streamsInFlight: Int
    /// Streams opened since the connection began.
    public var streamsOpened: Int
    /// Provider tokens this connection has made.
    public var tokensMade: Int
    /// For each value SETTINGS_MAX_CONCURRENT_STREAMS took, the most streams that were in flight under it.
    public var peakStreamsPerLimit: [Int: Int]
    /// PINGs sent and acknowledged.
    public var pingsSent: Int, pingsAcknowledged: Int
}

/// One HTTP/2 connection to APNs: the frame-level handler behind `NIOHTTP2Handler`.
///
/// It owns its streams (no child channel per stream), its provider token, its PING timer and the
/// deadlines of its requests. Everything runs on the channel's event loop.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        let request: PendingRequest
        var status: Int?
        var apnsID: String?
        var body: ByteBuffer?
    }

    private enum State {
        case connecting(tlsDone: Bool, settingsSeen: Bool)
        case ready
        case draining
        case closed
    }

    let id: Int
    weak var delegate: (any APNsConnectionDelegate)?
    private let configuration: APNsPoolConfiguration
    private let clock: any APNsClock
    private let logger: Logger
    private let authority: String
    private var context: ChannelHandlerContext?
    private var state = State.connecting(tlsDone: false, settingsSeen: false)
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID: Int32 = 1
    private var peerMaxConcurrentStreams = 1
    private var peakStreamsPerLimit: [Int: Int] = [:]
    private var streamsOpened = 0
    private var tokens = ProviderTokenRotation()
    private var unflushed = false
    private var inRead = false
    private var inboundWindowConsumed = 0
    private var lastRead = NIODeadline.now()
    private var lastPingSent = NIODeadline.now()
    private var pingOutstanding: (data: HTTP2PingData, deadline: NIODeadline)?
    private var pingsSent = 0
    private var pingsAcknowledged = 0
    private var housekeeping: RepeatedTask?
    private var lastError: (any Error)?

    /// The connection window we keep open for responses; replenished after half of it is used.
    private static let inboundWindow = 1 << 20

    init(id: Int, configuration: APNsPoolConfiguration, clock: any APNsClock, logger: Logger) {
        self.id = id
        self.configuration = configuration
        self.clock = clock
        var logger = logger
        logger[metadataKey: "apns.connection"] = "\(id)"
        self.logger = logger
        let port = configuration.endpoint.port
        self.authority = port == 443 ? configuration.endpoint.host : "\(configuration.endpoint.host):\(port)"
    }

    // MARK: Capacity

    /// Whether the connection takes new streams.
    var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// How many more streams may be opened now.
    var availableStreams: Int {
        guard isReady else { return 0 }
        return max(0, min(peerMaxConcurrentStreams, configuration.maximumStreamsPerConnection) - streams.count)
    }

    var streamsInFlight: Int { streams.count }

    var snapshot: APNsConnectionSnapshot {
        APNsConnectionSnapshot(
            id: id, isReady: isReady, peerMaxConcurrentStreams: peerMaxConcurrentStreams,
            streamsInFlight: streams.count, streamsOpened: streamsOpened, tokensMade: tokens.tokensMade,
            peakStreamsPerLimit: peakStreamsPerLimit, pingsSent: pingsSent, pingsAcknowledged: pingsAcknowledged
        )
    }

    // MARK: Sending

    /// Opens a stream for `request`. The caller checked ``availableStreams`` first.
    func send(_ request: PendingRequest) {
        guard let context, isReady else {
            delegate?.connection(self, finished: request, with: .failure(.notProcessed("connection not ready")))
            return
        }
        let streamID = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        request.attempts += 1
        streams[streamID] = Stream(request: request)
        streamsOpened += 1
        peakStreamsPerLimit[peerMaxConcurrentStreams] = max(
            peakStreamsPerLimit[peerMaxConcurrentStreams] ?? 0, streams.count
        )

        let n = request.notification
        var headers = HPACKHeaders()
        headers.reserveCapacity(10)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":path", value: "/3/device/" + n.deviceToken, indexing: .nonIndexable)
        headers.add(name: ":authority", value: authority)
        if case .token(let key) = configuration.credential {
            headers.add(name: "authorization", value: tokens.authorization(at: clock.now(), key: key))
        }
        headers.add(name: "apns-topic", value: n.topic)
        headers.add(name: "apns-push-type", value: n.pushType.rawValue)
        headers.add(name: "apns-priority", value: Self.priorityText(n.effectivePriority))
        if let expiration = n.expiration {
            headers.add(name: "apns-expiration", value: String(expiration), indexing: .nonIndexable)
        }
        if let collapseID = n.collapseID {
            headers.add(name: "apns-collapse-id", value: collapseID, indexing: .nonIndexable)
        }
        if let apnsID = n.apnsID {
            headers.add(name: "apns-id", value: apnsID.uuidString.lowercased(), indexing: .nonIndexable)
        }
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
            promise: nil
        )
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(n.payload), endStream: true)))
            ),
            promise: nil
        )
        scheduleFlush(context)
        if nextStreamID > Int32.max - 2 { beginDraining(reason: "stream ids exhausted") }
    }

    private static func priorityText(_ priority: APNsPriority) -> String {
        switch priority {
        case .immediate: "10"
        case .powerAware: "5"
        case .low: "1"
        }
    }

    /// Coalesces flushes: one per read batch, or one per event-loop tick for writes outside a read.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        guard !unflushed else { return }
        unflushed = true
        if !inRead {
            context.eventLoop.assumeIsolated().execute { self.flushIfNeeded() }
        }
    }

    private func flushIfNeeded() {
        guard unflushed, let context else { return }
        unflushed = false
        context.flush()
    }

    /// Stops taking new streams; closes once the streams in flight have ended.
    func beginDraining(reason: String) {
        switch state {
        case .closed, .draining: return
        default: break
        }
        logger.debug("connection draining", metadata: ["reason": "\(reason)"])
        state = .draining
        delegate?.connectionIsDraining(self)
        closeIfDrained()
    }

    private func closeIfDrained() {
        if case .draining = state, streams.isEmpty {
            context?.close(promise: nil)
        }
    }

    /// Closes at once; streams in flight finish as `connectionLost`.
    func close() {
        context?.close(promise: nil)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        // Open our side of the connection window wide: only small error bodies come back, but
        // thousands of them must not stall the connection.
        context.writeAndFlush(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: .rootStream,
                    payload: .windowUpdate(windowSizeIncrement: Self.inboundWindow - 65_535)
                )
            ),
            promise: nil
        )
        let interval = configuration.housekeepingInterval
        let this = NIOLoopBound(self, eventLoop: context.eventLoop)
        housekeeping = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            this.value.houseKeep()
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        housekeeping?.cancel()
        housekeeping = nil
        let wasConnecting: Bool
        if case .connecting = state { wasConnecting = true } else { wasConnecting = false }
        state = .closed
        let lost = streams
        streams.removeAll()
        for (_, stream) in lost.sorted(by: { $0.key < $1.key }) {
            delegate?.connection(self, finished: stream.request, with: .failure(.connectionLost))
        }
        delegate?.connectionClosed(
            self,
            setupError: wasConnecting
                ? (lastError ?? APNsTransportFailure.connectFailed("closed before HTTP/2 was ready")) : nil)
        self.context = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case TLSUserEvent.handshakeCompleted(let negotiated):
            guard negotiated == "h2" else {
                logger.error("APNs endpoint did not negotiate h2", metadata: ["alpn": "\(negotiated ?? "none")"])
                context.fireErrorCaught(APNsTransportFailure.connectFailed("ALPN did not select h2"))
                context.close(promise: nil)
                return
            }
            if case .connecting(_, let settingsSeen) = state {
                state = .connecting(tlsDone: true, settingsSeen: settingsSeen)
                becomeReadyIfConnected()
            }
        case let closed as StreamClosedEvent:
            if let stream = streams.removeValue(forKey: closed.streamID) {
                let failure: APNsTransportFailure =
                    closed.reason == .refusedStream
                    ? .notProcessed("REFUSED_STREAM") : .streamReset("\(closed.reason ?? .cancel)")
                finish(stream.request, .failure(failure))
            }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Transport and TLS errors close the connection. HTTP/2 errors drain it: a stream error has
    /// already reset its stream (its request finishes through `StreamClosedEvent`), and a
    /// connection error has sent GOAWAY, so no new stream goes out and the rest finish or time out.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs connection error", metadata: ["error": "\(error)"])
        lastError = error
        switch state {
        case .ready where error is any NIOHTTP2Error, .draining where error is any NIOHTTP2Error:
            beginDraining(reason: "\(error)")
        default:
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inRead = true
        lastRead = .now()
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            receivedHeaders(headers, streamID: frame.streamID)
        case .data(let data):
            receivedData(data, streamID: frame.streamID, context: context)
        case .rstStream(let code):
            if let stream = streams.removeValue(forKey: frame.streamID) {
                let failure: APNsTransportFailure =
                    code == .refusedStream ? .notProcessed("REFUSED_STREAM") : .streamReset("\(code)")
                finish(stream.request, .failure(failure))
            }
        case .settings(.settings(let settings)):
            receivedSettings(settings)
        case .ping(let data, ack: true):
            if pingOutstanding?.data == data {
                pingOutstanding = nil
                pingsAcknowledged += 1
            }
        case .goAway(let lastStreamID, let errorCode, let opaqueData):
            receivedGoAway(lastStreamID: lastStreamID, errorCode: errorCode, opaqueData: opaqueData)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inRead = false
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    // MARK: Frames

    private func receivedHeaders(_ headers: HTTP2Frame.FramePayload.Headers, streamID: HTTP2StreamID) {
        guard var stream = streams[streamID] else { return }
        for (name, value, _) in headers.headers {
            if name == ":status" {
                stream.status = Int(value)
            } else if name == "apns-id" {
                stream.apnsID = value
            }
        }
        if headers.endStream {
            streams[streamID] = nil
            complete(stream)
        } else {
            streams[streamID] = stream
        }
    }

    private func receivedData(
        _ data: HTTP2Frame.FramePayload.Data,
        streamID: HTTP2StreamID,
        context: ChannelHandlerContext
    ) {
        inboundWindowConsumed += data.data.readableBytes + (data.paddingBytes ?? 0)
        if inboundWindowConsumed >= Self.inboundWindow / 2 {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: inboundWindowConsumed))
                ),
                promise: nil
            )
            inboundWindowConsumed = 0
            scheduleFlush(context)
        }
        guard var stream = streams[streamID] else { return }
        if case .byteBuffer(var bytes) = data.data {
            if stream.body == nil {
                stream.body = bytes
            } else {
                stream.body!.writeBuffer(&bytes)
            }
        }
        if data.endStream {
            streams[streamID] = nil
            complete(stream)
        } else {
            streams[streamID] = stream
        }
    }

    private func complete(_ stream: Stream) {
        var response = APNsResponse(status: stream.status ?? 0, apnsID: stream.apnsID)
        if response.status != 200, let body = stream.body {
            let error = Self.decodeErrorBody(body)
            response.reason = error.reason
            response.timestampMilliseconds = error.timestamp
        }
        finish(stream.request, .success(response))
    }

    private func finish(_ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>) {
        delegate?.connection(self, finished: request, with: result)
        if isReady {
            delegate?.connectionHasCapacity(self)
        } else {
            closeIfDrained()
        }
    }

    private struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Int64?
    }

    static func decodeErrorBody(_ body: ByteBuffer) -> (reason: APNsReason?, timestamp: Int64?) {
        guard let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView)) else {
            return (nil, nil)
        }
        return (decoded.reason.map(APNsReason.init(rawValue:)), decoded.timestamp)
    }

    private func receivedSettings(_ settings: HTTP2Settings) {
        for setting in settings where setting.parameter == .maxConcurrentStreams {
            let old = peerMaxConcurrentStreams
            peerMaxConcurrentStreams = setting.value
            if setting.value != old {
                logger.debug("peer max concurrent streams", metadata: ["value": "\(setting.value)"])
            }
        }
        if case .connecting(let tlsDone, _) = state {
            state = .connecting(tlsDone: tlsDone, settingsSeen: true)
            becomeReadyIfConnected()
        } else if isReady {
            delegate?.connectionHasCapacity(self)
        }
    }

    private func becomeReadyIfConnected() {
        guard case .connecting(true, true) = state else { return }
        state = .ready
        delegate?.connectionBecameReady(self)
    }

    private func receivedGoAway(lastStreamID: HTTP2StreamID, errorCode: HTTP2ErrorCode, opaqueData: ByteBuffer?) {
        let reason = opaqueData.flatMap { Self.decodeErrorBody($0).reason }?.rawValue ?? "\(errorCode)"
        logger.info("APNs sent GOAWAY", metadata: ["last_stream": "\(lastStreamID)", "reason": "\(reason)"])
        if case .closed = state { return }
        state = .draining
        let unprocessed = streams.keys.filter { $0 > lastStreamID }.sorted()
        for streamID in unprocessed {
            if let stream = streams.removeValue(forKey: streamID) {
                delegate?.connection(self, finished: stream.request, with: .failure(.notProcessed("GOAWAY \(reason)")))
            }
        }
        delegate?.connectionIsDraining(self)
        closeIfDrained()
    }

    // MARK: Deadlines and PING

    private func houseKeep() {
        guard let context else { return }
        let now = NIODeadline.now()
        if !streams.isEmpty {
            var expired: [HTTP2StreamID] = []
            for (streamID, stream) in streams where stream.request.deadline <= now {
                expired.append(streamID)
            }
            for streamID in expired.sorted() {
                guard let stream = streams.removeValue(forKey: streamID) else { continue }
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
                scheduleFlush(context)
                finish(stream.request, .failure(.deadlineExceeded))
            }
        }
        if let ping = pingOutstanding {
            if ping.deadline <= now {
                logger.warning("APNs did not answer PING; closing the connection")
                context.close(promise: nil)
            }
            return
        }
        guard case .connecting = state else {
            if now - lastRead >= configuration.idlePingInterval || now - lastPingSent >= configuration.pingInterval {
                sendPing(context, now: now)
            }
            return
        }
    }

    private func sendPing(_ context: ChannelHandlerContext, now: NIODeadline) {
        let data = HTTP2PingData(withInteger: UInt64(truncatingIfNeeded: now.uptimeNanoseconds))
        pingOutstanding = (data, now + configuration.pingTimeout)
        lastPingSent = now
        pingsSent += 1
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: false))), promise: nil)
        scheduleFlush(context)
    }
}

import Foundation
import Logging
import NIOCore
import NIOHPACK
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
    /// Where the request's report goes: a future's promise, or the handler of a batch with the request's
    /// position in it (``APNsPool/send(_:whenFull:answers:)``).
    enum Completion: Sendable {
        case promise(EventLoopPromise<APNsDeliveryReport>)
        case answers(@Sendable (Int, Result<APNsDeliveryReport, any Error>) -> Void, position: Int)

        /// Hands over the report (or the pool's refusal); called once.
        func finish(_ result: Result<APNsDeliveryReport, any Error>) {
            switch self {
            case .promise(let promise): promise.completeWith(result)
            case .answers(let answer, let position): answer(position, result)
            }
        }
    }

    let notification: APNsNotification
    let deadline: NIODeadline
    let completion: Completion
    var attempts = 0
    var requeues = 0

    init(notification: APNsNotification, deadline: NIODeadline, completion: Completion) {
        self.notification = notification
        self.deadline = deadline
        self.completion = completion
    }

    /// Hands the request's report (or the pool's refusal) to whoever waits for it; called once.
    func finish(_ result: Result<APNsDeliveryReport, any Error>) {
        completion.finish(result)
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

/// One HTTP/2 connection to APNs, speaking the protocol itself over the TLS stream.
///
/// The handler owns its streams in a dictionary (no per-stream channel, no per-stream state machine,
/// no sorted stream map: NIOHTTP2Handler's cost per stream capped the engine at about a quarter of
/// h2load's rate), its provider token, its PING timer and its requests' deadlines. Headers are
/// compressed with NIOHPACK, the fields that repeat from request to request written from bytes kept
/// (``HeaderBlockEncoder``). It speaks only the client half of HTTP/2 that APNs needs: one request
/// (HEADERS + DATA) per stream, the response (HEADERS, optional DATA), SETTINGS, PING, GOAWAY,
/// RST_STREAM and WINDOW_UPDATE. Everything runs on the channel's event loop.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

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

    /// A header block split over HEADERS and CONTINUATION frames.
    private struct PartialHeaderBlock {
        var streamID: UInt32
        var endStream: Bool
        var block: ByteBuffer
    }

    let id: Int
    weak var delegate: (any APNsConnectionDelegate)?
    private let configuration: APNsPoolConfiguration
    private let clock: any APNsClock
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var state = State.connecting(tlsDone: false, settingsSeen: false)
    private var streams: [UInt32: Stream] = [:]
    private var nextStreamID: UInt32 = 1
    private var peerMaxConcurrentStreams = 1
    private var peerInitialStreamWindow = 65_535
    private var peerMaxFrameSize = 16_384
    private var peakStreamsPerLimit: [Int: Int] = [:]
    private var streamsOpened = 0
    private var tokens = ProviderTokenRotation()
    private var reader = HTTP2FrameReader()
    private var headerBlocks: HeaderBlockEncoder
    private var responseHeaders = ResponseHeaderDecoder()
    private var partialHeaders: PartialHeaderBlock?
    /// Frames written since the last flush, sent as one buffer.
    private var outbound = ByteBuffer()
    private var flushScheduled = false
    private var inRead = false
    private var inboundWindowConsumed = 0
    /// Our model of the peer's connection-level window for the DATA we send; a request waits in the
    /// pool's FIFO queue while it is short.
    private var sendWindow = 65_535
    private var lastRead = NIODeadline.now()
    private var lastPingSent = NIODeadline.now()
    private var pingOutstanding: (data: UInt64, deadline: NIODeadline)?
    private var pingsSent = 0
    private var pingsAcknowledged = 0
    private var housekeeping: RepeatedTask?
    /// Why the connection failed, for the pool's report when it never became ready.
    var lastError: (any Error)?
    /// Whether APNs has answered 200 on this connection: it authenticated and is known good.
    private(set) var hasDelivered = false

    /// The largest header block accepted across HEADERS and CONTINUATION frames.
    private static let maximumHeaderBlock = 65_536
    /// The connection window we keep open for responses; replenished after half of it is used.
    private static let inboundWindow = 1 << 20
    private static let preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

    init(id: Int, configuration: APNsPoolConfiguration, clock: any APNsClock, logger: Logger) {
        self.id = id
        self.configuration = configuration
        self.clock = clock
        var logger = logger
        logger[metadataKey: "apns.connection"] = "\(id)"
        self.logger = logger
        let port = configuration.endpoint.port
        let authority = port == 443 ? configuration.endpoint.host : "\(configuration.endpoint.host):\(port)"
        self.headerBlocks = HeaderBlockEncoder(authority: authority)
    }

    // MARK: Capacity

    /// Whether the connection takes new streams.
    var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Whether TLS or the HTTP/2 setup is still under way.
    var isConnecting: Bool {
        if case .connecting = state { return true }
        return false
    }

    /// How many more streams may be opened now: within the peer's and our stream limits, and only
    /// while the peer's windows take the largest payload.
    var availableStreams: Int {
        let largestPayload = APNsPushType.voip.maximumPayloadSize
        guard isReady, sendWindow >= largestPayload, peerInitialStreamWindow >= largestPayload else { return 0 }
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

    /// Opens a stream for `request`: HEADERS, then DATA with END_STREAM. The caller checked
    /// ``availableStreams`` first.
    func send(_ request: PendingRequest) {
        let n = request.notification
        request.attempts += 1
        guard let context, isReady else {
            delegate?.connection(self, finished: request, with: .failure(.notProcessed("connection not ready")))
            return
        }
        let streamID = nextStreamID
        nextStreamID += 2
        streams[streamID] = Stream(request: request)
        streamsOpened += 1
        if streams.count > peakStreamsPerLimit[peerMaxConcurrentStreams] ?? 0 {
            peakStreamsPerLimit[peerMaxConcurrentStreams] = streams.count
        }

        var authorization: String?
        if case .token(let key) = configuration.credential {
            authorization = tokens.authorization(at: clock.now(), key: key)
        }
        let repeated = HeaderBlockEncoder.RepeatedFields(
            authorization: authorization, topic: n.topic, pushType: n.pushType.rawValue,
            priority: Self.priorityText(n.effectivePriority)
        )
        let own = HeaderBlockEncoder.OwnFields(expiration: n.expiration, collapseID: n.collapseID, apnsID: n.apnsID)
        writeHeaders(device: n.deviceToken, repeated: repeated, own: own, streamID: streamID)
        outbound.writeHTTP2Frame(type: .data, flags: HTTP2FrameFlag.endStream, streamID: streamID, payload: n.payload)
        sendWindow -= n.payload.readableBytes
        scheduleFlush(context)
        if nextStreamID > UInt32(Int32.max) - 2 { beginDraining(reason: "stream ids exhausted") }
    }

    /// Writes a request's HEADERS frame (and CONTINUATION frames when the block exceeds the peer's frame size).
    private func writeHeaders(
        device token: String, repeated: HeaderBlockEncoder.RepeatedFields, own: HeaderBlockEncoder.OwnFields,
        streamID: UInt32
    ) {
        let headerStart = outbound.writerIndex
        outbound.writeHTTP2FrameHeader(length: 0, type: .headers, flags: HTTP2FrameFlag.endHeaders, streamID: streamID)
        let blockStart = outbound.writerIndex
        headerBlocks.encode(device: token, repeated: repeated, own: own, to: &outbound)
        let blockLength = outbound.writerIndex - blockStart
        if blockLength <= peerMaxFrameSize {
            outbound.setInteger(UInt8(truncatingIfNeeded: blockLength >> 16), at: headerStart)
            outbound.setInteger(UInt16(truncatingIfNeeded: blockLength), at: headerStart + 1)
            return
        }
        var block = outbound.getSlice(at: blockStart, length: blockLength)!
        outbound.moveWriterIndex(to: headerStart)
        var type = HTTP2FrameType.headers
        while block.readableBytes > 0 {
            let chunk = block.readSlice(length: min(block.readableBytes, peerMaxFrameSize))!
            let flags = block.readableBytes == 0 ? HTTP2FrameFlag.endHeaders : 0
            outbound.writeHTTP2Frame(type: type, flags: flags, streamID: streamID, payload: chunk)
            type = .continuation
        }
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
        guard !flushScheduled else { return }
        flushScheduled = true
        if !inRead {
            context.eventLoop.assumeIsolated().execute { self.flushIfNeeded() }
        }
    }

    private func flushIfNeeded() {
        guard flushScheduled, let context else { return }
        flushScheduled = false
        guard outbound.readableBytes > 0 else { return }
        let bytes = outbound
        outbound = context.channel.allocator.buffer(capacity: max(1024, bytes.readableBytes))
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
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
            close()
        }
    }

    /// Gives up on a connection that stopped answering: its streams finish as `connectionLost` now (so
    /// the pool retries them on another connection, with backoff), the pool replaces it, and the
    /// channel is closed. The close
    /// itself may take a while, since TLS waits for the silent peer's close_notify.
    private func abort() {
        housekeeping?.cancel()
        housekeeping = nil
        pingOutstanding = nil
        if case .connecting = state {
            close()
            return
        }
        let wasReady = isReady
        state = .draining
        let lost = streams
        streams.removeAll()
        for (_, stream) in lost.sorted(by: { $0.key < $1.key }) {
            delegate?.connection(self, finished: stream.request, with: .failure(.connectionLost))
        }
        if wasReady { delegate?.connectionIsDraining(self) }
        close()
    }

    /// Closes at once (after writing what is pending); streams in flight finish as `connectionLost`.
    func close() {
        guard let context else { return }
        flushScheduled = true
        flushIfNeeded()
        context.close(promise: nil)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        outbound = context.channel.allocator.buffer(capacity: 4096)
    }

    func channelActive(context: ChannelHandlerContext) {
        // The preface and our SETTINGS wait in the TLS handler until the handshake is done.
        outbound.writeImmutableBuffer(Self.preface)
        let settings: [(UInt16, UInt32)] = [
            (0x2, 0),  // ENABLE_PUSH
            (0x3, 100),  // MAX_CONCURRENT_STREAMS (APNs opens none)
            (0x4, 65_535),  // INITIAL_WINDOW_SIZE
            (0x6, 16_384),  // MAX_HEADER_LIST_SIZE
        ]
        outbound.writeHTTP2FrameHeader(length: 6 * settings.count, type: .settings, flags: 0, streamID: 0)
        for (identifier, value) in settings {
            outbound.writeInteger(identifier)
            outbound.writeInteger(value)
        }
        // Open our side of the connection window wide: only small error bodies come back, but
        // thousands of them must not stall the connection.
        writeWindowUpdate(increment: Self.inboundWindow - 65_535)
        flushScheduled = true
        flushIfNeeded()
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
                ? (lastError ?? APNsTransportFailure.connectFailed("closed before HTTP/2 was ready")) : nil
        )
        self.context = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            guard negotiated == "h2" else {
                logger.error("APNs endpoint did not negotiate h2", metadata: ["alpn": "\(negotiated ?? "none")"])
                lastError = APNsTransportFailure.connectFailed("ALPN did not select h2")
                context.close(promise: nil)
                return
            }
            if case .connecting(_, let settingsSeen) = state {
                state = .connecting(tlsDone: true, settingsSeen: settingsSeen)
                becomeReadyIfConnected()
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs connection error", metadata: ["error": "\(error)"])
        lastError = error
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inRead = true
        lastRead = .now()
        reader.append(unwrapInboundIn(data))
        do {
            while let frame = try reader.next() {
                try process(frame)
            }
        } catch {
            connectionError(error, context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inRead = false
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    /// The peer broke HTTP/2: GOAWAY with the error, then close.
    private func connectionError(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        logger.warning("APNs connection protocol error", metadata: ["error": "\(error)"])
        lastError = error
        var payload = ByteBuffer()
        payload.writeInteger(UInt32(0))
        payload.writeInteger(error.code.rawValue)
        outbound.writeHTTP2Frame(type: .goAway, streamID: 0, payload: payload)
        state = .draining
        close()
    }

    // MARK: Frames

    private func process(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) {
        if let partial = partialHeaders {
            guard frame.type == HTTP2FrameType.continuation.rawValue, frame.streamID == partial.streamID else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "header block interrupted")
            }
            var block = partial.block
            var fragment = frame.payload
            guard block.readableBytes + fragment.readableBytes <= Self.maximumHeaderBlock else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "header block over 64 KiB")
            }
            block.writeBuffer(&fragment)
            if frame.has(HTTP2FrameFlag.endHeaders) {
                partialHeaders = nil
                try receivedHeaderBlock(block, streamID: partial.streamID, endStream: partial.endStream)
            } else {
                partialHeaders?.block = block
            }
            return
        }
        let type = HTTP2FrameType(rawValue: frame.type)
        switch type {
        case .settings, .ping, .goAway:
            guard frame.streamID == 0 else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "\(type!) on stream \(frame.streamID)")
            }
        case .headers, .data, .rstStream, .continuation, .pushPromise:
            guard frame.streamID != 0 else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "\(type!) on stream 0")
            }
        case .windowUpdate, .priority, nil:
            break
        }
        switch type {
        case .headers:
            var block = frame.payload
            try block.stripHTTP2Padding(flags: frame.flags, hasPriority: frame.has(HTTP2FrameFlag.priority))
            let endStream = frame.has(HTTP2FrameFlag.endStream)
            if frame.has(HTTP2FrameFlag.endHeaders) {
                try receivedHeaderBlock(block, streamID: frame.streamID, endStream: endStream)
            } else {
                partialHeaders = PartialHeaderBlock(streamID: frame.streamID, endStream: endStream, block: block)
            }
        case .data:
            try receivedData(frame)
        case .rstStream:
            guard frame.payload.readableBytes == 4,
                let code = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "RST_STREAM of \(frame.payload.readableBytes) bytes")
            }
            if let stream = streams.removeValue(forKey: frame.streamID) {
                let failure: APNsTransportFailure =
                    code == HTTP2ErrorCode.refusedStream.rawValue
                    ? .notProcessed("REFUSED_STREAM") : .streamReset(HTTP2ErrorCode.name(code))
                finish(stream.request, .failure(failure))
            }
        case .settings:
            try receivedSettings(frame)
        case .ping:
            guard frame.payload.readableBytes == 8,
                let data = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt64.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "PING of \(frame.payload.readableBytes) bytes")
            }
            if frame.has(HTTP2FrameFlag.ack) {
                if pingOutstanding?.data == data {
                    pingOutstanding = nil
                    pingsAcknowledged += 1
                }
            } else {
                outbound.writeHTTP2Frame(type: .ping, flags: HTTP2FrameFlag.ack, streamID: 0, payload: frame.payload)
                if let context { scheduleFlush(context) }
            }
        case .goAway:
            var payload = frame.payload
            guard let lastStreamID = payload.readInteger(as: UInt32.self),
                let code = payload.readInteger(as: UInt32.self)
            else { throw HTTP2ConnectionError(code: .frameSizeError, reason: "short GOAWAY") }
            receivedGoAway(lastStreamID: lastStreamID & 0x7FFF_FFFF, errorCode: code, debugData: payload)
        case .windowUpdate:
            guard frame.payload.readableBytes == 4,
                let increment = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "WINDOW_UPDATE of \(frame.payload.readableBytes) bytes")
            }
            if frame.streamID == 0 {
                guard increment & 0x7FFF_FFFF != 0 else {
                    throw HTTP2ConnectionError(code: .protocolError, reason: "WINDOW_UPDATE of 0")
                }
                sendWindow += Int(increment & 0x7FFF_FFFF)
                guard sendWindow <= Int(Int32.max) else {
                    throw HTTP2ConnectionError(code: .flowControlError, reason: "connection window above 2^31-1")
                }
                if isReady { delegate?.connectionHasCapacity(self) }
            }
        case .pushPromise:
            throw HTTP2ConnectionError(code: .protocolError, reason: "PUSH_PROMISE although push is disabled")
        case .continuation:
            throw HTTP2ConnectionError(code: .protocolError, reason: "CONTINUATION without HEADERS")
        case .priority, nil:
            break  // PRIORITY and unknown frame types are ignored (RFC 9113 §5.5).
        }
    }

    private func receivedHeaderBlock(
        _ block: ByteBuffer, streamID: UInt32, endStream: Bool
    ) throws(HTTP2ConnectionError) {
        // Every block is decoded, even for a stream we no longer track, to keep HPACK state in step.
        let fields: ResponseHeaderDecoder.Fields
        do {
            fields = try responseHeaders.decode(block)
        } catch {
            throw HTTP2ConnectionError(code: .compressionError, reason: "\(error)")
        }
        guard var stream = streams[streamID] else { return }
        if let status = fields.status { stream.status = status }
        if let apnsID = fields.apnsID { stream.apnsID = apnsID }
        if endStream {
            streams[streamID] = nil
            complete(stream)
        } else {
            streams[streamID] = stream
        }
    }

    private func receivedData(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) {
        inboundWindowConsumed += frame.payload.readableBytes
        if inboundWindowConsumed >= Self.inboundWindow / 2 {
            writeWindowUpdate(increment: inboundWindowConsumed)
            inboundWindowConsumed = 0
            if let context { scheduleFlush(context) }
        }
        guard var stream = streams[frame.streamID] else { return }
        var data = frame.payload
        try data.stripHTTP2Padding(flags: frame.flags, hasPriority: false)
        // An APNs error body is a few dozen bytes; keep at most 4 KiB of whatever comes.
        if stream.body == nil {
            stream.body = data
        } else if stream.body!.readableBytes < 4096 {
            stream.body!.writeBuffer(&data)
        }
        if frame.has(HTTP2FrameFlag.endStream) {
            streams[frame.streamID] = nil
            complete(stream)
        } else {
            streams[frame.streamID] = stream
        }
    }

    private func writeWindowUpdate(increment: Int) {
        outbound.writeHTTP2FrameHeader(length: 4, type: .windowUpdate, flags: 0, streamID: 0)
        outbound.writeInteger(UInt32(increment))
    }

    private func complete(_ stream: Stream) {
        var response = APNsResponse(status: stream.status ?? 0, apnsID: stream.apnsID)
        if response.status == 200 { hasDelivered = true }
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

    private func receivedSettings(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) {
        if frame.has(HTTP2FrameFlag.ack) { return }
        var payload = frame.payload
        guard payload.readableBytes % 6 == 0 else {
            throw HTTP2ConnectionError(code: .frameSizeError, reason: "SETTINGS of \(payload.readableBytes) bytes")
        }
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case 0x1:  // HEADER_TABLE_SIZE: our encoder's table must fit the peer's.
                try? headerBlocks.setDynamicTableSize(Int(value))
            case 0x3:  // MAX_CONCURRENT_STREAMS
                if Int(value) != peerMaxConcurrentStreams {
                    logger.debug("peer max concurrent streams", metadata: ["value": "\(value)"])
                }
                peerMaxConcurrentStreams = Int(value)
            case 0x4:  // INITIAL_WINDOW_SIZE
                guard value <= UInt32(Int32.max) else {
                    throw HTTP2ConnectionError(code: .flowControlError, reason: "initial window above 2^31-1")
                }
                peerInitialStreamWindow = Int(value)
            case 0x5:  // MAX_FRAME_SIZE
                guard (16_384...16_777_215).contains(value) else {
                    throw HTTP2ConnectionError(code: .protocolError, reason: "MAX_FRAME_SIZE \(value)")
                }
                peerMaxFrameSize = Int(value)
            default:
                break
            }
        }
        outbound.writeHTTP2FrameHeader(length: 0, type: .settings, flags: HTTP2FrameFlag.ack, streamID: 0)
        if let context { scheduleFlush(context) }
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

    private func receivedGoAway(lastStreamID: UInt32, errorCode: UInt32, debugData: ByteBuffer) {
        let reason = Self.decodeErrorBody(debugData).reason?.rawValue ?? HTTP2ErrorCode.name(errorCode)
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
            var expired: [UInt32] = []
            for (streamID, stream) in streams where stream.request.deadline <= now {
                expired.append(streamID)
            }
            for streamID in expired.sorted() {
                guard let stream = streams.removeValue(forKey: streamID) else { continue }
                outbound.writeHTTP2FrameHeader(length: 4, type: .rstStream, flags: 0, streamID: streamID)
                outbound.writeInteger(HTTP2ErrorCode.cancel.rawValue)
                scheduleFlush(context)
                finish(stream.request, .failure(.deadlineExceeded))
            }
        }
        if let ping = pingOutstanding {
            if ping.deadline <= now {
                logger.warning("APNs did not answer PING; closing the connection")
                abort()
            }
            return
        }
        if case .connecting = state { return }
        if now - lastRead >= configuration.idlePingInterval || now - lastPingSent >= configuration.pingInterval {
            let data = now.uptimeNanoseconds
            pingOutstanding = (data, now + configuration.pingTimeout)
            lastPingSent = now
            pingsSent += 1
            outbound.writeHTTP2FrameHeader(length: 8, type: .ping, flags: 0, streamID: 0)
            outbound.writeInteger(data)
            scheduleFlush(context)
        }
    }
}

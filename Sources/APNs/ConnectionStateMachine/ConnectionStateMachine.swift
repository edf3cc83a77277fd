import NIOCore

/// The client half of one HTTP/2 connection to APNs, as a value.
///
/// It takes the connection's inputs (the TLS handshake's outcome, each frame read, each request to send, the
/// time at each housekeeping tick, the channel's end) and answers each with what follows: a request's attempt to
/// finish with a result, a change of readiness to tell the pool, the channel to close. The frames it sends (the
/// preface and SETTINGS, requests' HEADERS and DATA, acknowledgements, PINGs, RST_STREAM, WINDOW_UPDATE, GOAWAY)
/// are written to its outbound buffer, which the channel handler takes and writes as one buffer per read batch or
/// event-loop tick (``hasPendingWrites``, ``takeOutbound(allocator:)``). It reads no clock and touches no channel:
/// the handler passes the time in, so that deadlines and PINGs run on a test clock as they do on the system's.
///
/// It speaks only the client half of HTTP/2 that APNs needs: one request (HEADERS + DATA) per stream, the response
/// (HEADERS, optional DATA), SETTINGS, PING, GOAWAY, RST_STREAM and WINDOW_UPDATE. Its streams live in a dictionary
/// by id, with no per-stream state machine and no per-stream channel, which is what made NIOHTTP2Handler too
/// costly per stream for this engine. Headers are compressed with NIOHPACK, the fields that repeat from request
/// to request written from bytes kept (``HeaderBlockEncoder``).
struct ConnectionStateMachine {
    /// Where the connection is in its life.
    enum Phase: Equatable {
        /// TLS and the HTTP/2 setup are under way: the connection is ready once the handshake chose h2 and the
        /// peer's first SETTINGS came, in either order.
        case connecting(tlsDone: Bool, settingsSeen: Bool)
        /// It takes new streams.
        case ready
        /// It takes no new streams (GOAWAY, a refused provider token, stream ids running out, a protocol error)
        /// and closes once those in flight have ended.
        case draining
        /// The channel is closed.
        case closed
    }

    /// The pool's settings a connection keeps.
    struct Configuration {
        /// Our own cap on streams, below whatever the peer allows.
        var maximumStreams: Int
        /// Send a PING when nothing was read for this long.
        var idlePingInterval: TimeAmount
        /// Send a PING at least this often.
        var pingInterval: TimeAmount
        /// An unanswered PING gives the connection up after this long.
        var pingTimeout: TimeAmount
        /// The largest request body the pool sends: a stream is opened only while the windows take it.
        var largestBody: Int

        /// The settings of `pool`.
        init(_ pool: APNsPoolConfiguration) {
            largestBody = pool.largestBody
            maximumStreams = pool.maximumStreamsPerConnection
            idlePingInterval = pool.idlePingInterval
            pingInterval = pool.pingInterval
            pingTimeout = pool.pingTimeout
        }
    }

    /// What follows the end of a stream, once its request's result is handed to the pool.
    enum StreamEnd: Equatable {
        /// The connection is ready and takes another stream: tell the pool.
        case hasCapacity
        /// The connection is not taking streams; close the channel when `close` (its last stream ended).
        case notReady(close: Bool)
        /// The response refused the connection's provider token, so the connection drains from now on: tell the
        /// pool so before handing it the result, then close the channel when `close`.
        case beganDraining(reason: String, close: Bool)
    }

    /// What a request handed to ``sendRequest(_:authorization:)`` did to the connection.
    enum SendResult: Equatable {
        /// Its frames are written.
        case sent
        /// Its frames are written, and it used the last stream id: the connection drains from now on.
        case sentLastStream
    }

    /// What the TLS handshake's outcome does.
    enum HandshakeAction: Equatable {
        /// Nothing yet: the peer's first SETTINGS has not come.
        case none
        /// The connection became ready: tell the pool.
        case becameReady
        /// The peer did not choose h2: close the channel.
        case close
    }

    /// What a housekeeping tick found about PINGs.
    enum PingAction {
        /// Nothing to do.
        case none
        /// A PING was written.
        case sent
        /// The PING went unanswered past its deadline, so the connection is given up: its requests in flight, in
        /// stream order, are lost (finish them as `connectionLost`); tell the pool it drains when `wasReady`; then
        /// close the channel.
        case timedOut(lost: [PendingRequest], wasReady: Bool)
    }

    /// Requests whose deadline passed, their streams reset with CANCEL.
    struct Expired {
        /// The requests, in stream order: finish them as `deadlineExceeded`.
        var requests: [PendingRequest]
        /// What follows, once they are finished.
        var then: StreamEnd
    }

    /// What the channel's end leaves.
    struct Closed {
        /// The requests still in flight, in stream order: finish them as `connectionLost`.
        var lost: [PendingRequest]
        /// Why the connection never became ready, when it closed before it did.
        var setupError: (any Error)?
    }

    let configuration: Configuration
    /// Where the connection is in its life.
    private(set) var phase = Phase.connecting(tlsDone: false, settingsSeen: false)
    /// The requests in flight.
    var streams = ConnectionStreams()
    /// The peer's limits and the windows.
    var flow = FlowControl()
    /// PINGs sent and their acknowledgements.
    var pings: PingSchedule
    /// A header block the peer split over HEADERS and CONTINUATION frames, until its last fragment.
    var partialHeaders: PartialHeaderBlock?
    /// The HPACK encoder of requests' header blocks.
    var headerBlocks: HeaderBlockEncoder
    /// The HPACK decoder of responses' header blocks.
    var responseHeaders = ResponseHeaderDecoder()
    /// Frames written since the handler last took them.
    var outbound: ByteBuffer
    /// Whether APNs has answered 200 on this connection: it authenticated and is known good.
    var hasDelivered = false
    /// Why the connection failed, for the pool's report when it never became ready.
    var lastError: (any Error)?

    /// The client connection preface (RFC 9113 §3.4).
    static let preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

    /// A connection about to open to `authority` (`host` or `host:port`), at `now`.
    init(configuration: Configuration, authority: String, now: NIODeadline) {
        self.configuration = configuration
        self.headerBlocks = HeaderBlockEncoder(authority: authority)
        self.pings = PingSchedule(now: now)
        self.outbound = ByteBufferAllocator().buffer(capacity: 4096)
    }

    // MARK: Capacity

    /// Whether the connection takes new streams.
    var isReady: Bool { phase == .ready }

    /// Whether TLS or the HTTP/2 setup is still under way.
    var isConnecting: Bool {
        if case .connecting = phase { return true }
        return false
    }

    /// How many more streams may be opened now: within the peer's and our stream limits, and only while the
    /// peer's windows take the largest body the pool sends.
    var availableStreams: Int {
        guard isReady, flow.takes(dataBytes: configuration.largestBody) else { return 0 }
        return max(0, streamLimit - streams.count)
    }

    /// How many streams may be in flight at once now: the peer's limit within ours.
    var streamLimit: Int { min(flow.peerMaxConcurrentStreams, configuration.maximumStreams) }

    /// What follows the end of a stream in the current phase.
    var streamEnd: StreamEnd {
        switch phase {
        case .ready: .hasCapacity
        case .draining: .notReady(close: streams.isEmpty)
        case .connecting, .closed: .notReady(close: false)
        }
    }

    // MARK: Outbound bytes

    /// Whether frames wait to be written.
    var hasPendingWrites: Bool { outbound.readableBytes > 0 }

    /// The frames written so far, as one buffer; the next ones go to a new buffer from `allocator`.
    mutating func takeOutbound(allocator: ByteBufferAllocator) -> ByteBuffer {
        let bytes = outbound
        outbound = allocator.buffer(capacity: max(1024, bytes.readableBytes))
        return bytes
    }

    // MARK: Setup

    /// The channel is active: writes the preface, our SETTINGS and a WINDOW_UPDATE opening the connection window
    /// wide (only small error bodies come back, but thousands of them must not stall the connection). They wait
    /// in the TLS handler until the handshake is done.
    mutating func channelActive() {
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
        writeWindowUpdate(increment: FlowControl.inboundWindow - FlowControl.defaultWindow)
    }

    /// The TLS handshake completed, choosing the application protocol `alpn`.
    mutating func tlsHandshakeCompleted(alpn: String?) -> HandshakeAction {
        guard alpn == "h2" else {
            lastError = APNsTransportFailure.connectFailed("ALPN did not select h2")
            return .close
        }
        guard case .connecting(_, let settingsSeen) = phase else { return .none }
        phase = .connecting(tlsDone: true, settingsSeen: settingsSeen)
        return becomeReadyIfSetUp() ? .becameReady : .none
    }

    /// The peer's first SETTINGS came.
    mutating func firstSettingsReceived() -> Bool {
        guard case .connecting(let tlsDone, _) = phase else { return false }
        phase = .connecting(tlsDone: tlsDone, settingsSeen: true)
        return becomeReadyIfSetUp()
    }

    private mutating func becomeReadyIfSetUp() -> Bool {
        guard case .connecting(true, true) = phase else { return false }
        phase = .ready
        return true
    }

    /// The time for TLS and the HTTP/2 setup ran out; returns whether the connection was still setting up (and
    /// so must be closed).
    mutating func setupTimedOut() -> Bool {
        guard isConnecting else { return false }
        lastError = APNsTransportFailure.connectFailed("no TLS and HTTP/2 setup in time")
        return true
    }

    // MARK: Sending

    /// Opens a stream for `request` and writes its HEADERS (with `authorization` when the pool uses provider tokens),
    /// then its DATA with END_STREAM. The caller checked ``availableStreams`` first.
    mutating func sendRequest(_ request: PendingRequest, authorization: String?) -> SendResult {
        assert(isReady, "a request was sent on a connection that is not ready")
        let streamID = streams.open(request, limit: flow.peerMaxConcurrentStreams)
        switch request.content {
        case .notification(let n):
            let repeated = HeaderBlockEncoder.RepeatedFields(
                authorization: authorization, topic: n.topic, pushType: n.pushType.rawValue,
                priority: Self.priorityText(n.effectivePriority)
            )
            let own = HeaderBlockEncoder.OwnFields(
                expiration: n.expiration, collapseID: n.collapseID, apnsID: n.apnsID)
            writeHeaders(streamID: streamID) { encoder, buffer in
                encoder.encode(device: n.deviceToken, repeated: repeated, own: own, to: &buffer)
            }
            outbound.writeHTTP2Frame(
                type: .data, flags: HTTP2FrameFlag.endStream, streamID: streamID, payload: n.payload)
            flow.sent(dataBytes: n.payload.readableBytes)
        case .request(let r):
            writeHeaders(streamID: streamID) { encoder, buffer in
                encoder.encode(path: r.path, headers: r.headers, to: &buffer)
            }
            let size = r.body.count
            outbound.writeHTTP2FrameHeader(
                length: size, type: .data, flags: HTTP2FrameFlag.endStream, streamID: streamID)
            r.body.write(to: &outbound)
            flow.sent(dataBytes: size)
        }
        guard !streams.idsExhausted else {
            drain()
            return .sentLastStream
        }
        return .sent
    }

    /// Writes a request's HEADERS frame (and CONTINUATION frames when the block exceeds the peer's frame size).
    private mutating func writeHeaders(
        streamID: UInt32, block encode: (inout HeaderBlockEncoder, inout ByteBuffer) -> Void
    ) {
        let headerStart = outbound.writerIndex
        outbound.writeHTTP2FrameHeader(length: 0, type: .headers, flags: HTTP2FrameFlag.endHeaders, streamID: streamID)
        let blockStart = outbound.writerIndex
        encode(&headerBlocks, &outbound)
        let blockLength = outbound.writerIndex - blockStart
        if blockLength <= flow.peerMaxFrameSize {
            outbound.setInteger(UInt8(truncatingIfNeeded: blockLength >> 16), at: headerStart)
            outbound.setInteger(UInt16(truncatingIfNeeded: blockLength), at: headerStart + 1)
            return
        }
        var block = outbound.getSlice(at: blockStart, length: blockLength)!
        outbound.moveWriterIndex(to: headerStart)
        var type = HTTP2FrameType.headers
        while block.readableBytes > 0 {
            let chunk = block.readSlice(length: min(block.readableBytes, flow.peerMaxFrameSize))!
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

    /// Writes a connection-level WINDOW_UPDATE.
    mutating func writeWindowUpdate(increment: Int) {
        outbound.writeHTTP2FrameHeader(length: 4, type: .windowUpdate, flags: 0, streamID: 0)
        outbound.writeInteger(UInt32(increment))
    }

    // MARK: Ending

    /// The connection takes no new streams from now on, and closes once those in flight have ended.
    mutating func drain() {
        phase = .draining
    }

    /// The peer broke HTTP/2: writes GOAWAY with the error's code; the connection drains, and the handler closes
    /// the channel (its streams are lost when it has closed).
    mutating func protocolError(_ error: HTTP2ConnectionError) {
        lastError = error
        var payload = ByteBuffer()
        payload.writeInteger(UInt32(0))
        payload.writeInteger(error.code.rawValue)
        outbound.writeHTTP2Frame(type: .goAway, streamID: 0, payload: payload)
        drain()
    }

    /// The channel failed with `error` and is being closed.
    mutating func channelFailed(_ error: any Error) {
        lastError = error
    }

    /// The channel is closed: every stream's request is lost.
    mutating func channelInactive() -> Closed {
        let wasConnecting = isConnecting
        phase = .closed
        let lost = streams.removeAll()
        let setupError: (any Error)? =
            wasConnecting ? (lastError ?? APNsTransportFailure.connectFailed("closed before HTTP/2 was ready")) : nil
        return Closed(lost: lost, setupError: setupError)
    }

    // MARK: Time

    /// Resets the streams whose request's deadline is at or before `now` (RST_STREAM with CANCEL); nil when none.
    mutating func expireStreams(now: NIODeadline) -> Expired? {
        guard !streams.isEmpty else { return nil }
        let expired = streams.removeExpired(at: now)
        guard !expired.isEmpty else { return nil }
        for (streamID, _) in expired {
            outbound.writeHTTP2FrameHeader(length: 4, type: .rstStream, flags: 0, streamID: streamID)
            outbound.writeInteger(HTTP2ErrorCode.cancel.rawValue)
        }
        return Expired(requests: expired.map(\.request), then: streamEnd)
    }

    /// Checks the PING schedule at `now`: writes a PING when one is due, and gives the connection up when the
    /// outstanding one went unanswered past its deadline.
    mutating func checkPing(now: NIODeadline) -> PingAction {
        switch pings.check(at: now, mayPing: !isConnecting, configuration: configuration) {
        case .none:
            return .none
        case .send(let data):
            outbound.writeHTTP2FrameHeader(length: 8, type: .ping, flags: 0, streamID: 0)
            outbound.writeInteger(data)
            return .sent
        case .timedOut:
            pings.cancel()
            if isConnecting { return .timedOut(lost: [], wasReady: false) }
            let wasReady = isReady
            drain()
            return .timedOut(lost: streams.removeAll(), wasReady: wasReady)
        }
    }

    /// Notes that bytes were read at `now` (a PING is sent after a while without any).
    mutating func bytesRead(now: NIODeadline) {
        pings.read(at: now)
    }
}

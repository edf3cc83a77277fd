import Crypto
import NIOCore
import NIOHPACK

@testable import APNs

/// A monotonic clock that only moves when a test moves it: the state machines take its time as an argument.
struct ManualClock {
    private(set) var now = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    mutating func advance(_ amount: TimeAmount) {
        now = now + amount
    }
}

/// A random number generator that gives the same numbers for the same seed (SplitMix64), so that backoff delays
/// are reproducible.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The pool's connections as the pool's state machine reads them, set by the test.
struct FakeConnections: PoolConnections {
    var available: [Int]
    var ready: [Bool]
    /// Streams in flight on each slot's connection.
    var slotInFlight: [Int]
    /// Streams each slot's connection opened.
    var opened: [Int]
    /// Each slot's connection's stream limit.
    var limit: [Int]
    /// Streams in flight on connections that left their slots.
    var inFlight = 0

    init(slots: Int) {
        available = Array(repeating: 0, count: slots)
        ready = Array(repeating: false, count: slots)
        slotInFlight = Array(repeating: 0, count: slots)
        opened = Array(repeating: 0, count: slots)
        limit = Array(repeating: 0, count: slots)
    }

    /// Slot `index`'s connection is ready with `busy` of its `limit` streams in flight.
    mutating func setReady(_ index: Int, limit: Int, busy: Int) {
        ready[index] = true
        self.limit[index] = limit
        slotInFlight[index] = busy
        available[index] = limit - busy
    }

    /// Slot `index`'s connection is ready with `free` streams.
    mutating func setReady(_ index: Int, free: Int) {
        ready[index] = true
        available[index] = free
    }

    /// Slot `index` has no ready connection.
    mutating func setGone(_ index: Int) {
        ready[index] = false
        available[index] = 0
    }

    func availableStreams(slot: Int) -> Int { available[slot] }
    func isReady(slot: Int) -> Bool { ready[slot] }
    var streamsInFlight: Int { inFlight + slotInFlight.reduce(0, +) }
    func streamsInFlight(slot: Int) -> Int { slotInFlight[slot] }
    func streamsOpened(slot: Int) -> Int { opened[slot] }
    func streamLimit(slot: Int) -> Int { limit[slot] }
}

enum Fixtures {
    static let key = try! APNsSigningKey(privateKey: .init(), keyID: "KEY1234567", teamID: "TEAM123456")

    /// A pool configuration with the defaults, changed by `configure`.
    static func configuration(_ configure: (inout APNsPoolConfiguration) -> Void = { _ in }) -> APNsPoolConfiguration {
        var configuration = APNsPoolConfiguration(
            endpoint: APNsEndpoint(host: "api.push.apple.com", port: 443), credential: .token(key)
        )
        configure(&configuration)
        return configuration
    }

    /// A request whose deadline is `deadline`; its report goes nowhere (the state machines only return it).
    static func request(deadline: NIODeadline, payloadBytes: Int = 25) -> PendingRequest {
        let notification = APNsNotification(
            deviceToken: String(repeating: "ab", count: 32), bundleID: "com.example.app", pushType: .alert,
            payload: ByteBuffer(repeating: UInt8(ascii: "x"), count: payloadBytes)
        )
        return PendingRequest(
            .notification(notification), deadline: deadline, completion: .answers({ _, _ in }, position: 0))
    }

    static func frame(
        _ type: HTTP2FrameType, flags: UInt8 = 0, stream: UInt32 = 0, payload: ByteBuffer = ByteBuffer()
    ) -> HTTP2InboundFrame {
        HTTP2InboundFrame(type: type.rawValue, flags: flags, streamID: stream, payload: payload)
    }

    static func settings(_ values: [(UInt16, UInt32)]) -> HTTP2InboundFrame {
        var payload = ByteBuffer()
        for (identifier, value) in values {
            payload.writeInteger(identifier)
            payload.writeInteger(value)
        }
        return frame(.settings, payload: payload)
    }

    static func goAway(lastStreamID: UInt32, code: HTTP2ErrorCode = .noError, debug: String = "") -> HTTP2InboundFrame {
        var payload = ByteBuffer()
        payload.writeInteger(lastStreamID)
        payload.writeInteger(code.rawValue)
        payload.writeString(debug)
        return frame(.goAway, payload: payload)
    }

    static func rstStream(_ stream: UInt32, code: HTTP2ErrorCode) -> HTTP2InboundFrame {
        var payload = ByteBuffer()
        payload.writeInteger(code.rawValue)
        return frame(.rstStream, stream: stream, payload: payload)
    }

    static func ping(_ data: UInt64, ack: Bool) -> HTTP2InboundFrame {
        var payload = ByteBuffer()
        payload.writeInteger(data)
        return frame(.ping, flags: ack ? HTTP2FrameFlag.ack : 0, payload: payload)
    }

    static func data(_ stream: UInt32, _ text: String, endStream: Bool) -> HTTP2InboundFrame {
        frame(.data, flags: endStream ? HTTP2FrameFlag.endStream : 0, stream: stream, payload: ByteBuffer(string: text))
    }
}

/// APNs's side of a connection: it encodes response headers with its own HPACK table, and reads what the
/// connection wrote.
struct FakeAPNs {
    private var encoder = HPACKEncoder(allocator: ByteBufferAllocator())

    /// A response HEADERS frame with `status` (and `fields`) on `stream`.
    mutating func headers(
        _ stream: UInt32, status: Int, fields: [(String, String)] = [], endStream: Bool
    ) -> HTTP2InboundFrame {
        var block = ByteBuffer()
        try! encoder.encode(headers: HPACKHeaders([(":status", "\(status)")] + fields), to: &block)
        let flags = HTTP2FrameFlag.endHeaders | (endStream ? HTTP2FrameFlag.endStream : 0)
        return Fixtures.frame(.headers, flags: flags, stream: stream, payload: block)
    }

    /// The frames `connection` wrote since they were last taken.
    static func written(by connection: inout ConnectionStateMachine) -> [HTTP2InboundFrame] {
        frames(in: connection.takeOutbound(allocator: ByteBufferAllocator()))
    }

    /// The frames in `bytes`.
    static func frames(in bytes: ByteBuffer) -> [HTTP2InboundFrame] {
        var reader = HTTP2FrameReader()
        reader.append(bytes)
        var frames: [HTTP2InboundFrame] = []
        while let frame = try! reader.next() { frames.append(frame) }
        return frames
    }

    /// A connection that did its TLS handshake with h2 and took the peer's first SETTINGS (`settings`), at
    /// `now`, with what it wrote so far taken.
    static func readyConnection(
        at now: NIODeadline, settings: [(UInt16, UInt32)] = [(0x3, 100)],
        configuration: APNsPoolConfiguration = Fixtures.configuration()
    ) throws -> ConnectionStateMachine {
        var connection = ConnectionStateMachine(
            configuration: .init(configuration), authority: "api.push.apple.com", now: now
        )
        connection.channelActive()
        _ = connection.takeOutbound(allocator: ByteBufferAllocator())
        _ = connection.tlsHandshakeCompleted(alpn: "h2")
        _ = try connection.receive(Fixtures.settings(settings))
        _ = connection.takeOutbound(allocator: ByteBufferAllocator())
        return connection
    }
}

extension HTTP2InboundFrame {
    /// The frame's type, when it is one the engine knows.
    var knownType: HTTP2FrameType? { HTTP2FrameType(rawValue: type) }

    /// The payload's first 32-bit integer (an RST_STREAM's or a WINDOW_UPDATE's), or its first 64 bits (a PING's).
    var firstWord: UInt32? { payload.getInteger(at: payload.readerIndex, as: UInt32.self) }
}

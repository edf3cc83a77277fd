import NIOCore
import NIOPosix
import PushRelayProtocol
import SwiftProtobuf
import Synchronization

/// A TCP connection that writes whatever bytes a test gives it and reads the relay's frames, for testing
/// bad input that a real client would never send.
final class RawConnection: Sendable {
    private let channel: any Channel
    private let inbox: FrameInbox

    private init(channel: any Channel, inbox: FrameInbox) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Connects to the relay at `port`.
    static func connect(port: Int, group: any EventLoopGroup) async throws -> RawConnection {
        let inbox = FrameInbox()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FrameCollector(inbox: inbox))
                }
            }
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, inbox: inbox)
    }

    /// Says HELLO for `tenant` with `credential` and returns the answer.
    func hello(tenant: String, credential: String, requestID: UInt32 = 1) async throws -> Frame? {
        var hello = Pushrelay_V1_Hello()
        hello.minVersion = 1
        hello.maxVersion = 1
        hello.tenant = tenant
        hello.credential = credential
        try await send(FrameEncoder().frame(kind: .hello, requestID: requestID, message: hello))
        return await next()
    }

    /// Writes raw bytes.
    func send(_ bytes: ByteBuffer) async throws {
        try await channel.writeAndFlush(bytes)
    }

    /// Writes raw bytes.
    func send(_ bytes: [UInt8]) async throws {
        try await send(ByteBuffer(bytes: bytes))
    }

    /// Writes a frame with `message` as its body.
    func send(kind: FrameKind, requestID: UInt32, message: some SwiftProtobuf.Message) async throws {
        try await send(FrameEncoder().frame(kind: kind, requestID: requestID, message: message))
    }

    /// The next frame from the relay, or `nil` once the connection is closed.
    func next() async -> Frame? {
        await inbox.next()
    }

    /// The error code of the next frame, or `nil` when it is not an ERROR frame or the connection closed.
    func nextError() async -> Pushrelay_V1_ErrorCode? {
        guard let frame = await next(), frame.kind == .error else { return nil }
        return (try? frame.decode(Pushrelay_V1_Error.self))?.code
    }

    /// Sends PING and returns whether PONG came back with the nonce.
    func pingWorks(requestID: UInt32 = 999) async throws -> Bool {
        var ping = Pushrelay_V1_Ping()
        ping.nonce = 77
        try await send(kind: .ping, requestID: requestID, message: ping)
        guard let frame = await next(), frame.kind == FrameKind.ping.answer else { return false }
        return (try? frame.decode(Pushrelay_V1_Pong.self))?.nonce == 77
    }

    /// Whether the relay has closed the connection (waits until it does or a frame arrives).
    func isClosedByRelay() async -> Bool {
        await next() == nil
    }

    /// Shuts down the sending side (a TCP half-close): the relay reads its end, and the answers still come.
    func closeOutput() async throws {
        try await channel.close(mode: .output)
    }

    /// Closes the connection.
    func close() async {
        try? await channel.close()
    }
}

/// Parses the relay's bytes into frames.
private final class FrameCollector: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let inbox: FrameInbox
    private var parser = FrameParser(limits: ProtocolLimits(maxFrameBytes: 16 << 20, maxDecompressedBytes: 64 << 20))
    private var buffer = ByteBuffer()

    init(inbox: FrameInbox) {
        self.inbox = inbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        while let parsed = parser.next(from: &buffer) {
            if case .frame(let frame) = parsed { inbox.add(frame) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.close()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Half-closure is allowed (``RawConnection/closeOutput()``): the relay's close comes as the input's end.
        if let event = event as? ChannelEvent, event == .inputClosed { inbox.close() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Frames received and not yet read, and the reader waiting for the next one.
private final class FrameInbox: Sendable {
    private struct State {
        var frames: [Frame] = []
        var closed = false
        var waiter: CheckedContinuation<Frame?, Never>?
    }

    private let state = Mutex(State())

    func add(_ frame: Frame) {
        let waiter = state.withLock { state -> CheckedContinuation<Frame?, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.frames.append(frame)
            return nil
        }
        waiter?.resume(returning: frame)
    }

    func close() {
        let waiter = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    func next() async -> Frame? {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Frame?? in
                if !state.frames.isEmpty { return .some(state.frames.removeFirst()) }
                if state.closed { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}

import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PushRelayProtocol
import SwiftProtobuf
import Synchronization

/// One open connection to the relay after HELLO_OK: requests waiting for their answers by request id,
/// and result streams by subscription id.
final class ClientConnection: Sendable {
    private struct State {
        var pending: [UInt32: CheckedContinuation<Frame, any Error>] = [:]
        var streams: [UInt32: AsyncStream<Pushrelay_V1_ResultEvent>.Continuation] = [:]
        var open = true
    }

    let channel: any Channel
    let helloOK: Pushrelay_V1_HelloOk
    private let state: Mutex<State>

    private init(channel: any Channel, helloOK: Pushrelay_V1_HelloOk) {
        self.channel = channel
        self.helloOK = helloOK
        self.state = Mutex(State())
    }

    /// Whether the connection can take requests.
    var isOpen: Bool { state.withLock { $0.open } && channel.isActive }

    /// Whether request id `id` is in use on the connection: a request waiting for its answer, or a live
    /// subscription (the relay answers a reused one `DUPLICATE_REQUEST_ID`).
    func holds(_ id: UInt32) -> Bool {
        state.withLock { $0.pending[id] != nil || $0.streams[id] != nil }
    }

    /// Connects, says HELLO and waits for HELLO_OK.
    static func open(configuration: PushRelayClientConfiguration, group: any EventLoopGroup) async throws
        -> ClientConnection
    {
        let sslContext = try configuration.tls.map { try NIOSSLContext(configuration: $0) }
        // SNI carries host names only; an address is verified against the certificate without it.
        let serverName = configuration.tlsServerName ?? configuration.host
        let sniName = (try? SocketAddress(ipAddress: serverName, port: 0)) == nil ? serverName : nil
        let inbox = Inbox()
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.milliseconds(Int64(configuration.connectTimeout * 1000)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let sslContext {
                        try pipeline.addHandler(
                            try NIOSSLClientHandler(context: sslContext, serverHostname: sniName)
                        )
                    }
                    try pipeline.addHandler(ClientFrameHandler(inbox: inbox))
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .get()
        var hello = Pushrelay_V1_Hello()
        hello.minVersion = UInt32(ProtocolLimits.currentVersion)
        hello.maxVersion = UInt32(ProtocolLimits.currentVersion)
        hello.tenant = configuration.tenant
        hello.credential = configuration.credential
        hello.clientName = configuration.clientName
        hello.acceptZstd = true
        let answer = try await inbox.first(
            after: FrameEncoder().frame(kind: .hello, requestID: 1, message: hello), on: channel,
            timeout: configuration.connectTimeout
        )
        if answer.kind == .error {
            let error: Pushrelay_V1_Error = try answer.decode()
            try? await channel.close()
            throw PushRelayClientError.relay(ProtocolError(error))
        }
        guard answer.kind == FrameKind.hello.answer else {
            try? await channel.close()
            throw PushRelayClientError.protocolViolation("expected HELLO_OK, got kind \(answer.kind)")
        }
        let helloOK: Pushrelay_V1_HelloOk = try answer.decode()
        let connection = ClientConnection(channel: channel, helloOK: helloOK)
        inbox.attach(connection)
        return connection
    }

    /// Sends one request and waits for its answer (or ERROR). With `events`, the request starts a results
    /// stream whose events go there.
    func request(
        kind: FrameKind,
        requestID: UInt32,
        body: [UInt8],
        events: AsyncStream<Pushrelay_V1_ResultEvent>.Continuation?
    ) async throws(PushRelayClientError) -> Frame {
        var buffer = channel.allocator.buffer(capacity: body.count + FrameHeader.size)
        FrameEncoder(compressionThreshold: 8_192).encode(kind: kind, requestID: requestID, body: body, into: &buffer)
        do {
            return try await withCheckedThrowingContinuation { continuation in
                let accepted = state.withLock { state in
                    guard state.open else { return false }
                    state.pending[requestID] = continuation
                    if let events { state.streams[requestID] = events }
                    return true
                }
                guard accepted else {
                    continuation.resume(throwing: PushRelayClientError.connectionClosed)
                    return
                }
                channel.writeAndFlush(buffer, promise: nil)
            }
        } catch let error as PushRelayClientError {
            throw error
        } catch {
            throw .connectionClosed
        }
    }

    /// Sends GOODBYE and closes once every pending answer has come (at most 10 seconds).
    func goodbye(requestID: UInt32) async {
        channel.writeAndFlush(
            FrameEncoder().frame(kind: .goodbye, requestID: requestID, message: Pushrelay_V1_Goodbye()), promise: nil
        )
        let deadline = ContinuousClock.now + .seconds(10)
        while state.withLock({ !$0.pending.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        try? await channel.close()
    }

    /// A frame from the relay, on the channel's event loop, in order.
    fileprivate func received(_ frame: Frame) {
        if frame.kind == .resultEvent {
            guard let event: Pushrelay_V1_ResultEvent = try? frame.decode() else { return }
            _ = state.withLock { $0.streams[frame.requestID] }?.yield(event)
            return
        }
        if frame.kind == .goodbye {
            state.withLock { $0.open = false }
            return
        }
        let continuation = state.withLock { $0.pending.removeValue(forKey: frame.requestID) }
        continuation?.resume(returning: frame)
    }

    /// The connection closed: every waiting request fails, every stream ends.
    fileprivate func closed() {
        let (pending, streams) = state.withLock { state in
            state.open = false
            defer {
                state.pending = [:]
                state.streams = [:]
            }
            return (state.pending, state.streams)
        }
        for continuation in pending.values { continuation.resume(throwing: PushRelayClientError.connectionClosed) }
        for stream in streams.values { stream.finish() }
    }
}

/// Where the frame handler delivers: the HELLO answer first, then the connection.
private final class Inbox: Sendable {
    private enum Target {
        case waitingForHello(CheckedContinuation<Frame, any Error>?)
        case connection(ClientConnection)
        case closed
    }

    private let target = Mutex<Target>(.waitingForHello(nil))

    /// Writes `hello` and waits for the first frame back.
    func first(after hello: ByteBuffer, on channel: any Channel, timeout: Double) async throws -> Frame {
        let timer = channel.eventLoop.scheduleTask(in: .milliseconds(Int64(timeout * 1000))) {
            channel.close(promise: nil)
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let alreadyClosed = target.withLock { target in
                if case .closed = target { return true }
                target = .waitingForHello(continuation)
                return false
            }
            if alreadyClosed {
                continuation.resume(throwing: PushRelayClientError.connectFailed("the relay closed the connection"))
            } else {
                channel.writeAndFlush(hello, promise: nil)
            }
        }
    }

    func attach(_ connection: ClientConnection) {
        let wasClosed = target.withLock { target in
            if case .closed = target { return true }
            target = .connection(connection)
            return false
        }
        if wasClosed { connection.closed() }
    }

    func deliver(_ frame: Frame) {
        let action = target.withLock { target -> (CheckedContinuation<Frame, any Error>?, ClientConnection?) in
            switch target {
            case .waitingForHello(let continuation):
                target = .waitingForHello(nil)
                return (continuation, nil)
            case .connection(let connection):
                return (nil, connection)
            case .closed:
                return (nil, nil)
            }
        }
        action.0?.resume(returning: frame)
        action.1?.received(frame)
    }

    func close() {
        let previous = target.withLock { target in
            defer { target = .closed }
            return target
        }
        switch previous {
        case .waitingForHello(let continuation):
            continuation?.resume(throwing: PushRelayClientError.connectFailed("the relay closed the connection"))
        case .connection(let connection):
            connection.closed()
        case .closed:
            break
        }
    }
}

/// Cuts the relay's bytes into frames for the inbox.
private final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let inbox: Inbox
    private var parser = FrameParser(
        limits: ProtocolLimits(maxFrameBytes: 64 << 20, maxDecompressedBytes: 256 << 20)
    )
    private var buffer: ByteBuffer?

    init(inbox: Inbox) {
        self.inbox = inbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffer == nil {
            buffer = bytes
        } else {
            buffer!.writeBuffer(&bytes)
        }
        while var current = buffer {
            buffer = nil
            let parsed = parser.next(from: &current)
            buffer = current
            guard let parsed else { break }
            switch parsed {
            case .frame(let frame):
                inbox.deliver(frame)
            case .refused(let requestID, _, let error):
                // An answer this client cannot read fails its request rather than the connection.
                let body: [UInt8] = (try? error.wireError.serializedBytes()) ?? []
                inbox.deliver(Frame(kind: .error, requestID: requestID, body: ByteBuffer(bytes: body)))
            case .fatal:
                context.close(promise: nil)
                return
            }
        }
        if let current = buffer, current.readableBytes == 0 { buffer = nil }
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.close()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

import FCMSimulator
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// An answer as the client got it: the status, the headers and the body; or the GOAWAY that left the stream
/// unanswered.
struct TestResponse: Sendable {
    /// `:status`.
    var status: Int
    /// Every header.
    var headers: HPACKHeaders
    /// The body.
    var body: Data

    /// The body's JSON object.
    var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
}

/// Why a test request got no answer.
struct TestClientError: Error, Sendable, Hashable {
    /// The connection closed (or sent GOAWAY without this stream) before the answer.
    static let connectionClosed = TestClientError(code: "connection_closed")
    /// The server did not negotiate h2.
    static let noH2 = TestClientError(code: "no_h2")

    /// What went wrong.
    var code: String
}

/// A client of the simulator as a relay is one: TLS trusting the simulator's `ca.pem`, ALPN `h2`, one HTTP/2
/// connection whose requests go out on successive streams.
final class HTTP2TestClient: Sendable {
    private let channel: any Channel
    private let collector: NIOLoopBound<ResponseCollector>

    /// A client over `channel`, its frames read by `collector`.
    private init(channel: any Channel, collector: NIOLoopBound<ResponseCollector>) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects to `simulator`, trusting its CA, and checks that h2 was negotiated.
    static func connect(to simulator: FCMSimulator) async throws -> HTTP2TestClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(simulator.caFile)
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(ResponseCollector(eventLoop: channel.eventLoop))
                }
            }
            .connect(host: simulator.host, port: simulator.port)
            .get()
        let collector = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: ResponseCollector.self), eventLoop: channel.eventLoop)
        }.get()
        let client = HTTP2TestClient(channel: channel, collector: collector)
        let negotiated = try await client.onCollector { $0.handshake.futureResult }
        guard negotiated == "h2" else {
            try? await channel.close()
            throw TestClientError.noH2
        }
        return client
    }

    /// POSTs `body` to `path` with `headers`, and waits for the answer.
    func post(_ path: String, headers: [(String, String)] = [], body: Data) async throws -> TestResponse {
        var fields = HPACKHeaders([
            (":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "localhost"),
        ])
        fields.add(contentsOf: headers)
        let request = fields
        return try await onCollector { $0.send(request, body: body) }
    }

    /// The SETTINGS_MAX_CONCURRENT_STREAMS the server announced last, if it did.
    func maxConcurrentStreams() async throws -> Int? {
        try await onCollector { $0.eventLoop.makeSucceededFuture($0.maxConcurrentStreams) }
    }

    /// Whether the server sent GOAWAY on this connection.
    func receivedGoAway() async throws -> Bool {
        try await onCollector { $0.eventLoop.makeSucceededFuture($0.goawayReceived) }
    }

    /// Waits until the connection is closed.
    func closed() async throws {
        try await channel.closeFuture.get()
    }

    /// Closes the connection.
    func close() async {
        try? await channel.close()
    }

    /// Runs `body` with the collector on its event loop.
    private func onCollector<T: Sendable>(
        _ body: @escaping @Sendable (ResponseCollector) -> EventLoopFuture<T>
    ) async throws -> T {
        let collector = self.collector
        return try await channel.eventLoop.flatSubmit { body(collector.value) }.get()
    }
}

/// The frame-level end of ``HTTP2TestClient``, on the channel's event loop.
final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// A stream waiting for its answer.
    private struct Pending {
        var promise: EventLoopPromise<TestResponse>
        var headers: HPACKHeaders?
        var body = Data()
    }

    /// Completed with the ALPN protocol once the TLS handshake is done.
    let handshake: EventLoopPromise<String?>
    /// The channel's event loop.
    let eventLoop: any EventLoop
    /// Whether GOAWAY came.
    private(set) var goawayReceived = false
    /// The server's last SETTINGS_MAX_CONCURRENT_STREAMS.
    private(set) var maxConcurrentStreams: Int?
    private var context: ChannelHandlerContext?
    private var nextStreamID = HTTP2StreamID(1)
    private var pending: [HTTP2StreamID: Pending] = [:]

    /// A collector on `eventLoop`.
    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        handshake = eventLoop.makePromise()
    }

    /// Keeps the context to write with.
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// Writes a request on the next stream.
    func send(_ headers: HPACKHeaders, body: Data) -> EventLoopFuture<TestResponse> {
        guard let context else { return eventLoop.makeFailedFuture(TestClientError.connectionClosed) }
        let streamID = nextStreamID
        nextStreamID = HTTP2StreamID(Int(streamID) + 2)
        let promise = eventLoop.makePromise(of: TestResponse.self)
        pending[streamID] = Pending(promise: promise)
        let head = HTTP2Frame.FramePayload.Headers(headers: headers, endStream: false)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(head))), promise: nil)
        let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(data))), promise: nil)
        return promise.futureResult
    }

    /// Gathers the answers' HEADERS and DATA, and notes GOAWAY.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            pending[frame.streamID]?.headers = headers.headers
            if headers.endStream { finish(frame.streamID) }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { return }
            pending[frame.streamID]?.body.append(contentsOf: buffer.readableBytesView)
            if data.endStream { finish(frame.streamID) }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                maxConcurrentStreams = setting.value
            }
        case .goAway(let lastStreamID, _, _):
            goawayReceived = true
            for streamID in pending.keys where streamID > lastStreamID {
                pending.removeValue(forKey: streamID)?.promise.fail(TestClientError.connectionClosed)
            }
        default:
            break
        }
    }

    /// Notes the negotiated protocol.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event { handshake.succeed(negotiated) }
        context.fireUserInboundEventTriggered(event)
    }

    /// Fails what is still waiting.
    func channelInactive(context: ChannelHandlerContext) {
        handshake.fail(TestClientError.connectionClosed)
        for stream in pending.values { stream.promise.fail(TestClientError.connectionClosed) }
        pending = [:]
        context.fireChannelInactive()
    }

    /// Closes on any error.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Completes a stream's answer.
    private func finish(_ streamID: HTTP2StreamID) {
        guard let stream = pending.removeValue(forKey: streamID) else { return }
        let status = stream.headers?.first(name: ":status").flatMap { Int($0) } ?? 0
        stream.promise.succeed(TestResponse(status: status, headers: stream.headers ?? [:], body: stream.body))
    }
}

import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import Synchronization
import Testing

/// The Swift client and a relay that says GOODBYE as a request crosses it: the request fails as closed (it may or
/// may not have taken effect, so the client does not send it again), and the next one reconnects.
@Suite struct ClientGoodbyeTests {
    /// A relay stand-in: HELLO_OK to every HELLO; on its first connection, GOODBYE and a close instead of the
    /// first PING's answer; on the others, PONG.
    final class GoodbyeRelay: Sendable {
        /// Connections accepted so far.
        let connections = Atomic<Int>(0)

        /// The handler of the next connection.
        func handler() -> GoodbyeHandler {
            GoodbyeHandler(connection: connections.add(1, ordering: .relaxed).newValue)
        }
    }

    /// One connection of ``GoodbyeRelay``: reads frames and answers them.
    final class GoodbyeHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let connection: Int
        var parser = FrameParser(limits: ProtocolLimits(maxFrameBytes: 1 << 20, maxDecompressedBytes: 1 << 20))
        var buffer: ByteBuffer?

        init(connection: Int) {
            self.connection = connection
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            if buffer == nil { buffer = bytes } else { buffer!.writeBuffer(&bytes) }
            while var current = buffer {
                buffer = nil
                let parsed = parser.next(from: &current)
                buffer = current
                guard case .frame(let frame) = parsed else { break }
                answer(frame, context: context)
            }
        }

        private func answer(_ frame: Frame, context: ChannelHandlerContext) {
            let encoder = FrameEncoder()
            switch frame.kind {
            case .hello:
                let ok = encoder.frame(
                    kind: FrameKind.hello.answer, requestID: frame.requestID, message: Pushrelay_V1_HelloOk())
                context.writeAndFlush(wrapOutboundOut(ok), promise: nil)
            case .ping where connection == 1:
                var goodbye = Pushrelay_V1_Goodbye()
                goodbye.reason = "idle"
                context.writeAndFlush(
                    wrapOutboundOut(encoder.frame(kind: .goodbye, requestID: 0, message: goodbye)), promise: nil)
                context.close(promise: nil)
            case .ping:
                var pong = Pushrelay_V1_Pong()
                pong.nonce = (try? frame.decode(Pushrelay_V1_Ping.self).nonce) ?? 0
                let answer = encoder.frame(kind: FrameKind.ping.answer, requestID: frame.requestID, message: pong)
                context.writeAndFlush(wrapOutboundOut(answer), promise: nil)
            default:
                break
            }
        }
    }

    /// Runs `body` with the port of a ``GoodbyeRelay`` listening on loopback.
    private static func withGoodbyeRelay(
        _ body: @Sendable (Int, GoodbyeRelay) async throws -> Void
    ) async throws {
        let relay = GoodbyeRelay()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(relay.handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        do {
            try await body(server.localAddress!.port!, relay)
        } catch {
            try? await server.close()
            throw error
        }
        try await server.close()
    }

    /// A client of the relay stand-in on `port`.
    private static func client(port: Int, reconnect: Bool) -> PushRelayClient {
        PushRelayClient(
            configuration: .init(
                host: "127.0.0.1", port: port, tenant: "circl", credential: "secret", reconnect: reconnect,
                initialBackoff: 0.05
            )
        )
    }

    @Test func aRequestCrossingTheRelaysGoodbyeFailsAsClosedAndTheNextOneReconnects() async throws {
        try await Self.withGoodbyeRelay { (port: Int, relay: GoodbyeRelay) async throws in
            let client = Self.client(port: port, reconnect: true)
            // No answer before the close: it may or may not have taken effect, so it is not sent again.
            await #expect {
                try await client.ping(nonce: 7)
            } throws: { error in
                (error as? PushRelayClientError)?.code == .connectionClosed
            }
            #expect(relay.connections.load(ordering: .relaxed) == 1)
            // The next request goes on a new connection.
            #expect(try await client.ping(nonce: 8) == 8)
            #expect(relay.connections.load(ordering: .relaxed) == 2)
            await client.close()
        }
    }
}

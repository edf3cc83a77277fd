import NIOCore
import PushRelayProtocol

/// The only handler of a connection the relay refuses at once (over its connection cap): it writes the error frame
/// on request id 0 when the listener is plain TCP (a TLS listener closes before any handshake: the refusal costs
/// no CPU) and closes.
final class ConnectionRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let error: ProtocolError
    private let writesFrame: Bool

    /// A refusal with `error`, written as a frame when `writesFrame`.
    init(error: ProtocolError, writesFrame: Bool) {
        self.error = error
        self.writesFrame = writesFrame
    }

    func channelActive(context: ChannelHandlerContext) {
        guard writesFrame else {
            context.close(promise: nil)
            return
        }
        let frame = FrameEncoder().frame(
            kind: .error, requestID: 0, message: error.wireError)
        context.writeAndFlush(NIOAny(frame), promise: nil)
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

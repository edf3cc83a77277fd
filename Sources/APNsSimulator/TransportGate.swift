import NIOCore

/// The first handler of a connection, in front of TLS: cuts the connection off the way the faults need.
///
/// ``stall()`` stops all traffic while the socket stays open: nothing more is read (so PINGs go
/// unanswered), and whatever the handlers behind it still write is dropped. ``closeAbruptly()`` closes the
/// TCP connection from here, so that neither TLS close_notify nor HTTP/2 GOAWAY is sent.
final class TransportGate: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The error that fails writes on a stalled connection.
    struct StalledError: Error {}

    private var context: ChannelHandlerContext?
    private var stalled = false

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !stalled else { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !stalled else {
            promise?.fail(StalledError())
            return
        }
        context.write(data, promise: promise)
    }

    func read(context: ChannelHandlerContext) {
        guard !stalled else { return }
        context.read()
    }

    /// Stops reading and drops every later write. Must be called on the channel's event loop.
    func stall() {
        stalled = true
    }

    /// Closes the socket without any goodbye from TLS or HTTP/2. Must be called on the channel's event loop.
    func closeAbruptly() {
        context?.close(promise: nil)
    }
}

package import NIOCore

/// The first handler of a connection, in front of TLS: cuts the connection off the way the faults need.
///
/// ``stall()`` stops all traffic while the socket stays open: nothing more is read (so PINGs go
/// unanswered), and whatever the handlers behind it still write is dropped. ``closeAbruptly()`` closes the
/// TCP connection from here, so that neither TLS close_notify nor HTTP/2 GOAWAY is sent.
package final class TransportGate: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    /// The error that fails writes on a stalled connection.
    struct StalledError: Error {}

    private var context: ChannelHandlerContext?
    private var stalled = false

    /// A gate that lets everything through until a fault closes it.
    package init() {}

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !stalled else { return }
        context.fireChannelRead(data)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !stalled else {
            promise?.fail(StalledError())
            return
        }
        context.write(data, promise: promise)
    }

    package func read(context: ChannelHandlerContext) {
        guard !stalled else { return }
        context.read()
    }

    /// Stops reading and drops every later write. Must be called on the channel's event loop.
    package func stall() {
        stalled = true
    }

    /// Closes the socket without any goodbye from TLS or HTTP/2. Must be called on the channel's event loop.
    package func closeAbruptly() {
        context?.close(promise: nil)
    }
}

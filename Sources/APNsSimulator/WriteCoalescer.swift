package import NIOCore

/// Sits between HTTP/2 and TLS and gathers a flush's writes into one buffer, so that TLS seals them into as few
/// records as it can (one per 16 KiB), as Apple's and Google's front ends do.
///
/// `NIOHTTP2Handler` writes every frame (and a DATA frame's payload apart from its header) as its own buffer, and
/// `NIOSSLHandler` seals each buffer into its own TLS record: without this handler an FCM answer (HEADERS, then a
/// DATA frame with the message name) reached the client as three records and an APNs answer as one, and the
/// client's cost of opening records, not of its own work, told the two providers apart.
package final class WriteCoalescer: ChannelOutboundHandler {
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    /// The most bytes gathered before they go down unflushed: one TLS record's worth.
    static let largestWrite = 16_384

    private var pending: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []

    /// A coalescer with nothing gathered.
    package init() {}

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        if pending == nil {
            pending = buffer
        } else {
            pending!.writeImmutableBuffer(buffer)
        }
        if let promise { promises.append(promise) }
        if pending!.readableBytes >= Self.largestWrite { writePending(context: context) }
    }

    package func flush(context: ChannelHandlerContext) {
        writePending(context: context)
        context.flush()
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        writePending(context: context)
        context.close(mode: mode, promise: promise)
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        writePending(context: context)
    }

    /// Hands what was gathered to the next handler, completing the promises of its writes with that write.
    private func writePending(context: ChannelHandlerContext) {
        guard let buffer = pending else { return }
        pending = nil
        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0: promise = nil
        case 1: promise = promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            for waiting in promises { combined.futureResult.cascade(to: waiting) }
            promise = combined
        }
        promises.removeAll(keepingCapacity: true)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}

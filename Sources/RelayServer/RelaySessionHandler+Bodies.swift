import NIOCore
import PushRelayProtocol

/// What a frame's body costs before it is decompressed, and the inflated bytes a connection's requests hold
/// (RelayServer.docc, "Reliability and bounds").
extension RelaySessionHandler {
    /// The parser's question about a whole frame whose body has `bodyBytes` once decompressed, asked before it is
    /// decompressed. Before HELLO there is nothing to charge: the frame is within ``ConnectionBounds/helloFrameBytes``.
    /// After it, every frame pays ``RequestCost/bodyTokens(_:)`` against the credential's request limit
    /// (`RATE_LIMITED` when they are not there), and a request that will run in flight first takes its bytes from
    /// the connection's `maximumInflightBytesPerConnection` and from the process's ``InflatedBytesBudget``; when they
    /// do not fit, the frame waits and the socket is not read until answers give bytes back.
    func admit(_ header: FrameHeader, bodyBytes: Int, context: ChannelHandlerContext) -> FrameAdmission {
        guard case .open = state else { return .admit }
        let holds = header.requestID != 0 && FrameKind.requests.contains(header.kind)
        if holds {
            // One request is always taken, however large: the budget may be below max_decompressed_bytes.
            let fits = heldBytes == 0 || heldBytes + bodyBytes <= configuration.maximumInflightBytesPerConnection
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            guard
                fits,
                bodies.take(
                    bodyBytes, connectionHeld: heldBytes,
                    wake: {
                        bound.eventLoop.execute {
                            let (handler, context) = bound.value
                            handler.bytesReleased(context: context)
                        }
                    })
            else {
                waitingForBytes = true
                return .wait
            }
        }
        let tokens = RequestCost.frameTokens(bodyBytes: bodyBytes)
        if let retryAfter = service.requests.admit(limiterKey, cost: tokens) {
            if holds { bodies.release(bodyBytes) }
            if toldRateLimited {
                waitForTokens(retryAfter: retryAfter, context: context)
                return .wait
            }
            toldRateLimited = true
            return .refuse(
                ProtocolError(
                    .rateLimited, "this credential's request limit is reached (the frame costs \(tokens) tokens)",
                    retryAfterMilliseconds: retryAfter))
        }
        // A frame taken at once ends the episode: the next refusal is told again.
        if !resumedFromTokenWait { toldRateLimited = false }
        resumedFromTokenWait = false
        if holds { admittedBytes = bodyBytes }
        return .admit
    }

    /// Charges a frame the parser refused (a bad version or flags, a body beyond its ratio) its one token, so that a
    /// flood of refused frames is throttled as any other: past the limit, the connection is not read until the wait.
    func chargeRefusal(context: ChannelHandlerContext) {
        guard case .open = state, let retryAfter = service.requests.admit(limiterKey, cost: 1) else { return }
        // Each refused frame was answered its own error; past the limit the connection is just not read for a while.
        toldRateLimited = true
        waitForTokens(retryAfter: retryAfter, context: context)
    }

    /// Stops reading the connection for `retryAfter` milliseconds, the wait for the tokens of the frame it holds: it
    /// was answered `RATE_LIMITED` and kept sending. A connection is told once per episode; what it sends meanwhile
    /// stays unread (TCP back-pressure) and is taken, in order, as the tokens come back.
    private func waitForTokens(retryAfter: UInt32, context: ChannelHandlerContext) {
        guard !waitingForTokens else { return }
        waitingForTokens = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(Int64(max(retryAfter, 1)))) {
            let (handler, context) = bound.value
            handler.waitingForTokens = false
            handler.resumedFromTokenWait = true
            if handler.state != .closed { handler.processInbound(context: context) }
        }
    }

    /// Request `id`, now in flight, holds the bytes its frame was admitted with until it is answered.
    func holdAdmittedBytes(for id: UInt32) {
        guard admittedBytes > 0 else { return }
        heldBodies[id] = admittedBytes
        heldBytes += admittedBytes
        admittedBytes = 0
    }

    /// Gives back the bytes admitted for a frame that did not become a request in flight (refused, a duplicate id).
    func returnUnclaimedBytes() {
        guard admittedBytes > 0 else { return }
        bodies.release(admittedBytes)
        admittedBytes = 0
    }

    /// Gives back the bytes request `id` held, now that its answer is written (or its connection is gone); the
    /// connection reads on if it waited for them.
    func releaseBytes(of id: UInt32) {
        guard let bytes = heldBodies.removeValue(forKey: id) else { return }
        heldBytes -= bytes
        waitingForBytes = false
        bodies.release(bytes)
    }

    /// Another connection gave bytes back: a connection that waited for them reads on.
    private func bytesReleased(context: ChannelHandlerContext) {
        guard waitingForBytes, state != .closed else { return }
        waitingForBytes = false
        processInbound(context: context)
    }
}

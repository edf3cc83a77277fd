import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import SwiftProtobuf

/// The requests of an authenticated connection and its results stream.
extension RelaySessionHandler {
    // MARK: Requests

    func request(_ frame: Frame, caller: VerifiedCredential, context: ChannelHandlerContext) {
        let id = frame.requestID
        guard id != 0 else {
            writeError(
                .invalidArgument("request_id", "request id 0 is reserved for the relay"), requestID: 0,
                kind: frame.kind, context: context
            )
            return
        }
        guard !inFlight.contains(id), subscriptions[id] == nil else {
            // Answered with request id 0: the id's own answer is still to come, and a client must not take this
            // error for it. The message names the id.
            writeError(
                .duplicateRequestID(id),
                requestID: 0, kind: frame.kind, context: context
            )
            return
        }
        let kind: RequestKind
        do throws(ProtocolError) {
            kind = try RequestKind(of: frame)
        } catch {
            writeError(error, requestID: id, kind: frame.kind, context: context)
            return
        }
        // No `default`: a request kind added to ``RequestKind`` does not build until it is handled here.
        switch kind {
        case .hello:
            writeError(
                ProtocolError(.alreadyAuthenticated, "this connection already said HELLO"), requestID: id,
                kind: .hello, context: context
            )
        case .ping:
            do throws(ProtocolError) {
                let ping: Pushrelay_V1_Ping = try frame.decode(limits: configuration.limits)
                var pong = Pushrelay_V1_Pong()
                pong.nonce = ping.nonce
                answered(.ping, requestID: id, error: nil)
                write(kind: FrameKind.ping.answer, requestID: id, message: pong)
            } catch {
                writeError(error, requestID: id, kind: .ping, context: context)
            }
        case .goodbye:
            // The peer asked to close: the connection closes once what is in flight is answered, even when the
            // GOODBYE itself is refused (its reason too long, say), after that refusal.
            do throws(ProtocolError) {
                let _: Pushrelay_V1_Goodbye = try frame.request(
                    limits: configuration.limits, nowMilliseconds: Date().unixMilliseconds)
                answered(.goodbye, requestID: id, error: nil)
            } catch {
                writeError(error, requestID: id, kind: .goodbye, context: context)
            }
            beginClose(context: context, reason: nil)
        case .subscribeResults:
            subscribe(frame, tenant: caller.tenantID, context: context)
        case .unsubscribeResults:
            unsubscribe(frame, context: context)
        case .registerDevice, .unregisterDevice, .listDevices, .send, .jobStatus, .queryDeliveries, .cancelJob,
            .listNotificationTypes, .setPreferences, .getPreferences, .setMute, .clearMute, .listMutes, .setPresence:
            // The service answers these (RelayService.handle), each as a task started in its turn.
            let rows = RequestCost.rowTokens(of: frame, limits: configuration.limits)
            if rows > 0, let retryAfter = service.requests.admit(limiterKey, cost: rows) {
                writeError(
                    ProtocolError(
                        .rateLimited, "this credential's request limit is reached", retryAfterMilliseconds: retryAfter
                    ), requestID: id, kind: frame.kind, context: context
                )
                return
            }
            inFlight.insert(id)
            holdAdmittedBytes(for: id)
            if order.arrive(id, access: RequestOrder.Access(kind)) {
                start(frame, caller: caller, context: context)
            } else {
                waitingInOrder[id] = frame
            }
        }
    }

    /// Runs request `frame` (its turn in ``RequestOrder`` has come) as a task and answers it on the event loop.
    private func start(_ frame: Frame, caller: VerifiedCredential, context: ChannelHandlerContext) {
        let (id, kind) = (frame.requestID, frame.kind)
        let service = self.service
        var requestLogger = logger
        requestLogger[metadataKey: "request"] = "\(requestName(id))"
        let serviceLogger = requestLogger
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        // A SEND takes effect when its job is stored, before it waits for outcomes.
        let stored: @Sendable () -> Void = {
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.tookEffect(id, caller: caller, context: context)
            }
        }
        let future = context.eventLoop.makeFutureWithTask { () -> Result<(FrameKind, [UInt8]), ProtocolError> in
            do throws(ProtocolError) {
                return .success(
                    try await service.handle(frame, caller: caller, logger: serviceLogger, jobStored: stored))
            } catch {
                return .failure(error)
            }
        }
        future.assumeIsolated().whenSuccess { result in
            self.inFlight.remove(id)
            switch result {
            case .success(let (answerKind, body)):
                self.answered(kind, requestID: id, error: nil)
                self.write(kind: answerKind, requestID: id, body: body)
            case .failure(let error):
                self.writeError(error, requestID: id, kind: kind, context: context)
                if error.code == .authenticationFailed {
                    self.logger.info("rights lost; closing", metadata: ["error": "\(error.message)"])
                    self.close(context: context)
                }
            }
            // The answer is written: the body's bytes go back, and the requests behind it in order may start.
            self.releaseBytes(of: id)
            self.tookEffect(id, caller: caller, context: context)
            if self.state == .closing, self.inFlight.isEmpty {
                self.close(context: context)
            } else if self.state != .closed {
                self.processInbound(context: context)
            }
        }
    }

    /// Request `id` took effect: starts the requests waiting for it in ``RequestOrder``.
    private func tookEffect(_ id: UInt32, caller: VerifiedCredential, context: ChannelHandlerContext) {
        for next in order.tookEffect(id) {
            guard let frame = waitingInOrder.removeValue(forKey: next), state != .closed else { continue }
            start(frame, caller: caller, context: context)
        }
    }

    /// The request's name in logs: the connection id and the frame's request id (`c12/7`), unique in the
    /// process.
    func requestName(_ requestID: UInt32) -> String {
        "\(logger[metadataKey: "connection"] ?? "")/\(requestID)"
    }

    /// Counts an answered request of `kind` (`nil`: a frame too broken to say) and logs it at debug level
    /// with its tenant, connection and request id.
    func answered(_ kind: FrameKind?, requestID: UInt32, error: ProtocolError?) {
        RelayMetrics.request(kind, error: error)
        logger.debug(
            "request answered",
            metadata: [
                "request": "\(requestName(requestID))", "method": "\(kind?.metricName ?? "unknown")",
                "outcome": "\(error.map { $0.code.name } ?? "ok")",
            ]
        )
    }

    // MARK: Results stream

    func subscribe(_ frame: Frame, tenant: String, context: ChannelHandlerContext) {
        let request: Pushrelay_V1_SubscribeResults
        do throws(ProtocolError) {
            request = try frame.decode(limits: configuration.limits)
        } catch {
            writeError(error, requestID: frame.requestID, kind: .subscribeResults, context: context)
            return
        }
        let requestID = frame.requestID
        guard subscriptions.count < ConnectionBounds.maximumSubscriptions else {
            writeError(
                .invalidArgument(
                    "subscribe_results",
                    "a connection holds at most \(ConnectionBounds.maximumSubscriptions) subscriptions"),
                requestID: requestID, kind: .subscribeResults, context: context)
            return
        }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let id = service.results.subscribe(tenant: tenant, receipts: request.receipts) { event in
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.deliver(event, requestID: requestID, context: context)
            }
        }
        subscriptions[requestID] = id
        answered(.subscribeResults, requestID: requestID, error: nil)
        write(kind: FrameKind.subscribeResults.answer, requestID: requestID, message: Pushrelay_V1_Subscribed())
    }

    func unsubscribe(_ frame: Frame, context: ChannelHandlerContext) {
        do throws(ProtocolError) {
            let request: Pushrelay_V1_UnsubscribeResults = try frame.decode(limits: configuration.limits)
            guard let id = subscriptions.removeValue(forKey: request.subscriptionRequestID) else {
                throw ProtocolError(
                    .notFound, "no subscription with request id \(request.subscriptionRequestID)",
                    field: "unsubscribe_results.subscription_request_id")
            }
            service.results.unsubscribe(id)
            answered(.unsubscribeResults, requestID: frame.requestID, error: nil)
            write(
                kind: FrameKind.unsubscribeResults.answer, requestID: frame.requestID,
                message: Pushrelay_V1_Subscribed())
        } catch {
            writeError(error, requestID: frame.requestID, kind: .unsubscribeResults, context: context)
        }
    }

    func deliver(_ event: Pushrelay_V1_ResultEvent, requestID: UInt32, context: ChannelHandlerContext) {
        guard subscriptions[requestID] != nil, state != .closed else { return }
        if context.channel.isWritable, queuedEvents.isEmpty {
            write(kind: .resultEvent, requestID: requestID, message: event)
            return
        }
        if queuedEvents.count >= ConnectionBounds.maximumQueuedEvents {
            queuedEvents.removeFirst()
            droppedEvents += 1
        }
        queuedEvents.append((requestID, event))
    }
}

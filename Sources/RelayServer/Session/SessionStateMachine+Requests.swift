import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

extension SessionStateMachine {

    /// A request of an authenticated connection: PING, GOODBYE and the results stream's requests are answered at
    /// once; the others go in flight and start in their turn (``RequestOrder``), as tasks of the service.
    mutating func request(
        _ frame: Frame,
        caller: VerifiedCredential,
        unixMilliseconds: Int64,
        ledger: some SessionLedger
    ) -> [SessionAction] {
        let id = frame.requestID
        guard id != 0 else {
            let error = ProtocolError.invalidArgument("request_id", "request id 0 is reserved for the relay")
            return [.write(.error(error, requestID: 0, kind: frame.kind))]
        }
        guard !requests.contains(id), !subscriptions.contains(id) else {
            // Answered with request id 0: the id's own answer is still to come, and a client must not take this
            // error for it. The message names the id.
            return [.write(.error(.duplicateRequestID(id), requestID: 0, kind: frame.kind))]
        }
        let kind: RequestKind
        do throws(ProtocolError) {
            kind = try RequestKind(of: frame)
        } catch {
            return [.write(.error(error, requestID: id, kind: frame.kind))]
        }
        // No `default`: a request kind added to ``RequestKind`` does not build until it is handled here.
        switch kind {
        case .hello:
            let error = ProtocolError(.alreadyAuthenticated, "this connection already said HELLO")
            return [.write(.error(error, requestID: id, kind: .hello))]
        case .ping:
            do throws(ProtocolError) {
                let ping: Pushrelay_V1_Ping = try frame.decode(limits: configuration.limits)
                return [.write(.pong(requestID: id, nonce: ping.nonce))]
            } catch {
                return [.write(.error(error, requestID: id, kind: .ping))]
            }
        case .goodbye:
            // The peer asked to close: the connection closes once what is in flight is answered, even when the
            // GOODBYE itself is refused (its reason too long, say), after that refusal.
            var actions: [SessionAction]
            do throws(ProtocolError) {
                let _: Pushrelay_V1_Goodbye = try frame.request(
                    limits: configuration.limits, nowMilliseconds: unixMilliseconds)
                actions = [.count(.goodbye, requestID: id, error: nil)]
            } catch {
                actions = [.write(.error(error, requestID: id, kind: .goodbye))]
            }
            return actions + beginClose(reason: nil, closesNow: false)
        case .subscribeResults:
            return subscribe(frame, tenant: caller.tenantID)
        case .unsubscribeResults:
            return unsubscribe(frame)
        case .registerDevice, .unregisterDevice, .listDevices, .send, .jobStatus, .queryDeliveries, .cancelJob,
            .listNotificationTypes, .setPreferences, .getPreferences, .setMute, .clearMute, .listMutes, .setPresence:
            // The service answers these (RelayService.handle), each as a task started in its turn.
            let rows = RequestCost.rowTokens(of: frame, limits: configuration.limits)
            if rows > 0, let retryAfter = ledger.admitTokens(rows, key: limiterKey) {
                let error = ProtocolError(
                    .rateLimited, "this credential's request limit is reached", retryAfterMilliseconds: retryAfter)
                return [.write(.error(error, requestID: id, kind: frame.kind))]
            }
            let bytes = admittedBytes
            admittedBytes = 0
            guard requests.arrive(frame, kind: kind, holding: bytes) else { return [] }
            return [.startRequest(frame, caller: caller)]
        }
    }

    /// Request `id`, a SEND, took effect (its job is stored, before it waits for outcomes): the requests waiting
    /// for it in ``RequestOrder`` start.
    mutating func requestTookEffect(_ id: UInt32) -> [SessionAction] {
        startNext(after: id)
    }

    /// Request `id` of `kind` ended with `result` (its answer's kind and body, or its error): the answer is written
    /// (a lost right closes the connection after it), its body's bytes go back, the requests behind it in order
    /// may start, and the frames buffered meanwhile are handled on; a closing connection with nothing left in
    /// flight closes.
    mutating func requestEnded(
        _ id: UInt32,
        kind: FrameKind,
        result: Result<(FrameKind, [UInt8]), ProtocolError>,
        ledger: some SessionLedger
    ) -> [SessionAction] {
        let released = requests.answered(id)
        var actions: [SessionAction] = []
        switch result {
        case .success(let (answerKind, body)):
            actions.append(
                state == .closed
                    ? .count(kind, requestID: id, error: nil)
                    : .write(.answer(request: kind, requestID: id, kind: answerKind, body: body)))
        case .failure(let error):
            guard state != .closed else {
                actions.append(.count(kind, requestID: id, error: error))
                break
            }
            actions.append(.write(.error(error, requestID: id, kind: kind)))
            if error.code == .authenticationFailed {
                actions.append(.log(.rightsLost(message: error.message)))
                actions += close()
            }
        }
        // The answer is written: the body's bytes go back, and the requests behind it in order may start.
        if released > 0 {
            reading.waitingForBytes = false
            ledger.releaseBodyBytes(released)
        }
        actions += startNext(after: id)
        if case .closing = state, requests.isEmpty {
            actions += close()
        } else if state != .closed {
            actions.append(.handleBufferedFrames)
        }
        return actions
    }

    /// Starts the requests waiting in ``RequestOrder`` for request `id`, which took effect; none once closed.
    mutating func startNext(after id: UInt32) -> [SessionAction] {
        let next = requests.tookEffect(id)
        guard !next.isEmpty, let caller = state.caller else { return [] }
        return next.map { .startRequest($0, caller: caller) }
    }
}

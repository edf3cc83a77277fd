import APNs
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL

/// Keeps the connection-level inbound flow-control window open.
///
/// Without a stream multiplexer nobody else replenishes it: once the peer has sent a window's worth of
/// DATA it would stall. This grows the window to ``target`` and tops it up whenever less than half is left,
/// judging by the window sizes NIOHTTP2Handler reports in `NIOHTTP2WindowUpdatedEvent`s.
///
/// Those events are delivered after the fact: events created before our WINDOW_UPDATE was processed still
/// report the old window. So after an update, events are ignored until one reports a window larger than
/// the one the update was based on. The first event after the update always does: the update adds more
/// than half the target, and the peer cannot have used more than the old window.
package struct ConnectionWindow {
    /// The window size kept available to the peer.
    package let target: Int
    /// The window size the last WINDOW_UPDATE was based on, until an event shows the update applied.
    private var basis: Int?

    /// A window manager keeping `target` bytes open.
    package init(target: Int) {
        self.target = target
    }

    /// The WINDOW_UPDATE increment due now that an event reports the window as `size`, if any.
    package mutating func increment(forWindowSize size: Int) -> Int? {
        if let basis {
            guard size > basis else { return nil }
            self.basis = nil
        }
        guard size < target / 2 else { return nil }
        basis = size
        return target - size
    }
}

/// Serves one HTTP/2 connection at the frame level: gathers each stream's request, judges it, injects the
/// configured faults and answers, all on the connection's event loop.
///
/// Responses are written as requests complete and flushed once per read batch (or once per delayed
/// response when a latency is configured).
final class SimulatorConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What the connection still does.
    private enum Phase {
        /// Serving every stream.
        case serving
        /// GOAWAY sent: serving the streams up to `lastStreamID`, then closing.
        case goingAway(lastStreamID: HTTP2StreamID)
        /// Closed, dropped or stalled: answering nothing.
        case finished
    }

    /// A connection-level fault due after a response.
    private enum ConnectionFault {
        case goaway, drop, stall
    }

    /// A request whose headers arrived and whose body is still coming.
    private struct PendingRequest {
        var headers: HPACKHeaders
        var payload = RequestPayload()
    }

    /// A decided answer to one stream.
    private struct Answer {
        var streamID: HTTP2StreamID
        var status: Int
        var reason: APNsReason?
        var timestamp: Int64?
        var apnsID: String
        var fault: ConnectionFault?
        var record: APNsSimulatorRequest?
    }

    private static let goawayData = ByteBuffer(string: #"{"reason":"Shutdown"}"#)

    private let core: SimulatorCore
    private let connectionID: Int
    private let tls: NIOSSLHandler
    private let gate: TransportGate
    private var window = ConnectionWindow(target: 1 << 20)
    /// Draws the random faults.
    private var random: SplitMix64
    /// Makes the `apns-id`s of requests without one.
    private var identifiers: SplitMix64
    private var phase = Phase.serving
    private var credentials = ConnectionCredentials()
    private var pending: [HTTP2StreamID: PendingRequest] = [:]
    /// Streams whose answer waits for the configured latency.
    private var delayed: Set<HTTP2StreamID> = []
    /// The answers waiting for the configured latency, by the millisecond of uptime they are due in: one timer,
    /// one write of the statistics and one flush for each millisecond's answers, not for each answer.
    private var delayLine: [UInt64: [Answer]] = [:]
    private var streamsOpened = 0
    private var requestsReceived = 0
    private var streamLimitRaised = false
    /// The faults read for the current read batch.
    private var batchFaults: APNsSimulatorFaults?
    private var report = ConnectionReport()
    private var needsFlush = false

    /// A handler for connection `connectionID`, using the connection's TLS handler (for the client
    /// certificate) and transport gate (for the stall and drop faults).
    init(core: SimulatorCore, connectionID: Int, tls: NIOSSLHandler, gate: TransportGate) {
        self.core = core
        self.connectionID = connectionID
        self.tls = tls
        self.gate = gate
        self.random = SplitMix64(seed: core.seed &+ UInt64(connectionID) &* 0x9E37_79B9_7F4A_7C15)
        self.identifiers = SplitMix64(seed: UInt64.random(in: .min ... .max))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            receiveHeaders(headers, streamID: frame.streamID, context: context)
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { return }
            receiveData(buffer, endStream: data.endStream, streamID: frame.streamID, context: context)
        default:
            // SETTINGS, PING, WINDOW_UPDATE, RST_STREAM and GOAWAY are handled by NIOHTTP2Handler.
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        batchFaults = nil
        flush(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let event as NIOHTTP2WindowUpdatedEvent where event.streamID == .rootStream:
            if let size = event.inboundWindowSize, let increment = window.increment(forWindowSize: size) {
                let update = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
                context.write(wrapOutboundOut(update), promise: nil)
                needsFlush = true
            }
        case let event as StreamClosedEvent:
            // The client reset the stream, or our GOAWAY dropped it.
            pending[event.streamID] = nil
            closeIfDrained(context: context)
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .finished
        pending = [:]
        core.merge(&report, connectionID: connectionID)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            // NIOHTTP2Handler has reset the stream (e.g. one stream too many); the connection lives on.
            pending[error.streamID] = nil
            if error.baseError is NIOHTTP2Errors.MaxStreamsViolation {
                report.streamsOverLimit += 1
                core.merge(&report, connectionID: connectionID)
            }
            return
        }
        // Connection-level HTTP/2 errors, TLS errors, unclean shutdowns: the connection is over.
        context.close(promise: nil)
    }

    // MARK: Requests

    private func receiveHeaders(
        _ headers: HTTP2Frame.FramePayload.Headers, streamID: HTTP2StreamID, context: ChannelHandlerContext
    ) {
        guard answers(streamID) else { return }
        if pending[streamID] != nil {
            // Trailers end the request.
            if headers.endStream, let request = pending.removeValue(forKey: streamID) {
                complete(request, streamID: streamID, context: context)
            }
            return
        }
        streamsOpened += 1
        if let every = faults.refuseStreamEvery, every > 0, streamsOpened % every == 0 {
            let reset = HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream))
            context.write(wrapOutboundOut(reset), promise: nil)
            report.streamsRefused += 1
            needsFlush = true
            return
        }
        let request = PendingRequest(headers: headers.headers)
        if headers.endStream {
            complete(request, streamID: streamID, context: context)
        } else {
            pending[streamID] = request
        }
    }

    private func receiveData(
        _ buffer: ByteBuffer, endStream: Bool, streamID: HTTP2StreamID, context: ChannelHandlerContext
    ) {
        guard answers(streamID), pending[streamID] != nil else { return }
        pending[streamID]!.payload.append(buffer)
        if endStream, let request = pending.removeValue(forKey: streamID) {
            complete(request, streamID: streamID, context: context)
        }
    }

    /// Judges a complete request, applies the faults, and answers now or after the latency.
    private func complete(_ request: PendingRequest, streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        requestsReceived += 1
        report.requestsReceived += 1
        let faults = self.faults
        let now = core.clock.now()
        if case .undetermined = credentials.mode {
            if let certificate = tls.peerCertificate {
                credentials.mode = .certificate(topic: SimulatorCertificateAuthority.topic(of: certificate))
            } else {
                credentials.mode = .token
            }
        }
        let head = RequestHead(request.headers)
        let verdict = core.validator.judge(head, payload: request.payload, credentials: &credentials, now: now)
        if verdict.invalidJSON { report.invalidJSONPayloads += 1 }
        if verdict.tokenNewlyPresented, let token = verdict.token, let authorization = head.authorization {
            report.tokenSightings.append(
                APNsSimulatorTokenSighting(
                    token: String(authorization.dropFirst(7)), keyID: token.keyID, issuedAt: token.issuedAt,
                    firstSeen: now
                )
            )
        }
        var answer = Answer(
            streamID: streamID,
            status: verdict.status,
            reason: verdict.reason,
            apnsID: head.apnsID.flatMap { UUID(uuidString: $0) == nil ? nil : $0 } ?? identifiers.nextUUIDString()
        )
        if answer.status == 200 { injectFault(into: &answer, deviceToken: verdict.deviceToken, faults: faults) }
        answer.fault = connectionFault(faults)
        if core.keepsRequests {
            answer.record = APNsSimulatorRequest(
                connectionID: connectionID,
                streamID: Int(streamID),
                method: head.method ?? "",
                path: head.path ?? "",
                deviceToken: verdict.deviceToken,
                headers: request.headers.map { ($0.name, $0.value) },
                keyID: verdict.token?.keyID,
                issuer: verdict.token?.teamID,
                issuedAt: verdict.token?.issuedAt,
                certificateTopic: { if case .certificate(let topic) = credentials.mode { topic } else { nil } }(),
                payload: request.payload.bytes.map { Array($0.readableBytesView) } ?? [],
                apnsID: answer.apnsID,
                status: answer.status,
                reason: answer.reason,
                receivedAt: now
            )
        }
        guard faults.latency > .zero || faults.latencyJitter > .zero else {
            send(answer, context: context)
            return
        }
        var delay = faults.latency
        if faults.latencyJitter > .zero {
            delay = delay + .nanoseconds(Int64.random(in: 0...faults.latencyJitter.nanoseconds, using: &random))
        }
        delayed.insert(streamID)
        let due = (NIODeadline.now() + delay).uptimeNanoseconds
        let millisecond = due / 1_000_000 + (due % 1_000_000 == 0 ? 0 : 1)
        if delayLine[millisecond] == nil {
            context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(millisecond * 1_000_000)) {
                for answer in self.delayLine.removeValue(forKey: millisecond) ?? [] {
                    self.delayed.remove(answer.streamID)
                    self.send(answer, context: context)
                }
                self.flush(context: context)
            }
        }
        delayLine[millisecond, default: []].append(answer)
    }

    /// The 410 of an unregistered device token, or a random 503, 500 or 429.
    private func injectFault(into answer: inout Answer, deviceToken: String?, faults: APNsSimulatorFaults) {
        if faults.scriptedTokens, let deviceToken, let script = ScriptedToken(deviceToken) {
            answer.status = script.reason.status ?? 400
            answer.reason = script.reason
            if script.reason == .unregistered { answer.timestamp = Int64(Date().timeIntervalSince1970 * 1000) }
            return
        }
        if let deviceToken, let timestamp = faults.unregisteredTokens[deviceToken] {
            answer.status = 410
            answer.reason = .unregistered
            answer.timestamp = timestamp
            return
        }
        guard faults.rate503 > 0 || faults.rate500 > 0 || faults.rate429 > 0 else { return }
        let draw = Double.random(in: 0..<1, using: &random)
        if draw < faults.rate503 {
            answer.reason = .serviceUnavailable
        } else if draw < faults.rate503 + faults.rate500 {
            answer.reason = .internalServerError
        } else if draw < faults.rate503 + faults.rate500 + faults.rate429 {
            answer.reason = .tooManyRequests
        }
        if let reason = answer.reason { answer.status = reason.status ?? 500 }
    }

    /// The connection-level fault due after the request just counted, if any.
    private func connectionFault(_ faults: APNsSimulatorFaults) -> ConnectionFault? {
        if requestsReceived == faults.dropConnectionAfter { return .drop }
        if requestsReceived == faults.stallAfter { return .stall }
        if requestsReceived == faults.goawayAfter { return .goaway }
        return nil
    }

    // MARK: Responses

    /// Writes an answer (unless its stream is no longer answered), then the fault that follows it.
    private func send(_ answer: Answer, context: ChannelHandlerContext) {
        guard answers(answer.streamID) else { return }
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(answer.status))
        headers.add(name: "apns-id", value: answer.apnsID, indexing: .nonIndexable)
        if let reason = answer.reason {
            headers.add(name: "content-type", value: "application/json")
            var body = context.channel.allocator.buffer(capacity: 64)
            body.writeString(#"{"reason":""#)
            body.writeString(reason.rawValue)
            if let timestamp = answer.timestamp {
                body.writeString(#"","timestamp":"#)
                body.writeString(String(timestamp))
                body.writeString("}")
            } else {
                body.writeString(#""}"#)
            }
            let head = HTTP2Frame(streamID: answer.streamID, payload: .headers(.init(headers: headers)))
            let data = HTTP2Frame(
                streamID: answer.streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true))
            )
            context.write(wrapOutboundOut(head), promise: nil)
            context.write(wrapOutboundOut(data), promise: nil)
        } else {
            let head = HTTP2Frame(
                streamID: answer.streamID, payload: .headers(.init(headers: headers, endStream: true))
            )
            context.write(wrapOutboundOut(head), promise: nil)
        }
        needsFlush = true
        report.responded(status: answer.status, reason: answer.reason)
        if let record = answer.record { report.requests.append(record) }
        if answer.status == 200 && !streamLimitRaised {
            // Like APNs: one stream until a request succeeds, then the full limit.
            streamLimitRaised = true
            let limit = HTTP2Setting(parameter: .maxConcurrentStreams, value: core.maxConcurrentStreams)
            let settings = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([limit])))
            context.write(wrapOutboundOut(settings), promise: nil)
        }
        switch answer.fault {
        case nil:
            closeIfDrained(context: context)
        case .goaway:
            goAway(lastStreamID: answer.streamID, context: context)
        case .drop:
            report.connectionsDropped += 1
            flush(context: context)
            phase = .finished
            gate.closeAbruptly()
        case .stall:
            report.connectionsStalled += 1
            flush(context: context)
            phase = .finished
            gate.stall()
        }
    }

    /// Sends GOAWAY: streams after `lastStreamID` are dropped unanswered, the others are still answered.
    private func goAway(lastStreamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard case .serving = phase else { return }
        phase = .goingAway(lastStreamID: lastStreamID)
        pending = pending.filter { $0.key <= lastStreamID }
        delayed = delayed.filter { $0 <= lastStreamID }
        let goaway = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: Self.goawayData)
        )
        context.write(wrapOutboundOut(goaway), promise: nil)
        report.goawaysSent += 1
        needsFlush = true
        closeIfDrained(context: context)
    }

    /// After GOAWAY, closes the connection once every stream up to the last one has been answered.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard case .goingAway = phase, pending.isEmpty, delayed.isEmpty else { return }
        phase = .finished
        // Close only once everything written has reached the socket: closing at once would discard
        // answers still queued in the channel, and the client would resend requests we counted as done.
        // A PING's write completes after every frame written before it.
        core.merge(&report, connectionID: connectionID)
        needsFlush = false
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false))),
            promise: written
        )
        written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    // MARK: Helpers

    /// Whether `streamID` is still served.
    private func answers(_ streamID: HTTP2StreamID) -> Bool {
        switch phase {
        case .serving: true
        case .goingAway(let lastStreamID): streamID <= lastStreamID
        case .finished: false
        }
    }

    /// The faults in force for this read batch (read once per batch: changes apply from the next one).
    private var faults: APNsSimulatorFaults {
        if let batchFaults { return batchFaults }
        let faults = core.faults
        batchFaults = faults
        return faults
    }

    /// Adds what this connection saw since the last report to the simulator's statistics.
    func mergeStatistics() {
        core.merge(&report, connectionID: connectionID)
    }

    /// Reports to the simulator's statistics, then flushes what was written.
    private func flush(context: ChannelHandlerContext) {
        core.merge(&report, connectionID: connectionID)
        if needsFlush {
            needsFlush = false
            context.flush()
        }
    }
}

/// Sits between TLS and HTTP/2 and reports a connection's statistics at the end of each read batch,
/// before `NIOHTTP2Handler` flushes the batch's responses: a client never sees an answer that the
/// simulator's statistics do not count yet.
final class StatisticsBarrier: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let handler: SimulatorConnectionHandler

    init(handler: SimulatorConnectionHandler) {
        self.handler = handler
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        handler.mergeStatistics()
        context.fireChannelReadComplete()
    }
}

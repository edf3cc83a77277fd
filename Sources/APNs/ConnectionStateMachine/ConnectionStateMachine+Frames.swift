import Foundation
import NIOCore

/// A header block the peer split over HEADERS and CONTINUATION frames.
struct PartialHeaderBlock {
    /// The stream the block belongs to.
    var streamID: UInt32
    /// Whether the HEADERS frame ended the stream.
    var endStream: Bool
    /// The fragments so far.
    var block: ByteBuffer
}

extension ConnectionStateMachine {
    /// What a frame read from the peer does, besides the frames it makes the connection write.
    enum FrameAction {
        /// Nothing more.
        case none
        /// A stream ended: hand its request's result to the pool, then do what `then` says.
        case finish(PendingRequest, Result<APNsResponse, APNsTransportFailure>, then: StreamEnd)
        /// SETTINGS applied (and acknowledged). `peerMaxConcurrentStreams` is the peer's new stream limit when it
        /// changed; `readiness` says whether the connection became ready or, ready already, may take more streams.
        case settings(peerMaxConcurrentStreams: Int?, readiness: Readiness)
        /// A connection-level WINDOW_UPDATE opened the window of a ready connection: it may take more streams.
        case hasCapacity
        /// GOAWAY: the connection drains.
        case goAway(GoAway)
    }

    /// How SETTINGS changed the connection's readiness.
    enum Readiness: Equatable {
        /// Not at all.
        case unchanged
        /// It became ready: the first SETTINGS after an h2 handshake.
        case becameReady
        /// It is ready and may take more streams than before.
        case hasCapacity
    }

    /// What a GOAWAY leaves.
    struct GoAway {
        /// The last stream the peer may have processed; those above it it did not.
        var lastStreamID: UInt32
        /// APNs's reason from the debug data, or the error code's name.
        var reason: String
        /// The requests on streams above `lastStreamID`, in stream order: finish them as not processed, then
        /// tell the pool the connection drains.
        var unprocessed: [PendingRequest]
        /// Whether no stream is left, so that the channel closes now; those at or below `lastStreamID` are
        /// otherwise allowed to finish, and the channel closes after the last.
        var close: Bool
    }

    /// The largest header block accepted across HEADERS and CONTINUATION frames.
    static let maximumHeaderBlock = 65_536

    /// Takes one frame from the peer. Throws when the frame breaks HTTP/2; the handler then calls
    /// ``protocolError(_:)`` and closes the channel.
    mutating func receive(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) -> FrameAction {
        if let partial = partialHeaders {
            return try receivedContinuation(frame, of: partial)
        }
        let type = HTTP2FrameType(rawValue: frame.type)
        switch type {
        case .settings, .ping, .goAway:
            guard frame.streamID == 0 else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "\(type!) on stream \(frame.streamID)")
            }
        case .headers, .data, .rstStream, .continuation, .pushPromise:
            guard frame.streamID != 0 else {
                throw HTTP2ConnectionError(code: .protocolError, reason: "\(type!) on stream 0")
            }
        case .windowUpdate, .priority, nil:
            break
        }
        switch type {
        case .headers:
            var block = frame.payload
            try block.stripHTTP2Padding(flags: frame.flags, hasPriority: frame.has(HTTP2FrameFlag.priority))
            let endStream = frame.has(HTTP2FrameFlag.endStream)
            guard frame.has(HTTP2FrameFlag.endHeaders) else {
                partialHeaders = PartialHeaderBlock(streamID: frame.streamID, endStream: endStream, block: block)
                return .none
            }
            return try receivedHeaderBlock(block, streamID: frame.streamID, endStream: endStream)
        case .data:
            return try receivedData(frame)
        case .rstStream:
            guard frame.payload.readableBytes == 4,
                let code = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "RST_STREAM of \(frame.payload.readableBytes) bytes")
            }
            guard let stream = streams.remove(frame.streamID) else { return .none }
            let failure: APNsTransportFailure =
                code == HTTP2ErrorCode.refusedStream.rawValue
                ? .notProcessed("REFUSED_STREAM") : .streamReset(HTTP2ErrorCode.name(code))
            return .finish(stream.request, .failure(failure), then: streamEnd)
        case .settings:
            return try receivedSettings(frame)
        case .ping:
            guard frame.payload.readableBytes == 8,
                let data = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt64.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "PING of \(frame.payload.readableBytes) bytes")
            }
            if frame.has(HTTP2FrameFlag.ack) {
                pings.acknowledge(data)
            } else {
                outbound.writeHTTP2Frame(type: .ping, flags: HTTP2FrameFlag.ack, streamID: 0, payload: frame.payload)
            }
            return .none
        case .goAway:
            var payload = frame.payload
            guard let lastStreamID = payload.readInteger(as: UInt32.self),
                let code = payload.readInteger(as: UInt32.self)
            else { throw HTTP2ConnectionError(code: .frameSizeError, reason: "short GOAWAY") }
            return receivedGoAway(lastStreamID: lastStreamID & 0x7FFF_FFFF, errorCode: code, debugData: payload)
        case .windowUpdate:
            guard frame.payload.readableBytes == 4,
                let increment = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self)
            else {
                throw HTTP2ConnectionError(
                    code: .frameSizeError, reason: "WINDOW_UPDATE of \(frame.payload.readableBytes) bytes")
            }
            // Stream windows are not tracked (``FlowControl``): only the connection's counts.
            guard frame.streamID == 0 else { return .none }
            try flow.windowUpdate(increment: increment)
            return isReady ? .hasCapacity : .none
        case .pushPromise:
            throw HTTP2ConnectionError(code: .protocolError, reason: "PUSH_PROMISE although push is disabled")
        case .continuation:
            throw HTTP2ConnectionError(code: .protocolError, reason: "CONTINUATION without HEADERS")
        case .priority, nil:
            return .none  // PRIORITY and unknown frame types are ignored (RFC 9113 §5.5).
        }
    }

    private mutating func receivedContinuation(
        _ frame: HTTP2InboundFrame, of partial: PartialHeaderBlock
    ) throws(HTTP2ConnectionError) -> FrameAction {
        guard frame.type == HTTP2FrameType.continuation.rawValue, frame.streamID == partial.streamID else {
            throw HTTP2ConnectionError(code: .protocolError, reason: "header block interrupted")
        }
        var block = partial.block
        var fragment = frame.payload
        guard block.readableBytes + fragment.readableBytes <= Self.maximumHeaderBlock else {
            throw HTTP2ConnectionError(code: .protocolError, reason: "header block over 64 KiB")
        }
        block.writeBuffer(&fragment)
        guard frame.has(HTTP2FrameFlag.endHeaders) else {
            partialHeaders?.block = block
            return .none
        }
        partialHeaders = nil
        return try receivedHeaderBlock(block, streamID: partial.streamID, endStream: partial.endStream)
    }

    private mutating func receivedHeaderBlock(
        _ block: ByteBuffer, streamID: UInt32, endStream: Bool
    ) throws(HTTP2ConnectionError) -> FrameAction {
        // Every block is decoded, even for a stream we no longer track, to keep HPACK state in step.
        let fields: ResponseHeaderDecoder.Fields
        do {
            fields = try responseHeaders.decode(block)
        } catch {
            throw HTTP2ConnectionError(code: .compressionError, reason: "\(error)")
        }
        guard var stream = streams[streamID] else { return .none }
        if let status = fields.status { stream.status = status }
        if let apnsID = fields.apnsID { stream.apnsID = apnsID }
        if let retryAfter = fields.retryAfter { stream.retryAfter = retryAfter }
        guard endStream else {
            streams[streamID] = stream
            return .none
        }
        streams[streamID] = nil
        return complete(stream)
    }

    private mutating func receivedData(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) -> FrameAction {
        if let increment = flow.received(dataBytes: frame.payload.readableBytes) {
            writeWindowUpdate(increment: increment)
        }
        guard var stream = streams[frame.streamID] else { return .none }
        var data = frame.payload
        try data.stripHTTP2Padding(flags: frame.flags, hasPriority: false)
        // An APNs error body is a few dozen bytes, an FCM or OAuth answer a few hundred: keep at most 16 KiB.
        if stream.body == nil {
            stream.body = data
        } else if stream.body!.readableBytes < Self.keptBodyBytes {
            stream.body!.writeBuffer(&data)
        }
        guard frame.has(HTTP2FrameFlag.endStream) else {
            streams[frame.streamID] = stream
            return .none
        }
        streams[frame.streamID] = nil
        return complete(stream)
    }

    /// The most bytes of a response body kept for the caller.
    static let keptBodyBytes = 16_384

    /// The response of a stream that ended; a refused provider token makes the connection drain.
    private mutating func complete(_ stream: ConnectionStreams.Stream) -> FrameAction {
        var response = APNsResponse(status: stream.status ?? 0, apnsID: stream.apnsID)
        response.retryAfter = stream.retryAfter
        if case .request = stream.request.content {
            // Another API's answer: its body is the caller's to read, its status says what it means.
            if (200..<300).contains(response.status) { hasDelivered = true }
            response.body = stream.body
            return .finish(stream.request, .success(response), then: streamEnd)
        }
        if response.status == 200 {
            hasDelivered = true
        } else if let body = stream.body {
            let error = Self.decodeErrorBody(body)
            response.reason = error.reason
            response.timestampMilliseconds = error.timestamp
        }
        if response.invalidatesConnection, isReady {
            // The connection is replaced, and its requests go out again on another one.
            drain()
            let reason = response.reason?.rawValue ?? "provider token refused"
            return .finish(
                stream.request, .success(response), then: .beganDraining(reason: reason, close: streams.isEmpty))
        }
        return .finish(stream.request, .success(response), then: streamEnd)
    }

    private struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Int64?
    }

    /// The reason and timestamp of an APNs error body (`{"reason": "...", "timestamp": ms}`), as far as it has them.
    static func decodeErrorBody(_ body: ByteBuffer) -> (reason: APNsReason?, timestamp: Int64?) {
        guard let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView)) else {
            return (nil, nil)
        }
        return (decoded.reason.map(APNsReason.init(rawValue:)), decoded.timestamp)
    }

    private mutating func receivedSettings(_ frame: HTTP2InboundFrame) throws(HTTP2ConnectionError) -> FrameAction {
        if frame.has(HTTP2FrameFlag.ack) { return .none }
        var payload = frame.payload
        guard payload.readableBytes % 6 == 0 else {
            throw HTTP2ConnectionError(code: .frameSizeError, reason: "SETTINGS of \(payload.readableBytes) bytes")
        }
        var changedStreamLimit: Int?
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case 0x1:  // HEADER_TABLE_SIZE: our encoder's table must fit the peer's.
                try? headerBlocks.setDynamicTableSize(Int(value))
            case 0x3:  // MAX_CONCURRENT_STREAMS
                if Int(value) != flow.peerMaxConcurrentStreams { changedStreamLimit = Int(value) }
                flow.peerMaxConcurrentStreams = Int(value)
            case 0x4:  // INITIAL_WINDOW_SIZE
                try flow.setPeerInitialStreamWindow(value)
            case 0x5:  // MAX_FRAME_SIZE
                try flow.setPeerMaxFrameSize(value)
            default:
                break
            }
        }
        outbound.writeHTTP2FrameHeader(length: 0, type: .settings, flags: HTTP2FrameFlag.ack, streamID: 0)
        let readiness: Readiness
        if isConnecting {
            readiness = firstSettingsReceived() ? .becameReady : .unchanged
        } else {
            readiness = isReady ? .hasCapacity : .unchanged
        }
        return .settings(peerMaxConcurrentStreams: changedStreamLimit, readiness: readiness)
    }

    private mutating func receivedGoAway(lastStreamID: UInt32, errorCode: UInt32, debugData: ByteBuffer) -> FrameAction
    {
        let reason = Self.decodeErrorBody(debugData).reason?.rawValue ?? HTTP2ErrorCode.name(errorCode)
        guard phase != .closed else { return .none }
        drain()
        let unprocessed = streams.removeAll(above: lastStreamID)
        return .goAway(
            GoAway(lastStreamID: lastStreamID, reason: reason, unprocessed: unprocessed, close: streams.isEmpty))
    }
}

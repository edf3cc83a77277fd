import NIOCore

/// The HTTP/2 frame types the engine reads and writes (RFC 9113 §6).
enum HTTP2FrameType: UInt8 {
    case data = 0x0
    case headers = 0x1
    case priority = 0x2
    case rstStream = 0x3
    case settings = 0x4
    case pushPromise = 0x5
    case ping = 0x6
    case goAway = 0x7
    case windowUpdate = 0x8
    case continuation = 0x9
}

/// HTTP/2 frame flags.
enum HTTP2FrameFlag {
    /// END_STREAM on DATA and HEADERS.
    static let endStream: UInt8 = 0x1
    /// ACK on SETTINGS and PING.
    static let ack: UInt8 = 0x1
    /// END_HEADERS on HEADERS and CONTINUATION.
    static let endHeaders: UInt8 = 0x4
    /// PADDED on DATA and HEADERS.
    static let padded: UInt8 = 0x8
    /// PRIORITY on HEADERS.
    static let priority: UInt8 = 0x20
}

/// HTTP/2 error codes the engine sends or recognises (RFC 9113 §7).
enum HTTP2ErrorCode: UInt32 {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case flowControlError = 0x3
    case frameSizeError = 0x6
    case refusedStream = 0x7
    case cancel = 0x8
    case compressionError = 0x9

    /// The name of a code, known or not, for logs and failures.
    static func name(_ code: UInt32) -> String {
        switch HTTP2ErrorCode(rawValue: code) {
        case .noError: "NO_ERROR"
        case .protocolError: "PROTOCOL_ERROR"
        case .internalError: "INTERNAL_ERROR"
        case .flowControlError: "FLOW_CONTROL_ERROR"
        case .frameSizeError: "FRAME_SIZE_ERROR"
        case .refusedStream: "REFUSED_STREAM"
        case .cancel: "CANCEL"
        case .compressionError: "COMPRESSION_ERROR"
        case nil: "0x" + String(code, radix: 16)
        }
    }
}

/// A violation of HTTP/2 by the peer: the connection is closed with GOAWAY and this code.
struct HTTP2ConnectionError: Error, CustomStringConvertible {
    var code: HTTP2ErrorCode
    var reason: String
    var description: String { "HTTP/2 \(HTTP2ErrorCode.name(code.rawValue)): \(reason)" }
}

/// One frame as read: its 9-byte header and its payload (a slice of the read buffer, not a copy).
struct HTTP2InboundFrame {
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: ByteBuffer

    func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
}

/// Cuts the decrypted byte stream of a connection into HTTP/2 frames.
struct HTTP2FrameReader {
    /// The largest frame payload we accept: the SETTINGS_MAX_FRAME_SIZE we advertise (the default).
    static let maximumFrameSize = 16_384
    private var buffer: ByteBuffer?

    /// Adds bytes read from the connection.
    mutating func append(_ bytes: ByteBuffer) {
        if var buffer, buffer.readableBytes > 0 {
            // Drop what was already read, so that a stream of reads ending mid-frame cannot grow it.
            self.buffer = nil
            buffer.discardReadBytes()
            var bytes = bytes
            buffer.writeBuffer(&bytes)
            self.buffer = buffer
        } else {
            buffer = bytes
        }
    }

    /// The next complete frame, or nil until more bytes arrive.
    mutating func next() throws(HTTP2ConnectionError) -> HTTP2InboundFrame? {
        guard var buffer, buffer.readableBytes >= 9 else { return nil }
        let index = buffer.readerIndex
        let length =
            Int(buffer.getInteger(at: index, as: UInt8.self)!) << 16
            | Int(buffer.getInteger(at: index + 1, as: UInt16.self)!)
        guard length <= Self.maximumFrameSize else {
            throw HTTP2ConnectionError(code: .frameSizeError, reason: "frame of \(length) bytes")
        }
        guard buffer.readableBytes >= 9 + length else { return nil }
        let type = buffer.getInteger(at: index + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: index + 4, as: UInt8.self)!
        let streamID = buffer.getInteger(at: index + 5, as: UInt32.self)! & 0x7FFF_FFFF
        buffer.moveReaderIndex(forwardBy: 9)
        let payload = buffer.readSlice(length: length)!
        self.buffer = buffer.readableBytes == 0 ? nil : buffer
        return HTTP2InboundFrame(type: type, flags: flags, streamID: streamID, payload: payload)
    }
}

extension ByteBuffer {
    /// Writes a frame header (RFC 9113 §4.1).
    mutating func writeHTTP2FrameHeader(length: Int, type: HTTP2FrameType, flags: UInt8, streamID: UInt32) {
        writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        writeInteger(UInt16(truncatingIfNeeded: length))
        writeInteger(type.rawValue)
        writeInteger(flags)
        writeInteger(streamID & 0x7FFF_FFFF)
    }

    /// Writes a whole frame whose payload is `payload`.
    mutating func writeHTTP2Frame(type: HTTP2FrameType, flags: UInt8 = 0, streamID: UInt32, payload: ByteBuffer) {
        writeHTTP2FrameHeader(length: payload.readableBytes, type: type, flags: flags, streamID: streamID)
        writeImmutableBuffer(payload)
    }

    /// Removes the padding of a PADDED frame's payload (and HEADERS's priority fields).
    mutating func stripHTTP2Padding(flags: UInt8, hasPriority: Bool) throws(HTTP2ConnectionError) {
        var padding = 0
        if flags & HTTP2FrameFlag.padded != 0 {
            guard let length = readInteger(as: UInt8.self) else {
                throw HTTP2ConnectionError(code: .frameSizeError, reason: "padded frame without pad length")
            }
            padding = Int(length)
        }
        if hasPriority {
            guard readableBytes >= 5 else {
                throw HTTP2ConnectionError(code: .frameSizeError, reason: "HEADERS priority fields missing")
            }
            moveReaderIndex(forwardBy: 5)
        }
        guard padding <= readableBytes else {
            throw HTTP2ConnectionError(code: .protocolError, reason: "padding longer than the frame")
        }
        moveWriterIndex(to: writerIndex - padding)
    }
}

public import NIOCore

/// What the parser made of the next frame in a byte stream.
public enum ParsedFrame: Sendable {
    /// A complete, well-formed frame.
    case frame(Frame)
    /// A complete frame that is refused; the stream goes on with the next frame. The relay answers
    /// it with an ERROR frame carrying `requestID`.
    case refused(requestID: UInt32, kind: FrameKind, error: ProtocolError)
    /// The stream cannot be read on: the header declares a body over the limit. Nothing more is parsed.
    case fatal(requestID: UInt32, error: ProtocolError)
}

/// Cuts a byte stream into frames (Protocol/README.md, "Frames" and "Compression").
///
/// A value type with no I/O: the relay's channel handler and the client feed it what the socket
/// reads. It checks the body length before buffering a body and the declared decompressed size
/// before decompressing.
public struct FrameParser: Sendable {
    /// The limits frames are held to.
    public var limits: ProtocolLimits
    /// The version frames must carry.
    public var version: UInt8
    /// Set after a fatal frame: nothing more is parsed.
    public private(set) var isBroken = false

    /// A parser for frames of `version` within `limits`.
    public init(limits: ProtocolLimits, version: UInt8 = ProtocolLimits.currentVersion) {
        self.limits = limits
        self.version = version
    }

    /// The next frame from the front of `buffer`, consuming it; `nil` until a whole frame is there.
    public mutating func next(from buffer: inout ByteBuffer) -> ParsedFrame? {
        guard !isBroken, let header = FrameHeader.peek(buffer) else { return nil }
        guard header.length <= limits.maxFrameBytes else {
            isBroken = true
            return .fatal(
                requestID: header.requestID,
                error: ProtocolError(
                    .frameTooLarge,
                    "the frame declares a \(header.length)-byte body; at most \(limits.maxFrameBytes) are accepted"
                )
            )
        }
        guard buffer.readableBytes >= FrameHeader.size + Int(header.length) else { return nil }
        buffer.moveReaderIndex(forwardBy: FrameHeader.size)
        // Within the length checked above.
        let body = buffer.readSlice(length: Int(header.length))!
        if header.version != version {
            return .refused(
                requestID: header.requestID, kind: header.kind,
                error: ProtocolError(
                    .unsupportedVersion, "the frame has version \(header.version); this connection speaks \(version)"
                )
            )
        }
        if !FrameFlags.known.isSuperset(of: header.flags) {
            return .refused(
                requestID: header.requestID, kind: header.kind,
                error: ProtocolError(
                    .badFrame, "reserved flag bits are set (flags 0x\(String(header.flags.rawValue, radix: 16)))"
                )
            )
        }
        guard header.flags.contains(.zstd) else {
            return .frame(Frame(kind: header.kind, requestID: header.requestID, body: body))
        }
        do {
            let plain = try Zstd.decompress(body, limit: limits.maxDecompressedBytes, allocator: ByteBufferAllocator())
            return .frame(Frame(kind: header.kind, requestID: header.requestID, body: plain))
        } catch {
            return .refused(requestID: header.requestID, kind: header.kind, error: error)
        }
    }
}

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

/// What the reader of a stream says about a frame once it is whole, before its body is decompressed.
public enum FrameAdmission: Sendable {
    /// Take the frame: its body is decompressed and handed over.
    case admit
    /// Refuse the frame with this error: it is consumed and its body skipped, never decompressed.
    case refuse(ProtocolError)
    /// Not now: the frame stays in the buffer, untouched, and the next call offers it again.
    case wait
}

/// Cuts a byte stream into frames (Protocol/README.md, "Frames" and "Compression").
///
/// A value type with no I/O: the relay's channel handler and the client feed it what the socket
/// reads. It checks the body length before buffering a body, and the declared decompressed size (against the
/// limit and ``Zstd/maximumRatio`` times the compressed size) before decompressing.
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
        next(from: &buffer) { _, _ in .admit }
    }

    /// The next frame from the front of `buffer`, consuming it; `nil` until a whole frame is there or while
    /// `admit` says to wait. `admit` is asked about every whole frame of the right version and flags with the size
    /// its body will have (the declared content size of a zstd body already found within the limits, else its
    /// length), before anything is decompressed: the relay charges and budgets a frame by it.
    public mutating func next(
        from buffer: inout ByteBuffer,
        admitting admit: (FrameHeader, _ bodyBytes: Int) -> FrameAdmission
    ) -> ParsedFrame? {
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
        let frameBytes = FrameHeader.size + Int(header.length)
        guard buffer.readableBytes >= frameBytes else { return nil }
        // Within the length checked above.
        let body = buffer.getSlice(at: buffer.readerIndex + FrameHeader.size, length: Int(header.length))!
        func refuse(_ error: ProtocolError) -> ParsedFrame {
            buffer.moveReaderIndex(forwardBy: frameBytes)
            return .refused(requestID: header.requestID, kind: header.kind, error: error)
        }
        if header.version != version {
            return refuse(
                ProtocolError(
                    .unsupportedVersion, "the frame has version \(header.version); this connection speaks \(version)"))
        }
        if !FrameFlags.known.isSuperset(of: header.flags) {
            return refuse(
                ProtocolError(
                    .badFrame, "reserved flag bits are set (flags 0x\(String(header.flags.rawValue, radix: 16)))"))
        }
        let compressed = header.flags.contains(.zstd)
        let size: Int
        do throws(ProtocolError) {
            size =
                compressed ? try Zstd.admissibleSize(of: body, limit: limits.maxDecompressedBytes) : body.readableBytes
        } catch {
            return refuse(error)
        }
        switch admit(header, size) {
        case .wait:
            return nil
        case .refuse(let error):
            return refuse(error)
        case .admit:
            buffer.moveReaderIndex(forwardBy: frameBytes)
        }
        guard compressed else { return .frame(Frame(kind: header.kind, requestID: header.requestID, body: body)) }
        do {
            let plain = try Zstd.decompress(body, limit: size, allocator: ByteBufferAllocator())
            return .frame(Frame(kind: header.kind, requestID: header.requestID, body: plain))
        } catch {
            return .refused(requestID: header.requestID, kind: header.kind, error: error)
        }
    }
}

public import NIOCore

/// The flags byte of a frame header.
public struct FrameFlags: OptionSet, Hashable, Sendable {
    /// The flags as they travel in the header.
    public var rawValue: UInt8

    /// Flags from their wire value.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// The body is one zstd frame that declares its content size.
    public static let zstd = FrameFlags(rawValue: 0x01)

    /// The bits version 1 defines; the others are reserved and must be zero.
    public static let known: FrameFlags = [.zstd]
}

/// The fixed 12-byte header in front of every frame, big-endian (Protocol/README.md, "Frames").
public struct FrameHeader: Hashable, Sendable {
    /// Bytes in a header.
    public static let size = 12

    /// Bytes of body that follow the header, as sent (compressed or not).
    public var length: UInt32
    /// The protocol version of the frame.
    public var version: UInt8
    /// The flags byte.
    public var flags: FrameFlags
    /// Which message the body is.
    public var kind: FrameKind
    /// The request the frame belongs to; `0` for frames about the connection itself.
    public var requestID: UInt32

    /// A header from its fields.
    public init(length: UInt32, version: UInt8, flags: FrameFlags, kind: FrameKind, requestID: UInt32) {
        self.length = length
        self.version = version
        self.flags = flags
        self.kind = kind
        self.requestID = requestID
    }

    /// Reads a header at the buffer's reader index without moving it; `nil` when fewer than 12 bytes are there.
    public static func peek(_ buffer: ByteBuffer) -> FrameHeader? {
        guard buffer.readableBytes >= size,
            let (length, version, flags, kind, requestID) = buffer.getMultipleIntegers(
                at: buffer.readerIndex, as: (UInt32, UInt8, UInt8, UInt16, UInt32).self
            )
        else { return nil }
        return FrameHeader(
            length: length, version: version, flags: FrameFlags(rawValue: flags), kind: FrameKind(rawValue: kind),
            requestID: requestID
        )
    }

    /// Writes the header, big-endian.
    public func write(to buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(length, version, flags.rawValue, kind.rawValue, requestID)
    }
}

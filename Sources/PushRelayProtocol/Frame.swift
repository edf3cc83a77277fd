public import NIOCore
public import SwiftProtobuf

/// A complete frame with its body decompressed.
public struct Frame: Sendable {
    /// The frame's kind.
    public var kind: FrameKind
    /// The request the frame belongs to.
    public var requestID: UInt32
    /// The body as protobuf bytes (already decompressed when the frame was compressed).
    public var body: ByteBuffer

    /// A frame from its parts.
    public init(kind: FrameKind, requestID: UInt32, body: ByteBuffer) {
        self.kind = kind
        self.requestID = requestID
        self.body = body
    }

    /// Decodes the body as a message; a body that is not that message is `INVALID_BODY`.
    public func decode<M: SwiftProtobuf.Message>(_ type: M.Type = M.self) throws(ProtocolError) -> M {
        do {
            return try M(serializedBytes: Array(body.readableBytesView))
        } catch {
            throw ProtocolError(.invalidBody, "the body is not a valid \(M.protoMessageName): \(error)")
        }
    }
}

/// Writes frames.
public struct FrameEncoder: Sendable {
    /// Bodies at least this large are compressed when compression is on; `nil` never compresses.
    public var compressionThreshold: Int?

    /// An encoder that compresses bodies from `compressionThreshold` bytes, or never.
    public init(compressionThreshold: Int? = nil) {
        self.compressionThreshold = compressionThreshold
    }

    /// Appends one frame carrying `message` to `buffer`.
    public func encode(
        kind: FrameKind,
        requestID: UInt32,
        message: some SwiftProtobuf.Message,
        into buffer: inout ByteBuffer
    ) {
        // Serializing a message built in memory cannot fail: required fields do not exist in proto3.
        // Map entries in key order, so that equal messages make equal frames.
        var options = BinaryEncodingOptions()
        options.useDeterministicOrdering = true
        let bytes: [UInt8] = (try? message.serializedBytes(options: options)) ?? []
        encode(kind: kind, requestID: requestID, body: bytes, into: &buffer)
    }

    /// Appends one frame with an already serialized body to `buffer`, compressing it when it is large.
    public func encode(kind: FrameKind, requestID: UInt32, body: [UInt8], into buffer: inout ByteBuffer) {
        var flags: FrameFlags = []
        if let threshold = compressionThreshold, body.count >= threshold {
            var compressed = Zstd.compress(ByteBuffer(bytes: body), allocator: ByteBufferAllocator())
            flags.insert(.zstd)
            FrameHeader(
                length: UInt32(compressed.readableBytes), version: ProtocolLimits.currentVersion, flags: flags,
                kind: kind, requestID: requestID
            ).write(to: &buffer)
            buffer.writeBuffer(&compressed)
            return
        }
        FrameHeader(
            length: UInt32(body.count), version: ProtocolLimits.currentVersion, flags: flags, kind: kind,
            requestID: requestID
        ).write(to: &buffer)
        buffer.writeBytes(body)
    }

    /// One frame carrying `message`, in a new buffer.
    public func frame(kind: FrameKind, requestID: UInt32, message: some SwiftProtobuf.Message) -> ByteBuffer {
        var buffer = ByteBuffer()
        encode(kind: kind, requestID: requestID, message: message, into: &buffer)
        return buffer
    }
}

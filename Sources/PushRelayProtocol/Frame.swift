import Foundation
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

    /// Most distinct field numbers a body may carry that its message does not declare (fields of a newer
    /// protocol version); beyond it the body is `INVALID_BODY`.
    public static let maximumUnknownFieldNumbers = 64
    /// Most occurrences of such fields a request body may carry, at every depth in all (``WireShape``, which also
    /// holds the distinct numbers at every depth to ``maximumUnknownFieldNumbers``); beyond it the body is
    /// `INVALID_BODY`.
    public static let maximumUnknownFields = 1_024

    /// A frame from its parts.
    public init(kind: FrameKind, requestID: UInt32, body: ByteBuffer) {
        self.kind = kind
        self.requestID = requestID
        self.body = body
    }

    /// Decodes the body as a message; a body that is not that message is `INVALID_BODY`, and so is one that
    /// carries a field the message has with another wire type (protobuf would keep it as an unknown field and
    /// the request would go on without it). Fields the message does not have are ignored, as protobuf's rules
    /// for evolving a protocol ask, up to ``maximumUnknownFieldNumbers`` distinct ones.
    public func decode<M: SwiftProtobuf.Message>(_ type: M.Type = M.self) throws(ProtocolError) -> M {
        let message: M = try parse(options: BinaryDecodingOptions())
        guard !message.unknownFields.data.isEmpty else { return message }
        guard let numbers = UnknownFields.numbers(in: message.unknownFields.data) else {
            throw ProtocolError(.invalidBody, "the body holds a group, which proto3 messages do not have")
        }
        // Each number is checked by decoding: a bounded few, however many fields the body repeats.
        let distinct = Set(numbers)
        guard distinct.count <= Self.maximumUnknownFieldNumbers else {
            throw ProtocolError(
                .invalidBody,
                "the body holds \(distinct.count) field numbers \(M.protoMessageName) does not declare; at most "
                    + "\(Self.maximumUnknownFieldNumbers) are accepted")
        }
        if let number = distinct.sorted().first(where: M.hasField(number:)) {
            throw ProtocolError(
                .invalidBody, "field \(number) of \(M.protoMessageName) has the wrong wire type for its declared type")
        }
        return message
    }

    /// The body decoded as `M` with `options`, read where it lies (no copy of the body); `INVALID_BODY` when it is
    /// not one.
    func parse<M: SwiftProtobuf.Message>(options: BinaryDecodingOptions) throws(ProtocolError) -> M {
        do {
            return try body.withUnsafeReadableBytes { bytes in
                guard let base = bytes.baseAddress, !bytes.isEmpty else {
                    return try M(serializedBytes: [UInt8](), options: options)
                }
                // Read only, while the buffer is alive.
                let view = Data(
                    bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: bytes.count, deallocator: .none)
                return try M(serializedBytes: view, options: options)
            }
        } catch {
            throw ProtocolError(.invalidBody, "the body is not a valid \(M.protoMessageName): \(error)")
        }
    }
}

extension SwiftProtobuf.Message {
    /// Whether the message declares field `number`: a field of that number with some wire type decodes into it
    /// instead of into its unknown fields.
    fileprivate static func hasField(number: Int) -> Bool {
        let tag = UInt64(number) << 3
        // Varint 0, 8 zero bytes, an empty length-delimited value, 4 zero bytes.
        let encodings: [[UInt8]] = [
            UnknownFields.varint(tag | 0) + [0], UnknownFields.varint(tag | 1) + Array(repeating: 0, count: 8),
            UnknownFields.varint(tag | 2) + [0], UnknownFields.varint(tag | 5) + Array(repeating: 0, count: 4),
        ]
        return encodings.contains { bytes in
            (try? Self(serializedBytes: bytes)).map { $0.unknownFields.data.isEmpty } ?? false
        }
    }
}

/// Reads the field numbers of protobuf's unknown-field bytes.
private enum UnknownFields {
    /// The field numbers in `data`, in order; `nil` when it holds a group (wire types 3 and 4, which proto3
    /// does not have) or cannot be read.
    static func numbers(in data: Data) -> [Int]? {
        var bytes = data[...]
        var numbers: [Int] = []
        while !bytes.isEmpty {
            guard let tag = readVarint(&bytes) else { return nil }
            numbers.append(Int(truncatingIfNeeded: tag >> 3))
            let skipped: Bool
            switch tag & 7 {
            case 0: skipped = readVarint(&bytes) != nil
            case 1: skipped = skip(8, &bytes)
            case 2: skipped = readVarint(&bytes).map { skip(Int(clamping: $0), &bytes) } ?? false
            case 5: skipped = skip(4, &bytes)
            default: skipped = false
            }
            guard skipped else { return nil }
        }
        return numbers
    }

    /// The varint encoding of `value`.
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
        return bytes
    }

    private static func readVarint(_ bytes: inout Data.SubSequence) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = bytes.popFirst() {
            guard shift < 64 else { return nil }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    private static func skip(_ count: Int, _ bytes: inout Data.SubSequence) -> Bool {
        guard count <= bytes.count else { return false }
        bytes = bytes.dropFirst(count)
        return true
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
        if let threshold = compressionThreshold, body.count >= threshold,
            case var compressed = Zstd.compress(ByteBuffer(bytes: body), allocator: ByteBufferAllocator()),
            // A body that would inflate beyond what a receiver takes (Zstd.maximumRatio) goes as it is.
            body.count <= Zstd.inflationLimit(ofCompressed: compressed.readableBytes)
        {
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

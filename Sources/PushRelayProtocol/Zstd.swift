import CZstd
public import NIOCore

/// zstd compression of frame bodies through Debian's libzstd.
///
/// Decompression is bounded: the zstd frame must declare its content size, and that size is checked
/// against the limit, and against ``maximumRatio`` times the compressed size, before any memory is allocated for
/// the output; the output buffer holds exactly the declared size.
public enum Zstd {
    /// How many times its compressed size a body may inflate to (beyond ``ratioFloorBytes``): real bodies compress
    /// 3 to 30 times, so that a tiny frame cannot buy megabytes of work.
    public static let maximumRatio = 256
    /// A body may always inflate to this many bytes, whatever its compressed size.
    public static let ratioFloorBytes = 16_384

    /// `ZSTD_CONTENTSIZE_UNKNOWN`: the frame does not declare its content size.
    private static let contentSizeUnknown = UInt64.max
    /// The first four bytes of a zstd frame (not a skippable one), little-endian.
    private static let magicNumber: UInt32 = 0xFD2F_B528

    /// Compresses a whole body into one zstd frame that declares its content size.
    public static func compress(_ body: ByteBuffer, level: Int32 = 3, allocator: ByteBufferAllocator) -> ByteBuffer {
        let bound = ZSTD_compressBound(body.readableBytes)
        var output = allocator.buffer(capacity: bound)
        body.withUnsafeReadableBytes { source in
            let written = output.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { destination in
                let result = ZSTD_compress(
                    destination.baseAddress, destination.count, source.baseAddress, source.count, level
                )
                // Compressing into a buffer of ZSTD_compressBound bytes cannot fail.
                precondition(
                    ZSTD_isError(result) == 0, "ZSTD_compress failed: \(String(cString: ZSTD_getErrorName(result)))")
                return result
            }
            _ = written
        }
        return output
    }

    /// The content size a zstd frame declares, or the error that refuses it: `DECOMPRESSED_TOO_LARGE`
    /// when no size is declared or it is over `limit`, `BAD_COMPRESSION` when the bytes are not exactly one
    /// zstd frame (a skippable frame, trailing bytes or a second frame are refused too).
    public static func declaredSize(of body: ByteBuffer, limit: Int) throws(ProtocolError) -> Int {
        let (size, frameBytes) = body.withUnsafeReadableBytes { bytes in
            (
                ZSTD_getFrameContentSize(bytes.baseAddress, bytes.count),
                ZSTD_findFrameCompressedSize(bytes.baseAddress, bytes.count)
            )
        }
        guard body.readableBytes >= 4, body.getInteger(at: body.readerIndex, endianness: .little) == magicNumber,
            ZSTD_isError(frameBytes) == 0, frameBytes == body.readableBytes
        else {
            throw ProtocolError(.badCompression, "the body is not exactly one zstd frame")
        }
        switch size {
        case contentSizeUnknown:
            throw ProtocolError(.decompressedTooLarge, "the zstd frame does not declare its content size")
        case let size where size > UInt64(limit):
            // Includes 2^64 - 2, which libzstd reports as an error value: the frame was read whole above, so
            // that is what it declares.
            throw ProtocolError(
                .decompressedTooLarge, "the zstd frame declares \(size) bytes; at most \(limit) are accepted"
            )
        default:
            return Int(size)
        }
    }

    /// The most bytes a body of `compressedBytes` may inflate to: ``maximumRatio`` times its size, at least
    /// ``ratioFloorBytes``.
    public static func inflationLimit(ofCompressed compressedBytes: Int) -> Int {
        max(ratioFloorBytes, min(compressedBytes, Int.max / maximumRatio) * maximumRatio)
    }

    /// The content size a zstd body declares when it is one a receiver takes: ``declaredSize(of:limit:)``, and
    /// `DECOMPRESSED_TOO_LARGE` when it inflates beyond ``inflationLimit(ofCompressed:)``.
    public static func admissibleSize(of body: ByteBuffer, limit: Int) throws(ProtocolError) -> Int {
        let size = try declaredSize(of: body, limit: limit)
        let bound = inflationLimit(ofCompressed: body.readableBytes)
        guard size <= bound else {
            throw ProtocolError(
                .decompressedTooLarge,
                "the zstd frame inflates \(body.readableBytes) bytes to \(size): more than \(maximumRatio) times "
                    + "its size (at most \(bound) bytes for this body)"
            )
        }
        return size
    }

    /// Decompresses one zstd frame whose declared content size is at most `limit` bytes.
    public static func decompress(
        _ body: ByteBuffer,
        limit: Int,
        allocator: ByteBufferAllocator
    ) throws(ProtocolError) -> ByteBuffer {
        let size = try declaredSize(of: body, limit: limit)
        var output = allocator.buffer(capacity: max(size, 1))
        var failed = false
        body.withUnsafeReadableBytes { source in
            _ = output.writeWithUnsafeMutableBytes(minimumWritableBytes: max(size, 1)) { destination in
                let result = ZSTD_decompress(destination.baseAddress, size, source.baseAddress, source.count)
                // A frame whose content is longer or shorter than it declares is refused, as is any other error.
                guard ZSTD_isError(result) == 0, result == size else {
                    failed = true
                    return 0
                }
                return result
            }
        }
        guard !failed else {
            throw ProtocolError(.badCompression, "the zstd body does not decompress to its declared \(size) bytes")
        }
        return output
    }
}

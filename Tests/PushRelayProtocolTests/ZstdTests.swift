import NIOCore
import PushRelayProtocol
import Testing

/// `Zstd.decompress` takes a body only when it is exactly one zstd frame that declares its content size and
/// holds exactly that many bytes, at most the limit (Protocol/README.md, "Compression"); every liar gets the code
/// the spec gives it. The liars are made by hand from RFC 8878, each beside the honest frame it differs from, so
/// a liar is refused for its lie and not for a mistake in the test's frame.
@Suite struct ZstdTests {
    static let allocator = ByteBufferAllocator()
    static let hello = Array("hello".utf8)

    /// What `Zstd.decompress` made of a body.
    enum Outcome: Equatable {
        case content([UInt8])
        case refused(Pushrelay_V1_ErrorCode)
    }

    /// What `Zstd.decompress` makes of `bytes` under `limit`: the content, or the error's code.
    static func outcome(_ bytes: [UInt8], limit: Int = 4_194_304) -> Outcome {
        do {
            let plain = try Zstd.decompress(ByteBuffer(bytes: bytes), limit: limit, allocator: allocator)
            return .content(plain.readableArray)
        } catch {
            return .refused(error.code)
        }
    }

    static func compressed(_ plain: [UInt8]) -> [UInt8] {
        Zstd.compress(ByteBuffer(bytes: plain), allocator: allocator).readableArray
    }

    @Test func handMadeFramesThatTellTheTruthDecompress() {
        let cases: [(String, [UInt8], [UInt8])] = [
            ("1-byte size, raw block", ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)]), Self.hello),
            (
                "2-byte size, raw block",
                ZstdFrames.frame(contentSize: 300, blocks: [.raw(Array(repeating: 7, count: 300))]),
                Array(repeating: 7, count: 300)
            ),
            (
                "4-byte size, RLE blocks",
                ZstdFrames.frame(contentSize: 70_000, blocks: [.rle(9, count: 60_000), .rle(9, count: 10_000)]),
                Array(repeating: 9, count: 70_000)
            ),
            (
                "8-byte size field", ZstdFrames.frame(contentSize: 5, sizeFieldBytes: 8, blocks: [.raw(Self.hello)]),
                Self.hello
            ),
            ("size 0, empty block", ZstdFrames.frame(contentSize: 0, blocks: [.raw([])]), []),
            (
                "two blocks", ZstdFrames.frame(contentSize: 7, blocks: [.raw(Self.hello), .rle(0x21, count: 2)]),
                Self.hello + [0x21, 0x21]
            ),
        ]
        for (name, frame, content) in cases {
            #expect(Self.outcome(frame) == .content(content), "\(name)")
            #expect(ZstdFrames.declared(frame) == .size(UInt64(content.count)), "\(name)")
        }
    }

    @Test func whatZstdCompressWritesDecompressesToTheSameBytesAndDeclaresItsSize() {
        for plain in [[], Self.hello, Array(repeating: 0, count: 100_000), (0..<5_000).map { UInt8($0 % 251) }] {
            let frame = Self.compressed(plain)
            #expect(ZstdFrames.declared(frame) == .size(UInt64(plain.count)))
            #expect(Self.outcome(frame) == .content(plain))
            #expect(Self.outcome(frame, limit: plain.count) == .content(plain))
        }
    }

    @Test func aFrameDeclaringZeroBytesButCarryingDataIsBadCompression() {
        #expect(Self.outcome(ZstdFrames.frame(contentSize: 0, blocks: [.raw(Self.hello)])) == .refused(.badCompression))
        #expect(
            Self.outcome(ZstdFrames.frame(contentSize: 0, blocks: [.rle(1, count: 1_000)])) == .refused(.badCompression)
        )
    }

    @Test func aFrameHoldingMoreOrFewerBytesThanItDeclaresIsBadCompression() {
        for declared: UInt64 in [4, 6, 255, 256] {
            #expect(
                Self.outcome(ZstdFrames.frame(contentSize: declared, blocks: [.raw(Self.hello)]))
                    == .refused(.badCompression), "declares \(declared), holds 5")
        }
        // A bomb: 16 bytes declared, 100,000 in one RLE block.
        #expect(
            Self.outcome(ZstdFrames.frame(contentSize: 16, blocks: [.rle(0, count: 100_000)]))
                == .refused(.badCompression)
        )
    }

    @Test func aFrameThatDeclaresNoSizeIsDecompressedTooLarge() {
        let frame = ZstdFrames.frame(contentSize: nil, blocks: [.raw(Self.hello)])
        #expect(ZstdFrames.declared(frame) == .unknown)
        #expect(Self.outcome(frame) == .refused(.decompressedTooLarge))
        let error = #expect(throws: ProtocolError.self) {
            try Zstd.declaredSize(of: ByteBuffer(bytes: frame), limit: 1_000)
        }
        #expect(error?.code == .decompressedTooLarge)
        // The same content with its size declared is taken.
        #expect(Self.outcome(ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])) == .content(Self.hello))
    }

    @Test func aDeclaredSizeOverTheLimitIsDecompressedTooLargeAndTheLimitItselfIsTaken() throws {
        let plain = Array(repeating: UInt8(ascii: "x"), count: 10_000)
        let frame = Self.compressed(plain)
        #expect(Self.outcome(frame, limit: 9_999) == .refused(.decompressedTooLarge))
        #expect(Self.outcome(frame, limit: 10_000) == .content(plain))
        #expect(try Zstd.declaredSize(of: ByteBuffer(bytes: frame), limit: 10_000) == 10_000)
        let handMade = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        #expect(Self.outcome(handMade, limit: 4) == .refused(.decompressedTooLarge))
        #expect(Self.outcome(handMade, limit: 0) == .refused(.decompressedTooLarge))
        // 2^64 - 1 in the size field reads as "no size", which is refused the same way.
        let allOnes = ZstdFrames.frame(contentSize: UInt64.max, sizeFieldBytes: 8, blocks: [.raw(Self.hello)])
        #expect(Self.outcome(allOnes) == .refused(.decompressedTooLarge))
    }

    @Test func aFrameDeclaringTwoToTheSixtyFourMinusTwoBytesIsDecompressedTooLarge() {
        // libzstd's ZSTD_getFrameContentSize returns this size as its error value, ZSTD_CONTENTSIZE_ERROR; the
        // frame is whole, so it is a size over the limit like any other.
        let frame = ZstdFrames.frame(contentSize: UInt64.max - 1, sizeFieldBytes: 8, blocks: [.raw(Self.hello)])
        #expect(ZstdFrames.declared(frame) == .size(UInt64.max - 1))
        #expect(Self.outcome(frame) == .refused(.decompressedTooLarge))
    }

    @Test func aSkippableFrameIsRefusedBeforeAfterOrAlone() {
        let real = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        let skippable = ZstdFrames.skippable(Array("meta".utf8))
        #expect(Self.outcome(real) == .content(Self.hello))
        #expect(Self.outcome(skippable + real) == .refused(.badCompression))
        #expect(Self.outcome(real + skippable) == .refused(.badCompression))
        #expect(Self.outcome(skippable) == .refused(.badCompression))
        #expect(Self.outcome(ZstdFrames.skippable([])) == .refused(.badCompression))
    }

    @Test func twoFramesConcatenatedAreBadCompression() {
        let first = Self.compressed(Self.hello)
        let second = Self.compressed(Array(" world".utf8))
        #expect(Self.outcome(first) == .content(Self.hello))
        #expect(Self.outcome(first + second) == .refused(.badCompression))
        let handMade = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        #expect(Self.outcome(handMade + handMade) == .refused(.badCompression))
    }

    @Test func trailingBytesAfterTheFrameAreBadCompression() {
        let frame = Self.compressed(Self.hello)
        for garbage: [UInt8] in [[0], [0xFF], ZstdFrames.magic, Array(repeating: 0, count: 64)] {
            #expect(Self.outcome(frame + garbage) == .refused(.badCompression), "\(garbage.count) trailing bytes")
        }
    }

    @Test func everyTruncationOfAFrameIsBadCompression() {
        for frame in [
            Self.compressed(Array(repeating: 1, count: 1_000)),
            ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)]),
        ] {
            for length in 0..<frame.count {
                #expect(Self.outcome(Array(frame[..<length])) == .refused(.badCompression), "first \(length) bytes")
            }
        }
    }

    @Test func aReservedHeaderBitOrAWrongMagicNumberIsBadCompression() {
        var reserved = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        reserved[4] |= 0x08
        #expect(Self.outcome(reserved) == .refused(.badCompression))
        var magic = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        magic[0] = 0x27
        #expect(Self.outcome(magic) == .refused(.badCompression))
        // A frame of zstd's legacy v0.7 format (magic 0xFD2FB527) is not the frame the spec asks for.
        let honest = ZstdFrames.frame(contentSize: 5, blocks: [.raw(Self.hello)])
        #expect(Self.outcome([0x27, 0xB5, 0x2F, 0xFD] + Array(honest[4...])) == .refused(.badCompression))
    }

    @Test func emptyAndTinyBodiesAreBadCompression() {
        for body: [UInt8] in [[], [0x28], [0x28, 0xB5, 0x2F], ZstdFrames.magic, ZstdFrames.magic + [0x20]] {
            #expect(Self.outcome(body) == .refused(.badCompression), "\(body)")
        }
    }
}

/// zstd frames written by hand from RFC 8878 (section 3.1.1), and a reader of the content size a frame header
/// declares, so the tests need not take libzstd's word for what a frame says.
enum ZstdFrames {
    /// The magic number of a zstd frame, 0xFD2FB528 little-endian.
    static let magic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

    /// One block of a frame.
    enum Block {
        /// A raw block: its bytes as they are.
        case raw([UInt8])
        /// An RLE block: one byte, `count` times.
        case rle(UInt8, count: Int)
    }

    /// A frame holding `blocks`. With a `contentSize` the frame is single-segment and declares that size in
    /// `sizeFieldBytes` bytes (1, 2, 4 or 8; the smallest that fits when `nil`); without one it declares no size
    /// and has a 128 KiB window.
    static func frame(contentSize: UInt64?, sizeFieldBytes: Int? = nil, blocks: [Block]) -> [UInt8] {
        var bytes = magic
        if let size = contentSize {
            let fieldBytes =
                sizeFieldBytes ?? (size <= 255 ? 1 : size <= 65_791 ? 2 : size <= UInt64(UInt32.max) ? 4 : 8)
            let flag: UInt8 = [1: 0, 2: 1, 4: 2, 8: 3][fieldBytes]!
            // Frame_Content_Size_Flag in bits 7-6, Single_Segment_Flag (bit 5): no window descriptor.
            bytes.append(flag << 6 | 0x20)
            let stored = fieldBytes == 2 ? size - 256 : size
            for index in 0..<fieldBytes { bytes.append(UInt8(truncatingIfNeeded: stored >> (8 * UInt64(index)))) }
        } else {
            // No size, not single-segment; the window descriptor: exponent 7, a 2^17-byte window.
            bytes += [0x00, 7 << 3]
        }
        let blocks = blocks.isEmpty ? [.raw([])] : blocks
        for (index, block) in blocks.enumerated() {
            let last: UInt32 = index == blocks.count - 1 ? 1 : 0
            let (type, size, content): (UInt32, Int, [UInt8]) =
                switch block {
                case .raw(let data): (0, data.count, data)
                case .rle(let byte, let count): (1, count, [byte])
                }
            // Block_Header: 3 bytes little-endian, Last_Block (bit 0), Block_Type (bits 1-2), Block_Size (bits 3-23).
            let header = UInt32(size) << 3 | type << 1 | last
            bytes += [UInt8(header & 0xFF), UInt8(header >> 8 & 0xFF), UInt8(header >> 16 & 0xFF)]
            bytes += content
        }
        return bytes
    }

    /// A skippable frame (magic 0x184D2A50, little-endian) carrying `payload`.
    static func skippable(_ payload: [UInt8]) -> [UInt8] {
        let size = UInt32(payload.count)
        return [0x50, 0x2A, 0x4D, 0x18] + (0..<4).map { UInt8(truncatingIfNeeded: size >> (8 * $0)) } + payload
    }

    /// What a frame header says about the content size.
    enum Declared: Equatable {
        /// The bytes do not begin with a zstd frame header (wrong magic, too short, reserved bit set).
        case notAFrame
        /// A frame header that declares no size.
        case unknown
        /// A frame header declaring this many bytes.
        case size(UInt64)
    }

    /// The content size the frame header at the start of `bytes` declares.
    static func declared(_ bytes: [UInt8]) -> Declared {
        guard bytes.count >= 5, Array(bytes[0..<4]) == magic else { return .notAFrame }
        let descriptor = bytes[4]
        guard descriptor & 0x08 == 0 else { return .notAFrame }
        let singleSegment = descriptor & 0x20 != 0
        let sizeFlag = Int(descriptor >> 6)
        let dictionaryIDBytes = [0, 1, 2, 4][Int(descriptor & 0x03)]
        let sizeBytes = sizeFlag == 0 ? (singleSegment ? 1 : 0) : [0, 2, 4, 8][sizeFlag]
        let start = 5 + (singleSegment ? 0 : 1) + dictionaryIDBytes
        guard bytes.count >= start + sizeBytes else { return .notAFrame }
        guard sizeBytes > 0 else { return .unknown }
        var size: UInt64 = 0
        for index in 0..<sizeBytes { size |= UInt64(bytes[start + index]) << (8 * UInt64(index)) }
        return .size(sizeBytes == 2 ? size + 256 : size)
    }
}

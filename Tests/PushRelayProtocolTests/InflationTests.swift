import NIOCore
import PushRelayProtocol
import Testing

/// A zstd body inflates to at most `Zstd.maximumRatio` times its size (16 KiB always), checked before anything is
/// allocated; and the reader of a stream is asked about each whole frame, with its inflated size, before its body
/// is decompressed (Protocol/README.md, "Compression").
@Suite struct InflationTests {
    /// A frame of `kind` whose body is the zstd frame `zstd`.
    static func compressedFrame(_ zstd: [UInt8], kind: UInt16 = 0x0002, requestID: UInt32 = 7) -> [UInt8] {
        FrameTests.frame(flags: 0x01, kind: kind, requestID: requestID, body: zstd)
    }

    /// A tiny zstd frame of `count` zeros in RLE blocks of at most 128 KiB (4 bytes each), declaring its size.
    static func bomb(_ count: Int) -> [UInt8] {
        let blocks = stride(from: 0, to: count, by: 131_072).map { start in
            ZstdFrames.Block.rle(0, count: min(131_072, count - start))
        }
        return ZstdFrames.frame(contentSize: UInt64(count), blocks: blocks)
    }

    @Test func theInflationLimitIsTheRatioTimesTheSizeAndAtLeastTheFloor() {
        #expect(Zstd.inflationLimit(ofCompressed: 0) == Zstd.ratioFloorBytes)
        #expect(Zstd.inflationLimit(ofCompressed: 64) == 16_384)
        #expect(Zstd.inflationLimit(ofCompressed: 65) == 65 * 256)
        #expect(Zstd.inflationLimit(ofCompressed: 16_384) == 4_194_304)
        #expect(Zstd.inflationLimit(ofCompressed: .max) > 0)
    }

    @Test func aBodyInflatingBeyondItsRatioIsDecompressedTooLargeAndTheStreamGoesOn() {
        let floor = Self.bomb(Zstd.ratioFloorBytes)
        let overFloor = Self.bomb(Zstd.ratioFloorBytes + 1)
        #expect(overFloor.count * Zstd.maximumRatio < Zstd.ratioFloorBytes + 1)
        let fourMiB = Self.bomb(4 << 20)
        let parsed = FrameTests.parse(
            Self.compressedFrame(floor, requestID: 1) + Self.compressedFrame(overFloor, requestID: 2)
                + Self.compressedFrame(fourMiB, requestID: 3) + FrameTests.frame(kind: 0x0002, requestID: 4))
        #expect(parsed.count == 4)
        guard parsed.count == 4, case .frame(let frame) = parsed[0] else { return }
        #expect(frame.body.readableBytes == Zstd.ratioFloorBytes)
        #expect(
            parsed[1...].map(FrameTests.summary) == [
                "refused 0x0002 #2 DECOMPRESSED_TOO_LARGE", "refused 0x0002 #3 DECOMPRESSED_TOO_LARGE",
                "frame 0x0002 #4 []",
            ])
        guard case .refused(_, _, let error) = parsed[2] else { return }
        #expect(error.message.contains("more than 256 times its size"), "\(error.message)")
    }

    @Test func theReaderIsAskedWithTheInflatedSizeBeforeDecompressing() {
        let plain = Array(repeating: UInt8(ascii: "p"), count: 5_000)
        var stream = ByteBuffer(
            bytes: FrameTests.frame(kind: 0x0020, requestID: 1, body: Array("plain".utf8))
                + Self.compressedFrame(ZstdTests.compressed(plain), kind: 0x0020, requestID: 2))
        var parser = FrameParser(limits: ProtocolLimits())
        var asked: [(UInt32, Int)] = []
        while case .frame = parser.next(
            from: &stream,
            admitting: { header, bytes in
                asked.append((header.requestID, bytes))
                return .admit
            })
        {}
        #expect(asked.map(\.0) == [1, 2])
        #expect(asked.map(\.1) == [5, 5_000])
    }

    @Test func aFrameToldToWaitStaysWholeInTheBufferUntilItIsAdmitted() {
        let bytes = FrameTests.frame(kind: 0x0020, requestID: 9, body: Array("body".utf8))
        var stream = ByteBuffer(bytes: bytes)
        var parser = FrameParser(limits: ProtocolLimits())
        for _ in 0..<3 {
            #expect(parser.next(from: &stream, admitting: { _, _ in .wait }) == nil)
            #expect(stream.readableBytes == bytes.count)
        }
        let parsed = parser.next(from: &stream, admitting: { _, _ in .admit })
        #expect(parsed.map(FrameTests.summary) == "frame 0x0020 #9 \(Array("body".utf8))")
        #expect(stream.readableBytes == 0)
    }

    @Test func aRefusedFrameIsSkippedWithoutDecompressingIt() {
        // Declares 16 bytes and holds 100,000: decompressing it is BAD_COMPRESSION; refused first, it never is.
        let liar = ZstdFrames.frame(contentSize: 16, blocks: [.rle(0, count: 100_000)])
        let bytes = Self.compressedFrame(liar, requestID: 5) + FrameTests.frame(kind: 0x0002, requestID: 6)
        #expect(FrameTests.parse(bytes).first.map(FrameTests.summary) == "refused 0x0002 #5 BAD_COMPRESSION")
        var stream = ByteBuffer(bytes: bytes)
        var parser = FrameParser(limits: ProtocolLimits())
        let limited = ProtocolError(.rateLimited, "no tokens", retryAfterMilliseconds: 10)
        let first = parser.next(
            from: &stream, admitting: { header, _ in header.requestID == 5 ? .refuse(limited) : .admit })
        #expect(first.map(FrameTests.summary) == "refused 0x0002 #5 RATE_LIMITED")
        #expect(parser.next(from: &stream).map(FrameTests.summary) == "frame 0x0002 #6 []")
    }

    @Test func theEncoderSendsABodyThatWouldInflateBeyondTheRatioAsItIs() {
        for (count, compressed) in [(Zstd.ratioFloorBytes, true), (1 << 20, false)] {
            var buffer = ByteBuffer()
            FrameEncoder(compressionThreshold: 0).encode(
                kind: .send, requestID: 1, body: Array(repeating: 0, count: count), into: &buffer)
            #expect(FrameHeader.peek(buffer)?.flags.contains(.zstd) == compressed, "\(count) zeros")
        }
        // Text that compresses within the ratio is compressed.
        var text = ByteBuffer()
        let ids = (0..<10_000).map { "user-\($0)" }.joined(separator: ",")
        FrameEncoder(compressionThreshold: 0).encode(kind: .send, requestID: 1, body: Array(ids.utf8), into: &text)
        #expect(FrameHeader.peek(text)?.flags == .zstd)
    }
}

import NIOCore
import PushRelayProtocol
import Testing

/// The frame header and `FrameParser` (Protocol/README.md, "Frames" and "Compression"): a frame is parsed once all
/// of it is there, a bad frame is refused and skipped, and only a body over `max_frame_bytes` stops the stream.
@Suite struct FrameTests {
    /// Twelve header bytes and `body`, with the header's fields as given.
    static func frame(
        length: UInt32? = nil, version: UInt8 = 1, flags: UInt8 = 0, kind: UInt16 = 0x0020, requestID: UInt32 = 7,
        body: [UInt8] = []
    ) -> [UInt8] {
        var buffer = ByteBuffer()
        FrameHeader(
            length: length ?? UInt32(body.count), version: version, flags: FrameFlags(rawValue: flags),
            kind: FrameKind(rawValue: kind), requestID: requestID
        ).write(to: &buffer)
        buffer.writeBytes(body)
        return Array(buffer.readableBytesView)
    }

    /// Everything the parser makes of `bytes` given at once.
    static func parse(_ bytes: [UInt8], limits: ProtocolLimits = ProtocolLimits(), version: UInt8 = 1) -> [ParsedFrame]
    {
        var parser = FrameParser(limits: limits, version: version)
        var buffer = ByteBuffer(bytes: bytes)
        var parsed: [ParsedFrame] = []
        while let next = parser.next(from: &buffer) { parsed.append(next) }
        return parsed
    }

    /// A parsed frame as kind, request id and body, or a refusal as its code.
    static func summary(_ parsed: ParsedFrame) -> String {
        switch parsed {
        case .frame(let frame): "frame \(frame.kind) #\(frame.requestID) \(Array(frame.body.readableBytesView))"
        case .refused(let requestID, let kind, let error): "refused \(kind) #\(requestID) \(error.code.name)"
        case .fatal(let requestID, let error): "fatal #\(requestID) \(error.code.name)"
        }
    }

    @Test func headerIsTwelveBigEndianBytes() {
        var buffer = ByteBuffer()
        FrameHeader(length: 0x0102_0304, version: 1, flags: .zstd, kind: .send, requestID: 0x0A0B_0C0D).write(
            to: &buffer
        )
        #expect(Array(buffer.readableBytesView) == [1, 2, 3, 4, 1, 1, 0x00, 0x20, 0x0A, 0x0B, 0x0C, 0x0D])
        let header = FrameHeader.peek(buffer)
        #expect(
            header
                == FrameHeader(length: 0x0102_0304, version: 1, flags: .zstd, kind: .send, requestID: 0x0A0B_0C0D))
        #expect(buffer.readableBytes == 12)
        buffer.moveWriterIndex(to: 11)
        #expect(FrameHeader.peek(buffer) == nil)
    }

    @Test func nothingIsParsedOrConsumedUntilTheWholeFrameIsThere() {
        let bytes = Self.frame(requestID: 9, body: Array("body".utf8))
        var parser = FrameParser(limits: ProtocolLimits())
        var buffer = ByteBuffer()
        for byte in bytes.dropLast() {
            buffer.writeInteger(byte)
            let parsed = parser.next(from: &buffer)
            #expect(parsed == nil)
            #expect(buffer.readerIndex == 0)
        }
        buffer.writeInteger(bytes.last!)
        let parsed = parser.next(from: &buffer).map(Self.summary)
        #expect(parsed == "frame 0x0020 #9 \(Array("body".utf8))")
        #expect(buffer.readableBytes == 0)
    }

    @Test func anEmptyBodyIsAFrame() {
        #expect(Self.parse(Self.frame(kind: 0x0002, requestID: 1)).map(Self.summary) == ["frame 0x0002 #1 []"])
    }

    @Test func aBodyOfMaxFrameBytesIsReadAndOneMoreIsFatalAsSoonAsTheHeaderArrives() {
        let limits = ProtocolLimits(maxFrameBytes: 16, maxDecompressedBytes: 64)
        let full = Self.frame(requestID: 1, body: Array(repeating: 0xAB, count: 16))
        #expect(Self.parse(full, limits: limits).count == 1)
        // Only the header of the over-long frame has arrived: it is fatal at once, and nothing after it is parsed.
        var parser = FrameParser(limits: limits)
        var buffer = ByteBuffer(bytes: Self.frame(length: 17, requestID: 3))
        guard case .fatal(let requestID, let error) = parser.next(from: &buffer) else {
            Issue.record("a 17-byte body over a 16-byte limit is not fatal")
            return
        }
        #expect(requestID == 3)
        #expect(error.code == .frameTooLarge)
        #expect(parser.isBroken)
        buffer.writeBytes(Array(repeating: 0, count: 17) + full)
        let after = parser.next(from: &buffer)
        #expect(after == nil)
    }

    @Test func aLengthOfUInt32MaxIsFatalUnderTheDefaultLimits() {
        let parsed = Self.parse(Self.frame(length: UInt32.max, requestID: 5)).map(Self.summary)
        #expect(parsed == ["fatal #5 FRAME_TOO_LARGE"])
    }

    @Test func anotherVersionIsRefusedAndTheStreamGoesOn() {
        let bytes =
            Self.frame(version: 2, kind: 0x0010, requestID: 4, body: [1, 2, 3]) + Self.frame(requestID: 5, body: [9])
        #expect(
            Self.parse(bytes).map(Self.summary) == ["refused 0x0010 #4 UNSUPPORTED_VERSION", "frame 0x0020 #5 [9]"])
        // A parser for version 2 takes version 2 and refuses version 1.
        #expect(
            Self.parse(bytes, version: 2).map(Self.summary) == [
                "frame 0x0010 #4 [1, 2, 3]", "refused 0x0020 #5 UNSUPPORTED_VERSION",
            ])
    }

    @Test func everyReservedFlagBitIsRefusedAndTheStreamGoesOn() {
        for bit in 1..<8 {
            let bytes = Self.frame(flags: 1 << bit, requestID: 6, body: [1]) + Self.frame(requestID: 7)
            #expect(
                Self.parse(bytes).map(Self.summary) == ["refused 0x0020 #6 BAD_FRAME", "frame 0x0020 #7 []"],
                "flag bit \(bit)")
        }
    }

    @Test func theVersionIsCheckedBeforeTheFlags() {
        let parsed = Self.parse(Self.frame(version: 0, flags: 0xFE, requestID: 8)).map(Self.summary)
        #expect(parsed == ["refused 0x0020 #8 UNSUPPORTED_VERSION"])
    }

    @Test func anUnknownKindIsLeftToTheRelay() {
        #expect(Self.parse(Self.frame(kind: 0x7777, requestID: 2)).map(Self.summary) == ["frame 0x7777 #2 []"])
    }

    @Test func aCompressedFrameIsDecompressed() {
        let plain = Array(repeating: UInt8(ascii: "u"), count: 5_000)
        var buffer = ByteBuffer()
        FrameEncoder(compressionThreshold: 0).encode(kind: .send, requestID: 11, body: plain, into: &buffer)
        let header = FrameHeader.peek(buffer)
        #expect(header?.flags == .zstd)
        #expect((header?.length ?? .max) < 100)
        #expect(Self.parse(Array(buffer.readableBytesView)).map(Self.summary) == ["frame 0x0020 #11 \(plain)"])
    }

    @Test func theEncoderCompressesFromItsThresholdOn() {
        for (count, compressed) in [(99, false), (100, true)] {
            var buffer = ByteBuffer()
            FrameEncoder(compressionThreshold: 100).encode(
                kind: .send, requestID: 1, body: Array(repeating: 0, count: count), into: &buffer)
            #expect(FrameHeader.peek(buffer)?.flags.contains(.zstd) == compressed, "\(count) bytes")
        }
        var never = ByteBuffer()
        FrameEncoder().encode(kind: .send, requestID: 1, body: Array(repeating: 0, count: 100_000), into: &never)
        #expect(FrameHeader.peek(never)?.flags == [])
    }

    @Test func aCompressedBodyOverTheDecompressedLimitIsRefusedAndTheStreamGoesOn() {
        let limits = ProtocolLimits(maxFrameBytes: 1_024, maxDecompressedBytes: 4_096)
        var buffer = ByteBuffer()
        let encoder = FrameEncoder(compressionThreshold: 0)
        encoder.encode(kind: .send, requestID: 1, body: Array(repeating: 0, count: 4_097), into: &buffer)
        encoder.encode(kind: .send, requestID: 2, body: Array(repeating: 0, count: 4_096), into: &buffer)
        let parsed = Self.parse(Array(buffer.readableBytesView), limits: limits)
        #expect(parsed.count == 2)
        #expect(parsed.first.map(Self.summary) == "refused 0x0020 #1 DECOMPRESSED_TOO_LARGE")
        guard case .frame(let frame) = parsed.last else {
            Issue.record("the frame at the limit is not read")
            return
        }
        #expect(frame.body.readableBytes == 4_096)
    }

    @Test func aBodyThatIsNotZstdIsRefusedAndTheStreamGoesOn() {
        let bytes = Self.frame(flags: 1, requestID: 3, body: Array("hello".utf8)) + Self.frame(requestID: 4)
        #expect(Self.parse(bytes).map(Self.summary) == ["refused 0x0020 #3 BAD_COMPRESSION", "frame 0x0020 #4 []"])
        let empty = Self.frame(flags: 1, requestID: 5)
        #expect(Self.parse(empty).map(Self.summary) == ["refused 0x0020 #5 BAD_COMPRESSION"])
    }

    @Test func aValidStreamSplitInTwoAtEveryPointYieldsItsFrames() {
        var buffer = ByteBuffer()
        FrameEncoder().encode(kind: .hello, requestID: 1, body: Array("tenant".utf8), into: &buffer)
        FrameEncoder(compressionThreshold: 0).encode(
            kind: .send, requestID: 2, body: Array(repeating: 3, count: 300), into: &buffer)
        FrameEncoder().encode(kind: .ping, requestID: 3, body: [], into: &buffer)
        FrameEncoder(compressionThreshold: 0).encode(kind: .goodbye, requestID: 4, body: [], into: &buffer)
        let bytes = Array(buffer.readableBytesView)
        let whole = Self.parse(bytes).map(Self.summary)
        #expect(whole.count == 4)
        #expect(whole.allSatisfy { $0.hasPrefix("frame") })
        for split in 0...bytes.count {
            var parser = FrameParser(limits: ProtocolLimits())
            var stream = ByteBuffer(bytes: bytes[..<split])
            var parsed: [String] = []
            while let next = parser.next(from: &stream) { parsed.append(Self.summary(next)) }
            stream.writeBytes(bytes[split...])
            while let next = parser.next(from: &stream) { parsed.append(Self.summary(next)) }
            #expect(parsed == whole, "split at \(split)")
            #expect(stream.readableBytes == 0, "split at \(split)")
        }
    }

    @Test func requestKindsAreRequestsAndTheirAnswersSetTheHighBit() {
        #expect(Set(FrameKind.requests).count == FrameKind.requests.count)
        for kind in FrameKind.requests {
            #expect(kind.isRequest, "\(kind)")
            #expect(!kind.answer.isRequest, "\(kind)")
            #expect(kind.answer.rawValue == kind.rawValue | 0x8000, "\(kind)")
        }
        #expect(!FrameKind.resultEvent.isRequest)
        #expect(!FrameKind.error.isRequest)
        #expect(!FrameKind(rawValue: 0).isRequest)
        #expect(FrameKind.send.description == "0x0020")
        #expect(FrameKind.error.description == "0xffff")
    }
}

import Foundation
import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

/// Property-based fuzzing of everything a peer controls: the frame stream, zstd bodies and request bodies.
///
/// Each property runs a bounded number of inputs drawn from a seeded generator, so CI runs the same inputs every
/// time and a failure names the seed and input number that reproduce it. `PUSHRELAY_FUZZ_ITERATIONS` raises the
/// number of inputs per property, `PUSHRELAY_FUZZ_SEED` draws other inputs. Each test prints one totals line.
@Suite struct FuzzTests {
    // MARK: - Frame parser

    @Test func theFrameParserMatchesItsSpecOnRandomAndMutatedStreamsFedInAnyChunks() {
        let inputs = FuzzConfig.iterations(default: 10_000)
        var totals = (frames: 0, refused: 0, fatal: 0)
        var codes: Set<Pushrelay_V1_ErrorCode> = []
        var failures = 0
        for input in 0..<inputs {
            var random = FuzzConfig.random(property: 1, input: input)
            let limits = StreamFuzz.limits(&random)
            var plains: [[UInt8]: [UInt8]] = [:]
            var bytes: [UInt8]
            if random.chance(0.2) {
                bytes = random.bytes(random.below(400))
            } else {
                let stream = StreamFuzz.validStream(&random, frames: 1 + random.below(5), maxBody: limits.maxFrameBytes)
                bytes = stream.bytes
                plains = stream.compressedPlains
                for _ in 0..<random.below(4) { StreamFuzz.mutate(&bytes, frameStarts: stream.starts, limits, &random) }
            }
            let expected = StreamFuzz.expected(bytes, limits: limits)
            var problems: [String] = []
            let whole = StreamFuzz.feed(bytes, chunks: [bytes.count], limits: limits, &random, &problems)
            let chunked = StreamFuzz.feed(
                bytes, chunks: StreamFuzz.chunks(bytes.count, &random), limits: limits, &random, &problems)
            for (name, fed) in [("whole", whole), ("chunked", chunked)] {
                if fed.consumed != expected.consumed {
                    problems.append("\(name): consumed \(fed.consumed) bytes, not \(expected.consumed)")
                }
                if fed.parsed.count != expected.outcomes.count {
                    problems.append("\(name): \(fed.parsed.count) results, not \(expected.outcomes.count)")
                }
                for (parsed, outcome) in zip(fed.parsed, expected.outcomes) {
                    if let problem = StreamFuzz.mismatch(parsed, outcome, limits: limits, plains: plains) {
                        problems.append("\(name): \(problem)")
                    }
                }
            }
            for parsed in whole.parsed {
                switch parsed {
                case .frame: totals.frames += 1
                case .refused(_, _, let error):
                    totals.refused += 1
                    codes.insert(error.code)
                case .fatal: totals.fatal += 1
                }
            }
            if !problems.isEmpty {
                failures += 1
                Issue.record(
                    Comment(
                        rawValue: "frame parser, \(FuzzConfig.reproduce(input)), limits "
                            + "\(limits.maxFrameBytes)/\(limits.maxDecompressedBytes), bytes \(hexDump(bytes)): "
                            + "\(problems.prefix(5))"))
                if failures >= 5 { break }
            }
        }
        print(
            "fuzz: frame parser: \(inputs) inputs, \(totals.frames) frames, \(totals.refused) refused, "
                + "\(totals.fatal) fatal")
        // The inputs reach every branch of the parser.
        #expect(totals.frames > inputs / 4)
        #expect(totals.fatal > inputs / 20)
        #expect(codes == [.unsupportedVersion, .badFrame, .badCompression, .decompressedTooLarge])
    }

    @Test func aValidStreamSplitAtAnyPointsYieldsExactlyTheFramesEncodedInOrder() {
        let streams = FuzzConfig.iterations(default: 2_000)
        var totals = (frames: 0, compressed: 0, chunks: 0)
        var failures = 0
        for input in 0..<streams {
            var random = FuzzConfig.random(property: 2, input: input)
            let stream = StreamFuzz.validStream(&random, frames: 1 + random.below(8), maxBody: 3_000)
            // Every body fits: 3,000 incompressible bytes or 9,000 of one byte.
            let limits = ProtocolLimits(maxFrameBytes: 10_000, maxDecompressedBytes: 10_000)
            let chunks = StreamFuzz.chunks(stream.bytes.count, &random)
            var problems: [String] = []
            let fed = StreamFuzz.feed(stream.bytes, chunks: chunks, limits: limits, &random, &problems)
            if fed.parsed.count != stream.frames.count {
                problems.append("\(fed.parsed.count) results for \(stream.frames.count) frames")
            }
            for (index, (parsed, sent)) in zip(fed.parsed, stream.frames).enumerated() {
                guard case .frame(let frame) = parsed, frame.kind == sent.kind, frame.requestID == sent.requestID,
                    frame.body.readableArray == sent.plain
                else {
                    problems.append("frame \(index): \(parsed), not \(sent.kind) #\(sent.requestID)")
                    continue
                }
            }
            if fed.consumed != stream.bytes.count {
                problems.append("consumed \(fed.consumed) of \(stream.bytes.count)")
            }
            totals.frames += stream.frames.count
            totals.compressed += stream.frames.count { $0.compressed }
            totals.chunks += chunks.count
            if !problems.isEmpty {
                failures += 1
                Issue.record(
                    "valid stream, \(FuzzConfig.reproduce(input)), chunks \(chunks): \(problems)")
                if failures >= 5 { break }
            }
        }
        print(
            "fuzz: frame parser, valid streams: \(streams) streams in \(totals.chunks) chunks, \(totals.frames) frames "
                + "(\(totals.compressed) compressed)")
        #expect(totals.compressed > 0)
        #expect(totals.compressed < totals.frames)
    }

    // MARK: - zstd

    @Test func zstdDecompressesToExactlyTheDeclaredSizeWithinTheLimitOrRefusesWithItsCode() {
        let inputs = FuzzConfig.iterations(default: 8_000)
        var totals = (decompressed: 0, badCompression: 0, tooLarge: 0, roundTrips: 0)
        var failures = 0
        for input in 0..<inputs {
            var random = FuzzConfig.random(property: 3, input: input)
            var problems: [String] = []
            let bytes: [UInt8]
            var limit = random.pick([0, 1, 64, 1_024, 70_000, 4_194_304])
            switch random.below(10) {
            case 0, 1:
                bytes = (random.chance(0.5) ? ZstdFrames.magic : []) + random.bytes(random.below(64))
            case 2, 3:
                bytes = ZstdFuzz.handMade(&random)
            case 4, 5, 6, 7:
                var compressed = ZstdFuzz.compressed(ZstdFuzz.plain(&random))
                for _ in 0...random.below(3) { ZstdFuzz.mutate(&compressed, &random) }
                bytes = compressed
            default:
                // A round trip, within the limit and one byte under it.
                let plain = ZstdFuzz.plain(&random)
                bytes = ZstdFuzz.compressed(plain)
                limit = plain.count + random.pick([0, 1, 4_194_304])
                totals.roundTrips += 1
                if ZstdTests.outcome(bytes, limit: limit) != .content(plain) {
                    problems.append("\(plain.count) bytes do not come back under a limit of \(limit)")
                }
                if !plain.isEmpty, ZstdTests.outcome(bytes, limit: plain.count - 1) != .refused(.decompressedTooLarge) {
                    problems.append("\(plain.count) bytes are not too large for a limit of \(plain.count - 1)")
                }
            }
            let outcome = ZstdTests.outcome(bytes, limit: limit)
            let declared = ZstdFrames.declared(bytes)
            switch outcome {
            case .content(let plain):
                totals.decompressed += 1
                if declared != .size(UInt64(plain.count)) {
                    problems.append("decompressed \(plain.count) bytes; the header declares \(declared)")
                }
                if plain.count > limit { problems.append("decompressed \(plain.count) bytes over the limit \(limit)") }
                let size = try? Zstd.declaredSize(of: ByteBuffer(bytes: bytes), limit: limit)
                if size != plain.count { problems.append("declaredSize says \(String(describing: size))") }
            case .refused(.badCompression):
                totals.badCompression += 1
            case .refused(.decompressedTooLarge):
                totals.tooLarge += 1
                switch declared {
                case .unknown: break
                case .size(let size) where size > UInt64(limit): break
                default: problems.append("too large under a limit of \(limit), but the header declares \(declared)")
                }
            case .refused(let code):
                problems.append("refused with \(code.name)")
            }
            if !problems.isEmpty {
                failures += 1
                let at = FuzzConfig.reproduce(input)
                Issue.record("zstd, \(at), limit \(limit), bytes \(hexDump(bytes)): \(problems)")
                if failures >= 5 { break }
            }
        }
        print(
            "fuzz: zstd: \(inputs) inputs, \(totals.decompressed) decompressed, \(totals.badCompression) bad "
                + "compression, \(totals.tooLarge) decompressed too large, \(totals.roundTrips) round trips")
        #expect(totals.decompressed > inputs / 10)
        #expect(totals.badCompression > inputs / 10)
        #expect(totals.tooLarge > 0)
    }

    // MARK: - Requests

    @Test func theRequestFuzzerCoversEveryRequestKind() {
        #expect(Set(RequestFuzz.cases.map(\.kind)) == Set(FrameKind.requests))
        #expect(RequestFuzz.cases.count == FrameKind.requests.count)
        for fuzzCase in RequestFuzz.cases {
            #expect(fuzzCase.declaresItsFieldCount, "\(fuzzCase.name): fieldCount in RequestKinds.swift")
        }
    }

    @Test(arguments: RequestFuzz.cases)
    func requestBodiesAreAcceptedOnlyWithinTheRulesAndRefusedWithTheirField(_ fuzzCase: RequestFuzz.Case) {
        let inputs = FuzzConfig.iterations(default: 1_000)
        let totals = fuzzCase.run(inputs)
        print(
            "fuzz: request \(fuzzCase.name): \(inputs) messages and \(inputs) mutated bodies, \(totals.accepted) "
                + "accepted, \(totals.invalidBody) invalid body, \(totals.invalidArgument) invalid argument, "
                + "\(totals.tooManyRecipients) too many recipients")
        for failure in totals.failures { Issue.record("request \(fuzzCase.name), \(failure)") }
        #expect(totals.accepted > 0)
        #expect(totals.invalidBody > 0)
        #expect((totals.invalidArgument > 0) == fuzzCase.hasRules)
        #expect((totals.tooManyRecipients > 0) == (fuzzCase.kind == .send))
    }
}

/// The fuzzer's seed and input count.
enum FuzzConfig {
    static let environment = ProcessInfo.processInfo.environment
    /// `PUSHRELAY_FUZZ_SEED`, or a fixed seed.
    static let seed: UInt64 = environment["PUSHRELAY_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x7075_7368_7265_6C79

    /// Inputs per property: `PUSHRELAY_FUZZ_ITERATIONS` when it is more than `count`.
    static func iterations(default count: Int) -> Int {
        max(count, environment["PUSHRELAY_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 0)
    }

    /// The generator of one input: it depends only on the seed, the property and the input's number.
    static func random(property: UInt64, input: Int) -> FuzzRandom {
        FuzzRandom(seed: seed ^ (property &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(input) &* 0xD1B5_4A32_D192_ED03))
    }

    /// How to reproduce an input of a property, for failure messages.
    static func reproduce(_ input: Int) -> String { "PUSHRELAY_FUZZ_SEED=\(seed), input \(input)" }
}

/// xoshiro256**, seeded through SplitMix64: the same seed draws the same numbers on every machine.
struct FuzzRandom: RandomNumberGenerator {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    init(seed: UInt64) {
        var state = seed
        func splitMix(_ state: inout UInt64) -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitMix(&state)
        s1 = splitMix(&state)
        s2 = splitMix(&state)
        s3 = splitMix(&state)
    }

    mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3 << 45 | s3 >> 19
        return result
    }

    /// A number from 0 to `count - 1`.
    mutating func below(_ count: Int) -> Int { count <= 1 ? 0 : Int.random(in: 0..<count, using: &self) }

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }

    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }

    /// `count` random bytes, eight from each number.
    mutating func bytes(_ count: Int) -> [UInt8] {
        var words = (0..<(count + 7) / 8).map { _ in next() }
        return words.withUnsafeMutableBytes { Array($0.prefix(count)) }
    }
}

extension ByteBuffer {
    /// The readable bytes, copied at once: a debug build reads `readableBytesView` slowly, byte by byte.
    var readableArray: [UInt8] { withUnsafeReadableBytes { Array($0) } }
}

/// At most the first 96 bytes as hex, for failure messages.
func hexDump(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(96).map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
    return bytes.count > 96 ? "\(shown)… (\(bytes.count) bytes)" : shown
}

// MARK: - Streams of frames

/// Streams of frames, their mutations, and what the spec says a parser makes of them.
enum StreamFuzz {
    /// One frame of a stream the fuzzer encoded.
    struct Sent {
        var kind: FrameKind
        var requestID: UInt32
        var plain: [UInt8]
        var compressed: Bool
    }

    /// What the spec says the parser makes of the next frame.
    enum Outcome: CustomStringConvertible {
        case frame(FrameKind, UInt32, [UInt8])
        /// A zstd body: decompressed, or refused as bad compression or too large.
        case compressed(FrameKind, UInt32, [UInt8])
        case refused(FrameKind, UInt32, Pushrelay_V1_ErrorCode)
        case fatal(UInt32)

        var description: String {
            switch self {
            case .frame(let kind, let requestID, let body): "frame \(kind) #\(requestID) \(hexDump(body))"
            case .compressed(let kind, let requestID, let body): "zstd frame \(kind) #\(requestID) \(hexDump(body))"
            case .refused(let kind, let requestID, let code): "refused \(kind) #\(requestID) \(code.name)"
            case .fatal(let requestID): "fatal #\(requestID)"
            }
        }
    }

    static func limits(_ random: inout FuzzRandom) -> ProtocolLimits {
        let frame = random.pick([16, 64, 300, 4_096])
        return ProtocolLimits(maxFrameBytes: frame, maxDecompressedBytes: frame * random.pick([1, 2, 8]))
    }

    /// A body: incompressible bytes, a run of one byte, or text.
    static func body(_ random: inout FuzzRandom, maxBody: Int) -> [UInt8] {
        switch random.below(3) {
        case 0: return random.bytes(random.below(maxBody + 1))
        case 1: return [UInt8](repeating: UInt8(truncatingIfNeeded: random.next()), count: random.below(3 * maxBody))
        default:
            let words = (0..<random.below(maxBody / 4 + 1)).map { _ in random.pick(["user", "-", "42", "chat", " "]) }
            return Array(words.joined().utf8)
        }
    }

    /// A valid stream of `frames` frames, some of them compressed, with where each frame starts and the plain body
    /// of each compressed body.
    static func validStream(_ random: inout FuzzRandom, frames count: Int, maxBody: Int) -> (
        bytes: [UInt8], frames: [Sent], starts: [Int], compressedPlains: [[UInt8]: [UInt8]]
    ) {
        var buffer = ByteBuffer()
        var frames: [Sent] = []
        var starts: [Int] = []
        var plains: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<count {
            let kind =
                random.chance(0.8)
                ? random.pick(FrameKind.requests)
                : FrameKind(rawValue: UInt16.random(in: 0...UInt16.max, using: &random))
            let requestID =
                random.chance(0.5) ? UInt32(random.below(100)) : UInt32.random(in: 0...UInt32.max, using: &random)
            let plain = body(&random, maxBody: maxBody)
            let compress = random.chance(0.4)
            starts.append(buffer.writerIndex)
            FrameEncoder(compressionThreshold: compress ? 0 : nil).encode(
                kind: kind, requestID: requestID, body: plain, into: &buffer)
            if compress {
                let bodyStart = starts.last! + FrameHeader.size
                plains[buffer.getBytes(at: bodyStart, length: buffer.writerIndex - bodyStart) ?? []] = plain
            }
            frames.append(Sent(kind: kind, requestID: requestID, plain: plain, compressed: compress))
        }
        // A body too long for the limit is still a valid frame: it must be fatal (plain) or too large (compressed).
        return (buffer.readableArray, frames, starts, plains)
    }

    /// One random change: a bit flip, a truncation, a new length, flags, version or kind in a header, bytes
    /// inserted, deleted or duplicated, or a body byte overwritten.
    static func mutate(_ bytes: inout [UInt8], frameStarts: [Int], _ limits: ProtocolLimits, _ random: inout FuzzRandom)
    {
        let header = random.pick(frameStarts)
        func set(_ offset: Int, _ values: [UInt8]) {
            guard header + offset + values.count <= bytes.count else { return }
            bytes.replaceSubrange(header + offset..<header + offset + values.count, with: values)
        }
        switch random.below(10) {
        case 0:
            guard !bytes.isEmpty else { return }
            bytes[random.below(bytes.count)] ^= 1 << UInt8(random.below(8))
        case 1:
            bytes.removeLast(random.below(bytes.count + 1))
        case 2:
            let current = header + 4 <= bytes.count ? bytes[header..<header + 4].reduce(0) { $0 << 8 | UInt32($1) } : 0
            let any = UInt32.random(in: 0...UInt32.max, using: &random)
            let small = UInt32(random.below(64))
            let length: UInt32 = random.pick([
                0, current &- 1, current &+ 1, UInt32(limits.maxFrameBytes), UInt32(limits.maxFrameBytes + 1), .max,
                any, small,
            ])
            set(0, [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        case 3:
            let any = UInt8(truncatingIfNeeded: random.next())
            set(5, [random.pick([0, 1, 2, 3, 0x80, 0xFE, 0xFF, any])])
        case 4:
            let any = UInt8(truncatingIfNeeded: random.next())
            set(4, [random.pick([0, 2, 0xFF, any])])
        case 5:
            set(6, random.bytes(2))
        case 6:
            bytes.insert(contentsOf: random.bytes(1 + random.below(16)), at: random.below(bytes.count + 1))
        case 7:
            let start = random.below(bytes.count + 1)
            bytes.removeSubrange(start..<min(bytes.count, start + 1 + random.below(16)))
        case 8:
            let start = random.below(bytes.count + 1)
            bytes.insert(
                contentsOf: bytes[start..<min(bytes.count, start + random.below(64))], at: random.below(bytes.count + 1)
            )
        default:
            // A byte of the body, often a zstd body, from its first bytes (the zstd frame header) on.
            let any = random.below(64)
            let offset = FrameHeader.size + random.pick([0, 1, 4, 5, 6, any])
            set(offset, [UInt8(truncatingIfNeeded: random.next())])
        }
    }

    /// Chunk sizes that add up to `count`: one chunk, one byte at a time, or random sizes.
    static func chunks(_ count: Int, _ random: inout FuzzRandom) -> [Int] {
        if count <= 1 { return [count] }
        switch random.below(4) {
        case 0: return [count]
        case 1 where count <= 600: return Array(repeating: 1, count: count)
        default:
            var sizes: [Int] = []
            var left = count
            // At most some 400 chunks: the small sizes are for short streams.
            let largest = max(random.pick([2, 13, 64, count / 2]), count / 200)
            while left > 0 {
                let size = min(left, random.below(largest + 1))
                sizes.append(size)
                left -= size
            }
            return sizes
        }
    }

    /// Feeds `bytes` in `chunks` to a parser, reading every frame after each chunk as the relay's handler does, and
    /// checks each call: `nil` consumes nothing, a frame or refusal consumes exactly its 12 bytes and body, a fatal
    /// result comes only for a length over the limit, and nothing comes after it.
    static func feed(
        _ bytes: [UInt8], chunks: [Int], limits: ProtocolLimits, _ random: inout FuzzRandom, _ problems: inout [String]
    ) -> (parsed: [ParsedFrame], consumed: Int) {
        var parser = FrameParser(limits: limits)
        var buffer = ByteBuffer()
        var offset = 0
        var consumed = 0
        var parsed: [ParsedFrame] = []
        var broken = false
        for size in chunks {
            bytes.withUnsafeBytes {
                _ = buffer.writeBytes(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + size]))
            }
            offset += size
            while true {
                let before = buffer.readableBytes
                let header = FrameHeader.peek(buffer)
                guard let next = parser.next(from: &buffer) else {
                    if buffer.readableBytes != before {
                        problems.append("nil, yet \(before - buffer.readableBytes) bytes consumed")
                    }
                    if !broken, let header, header.length > limits.maxFrameBytes {
                        problems.append("nil for a length over the limit")
                    }
                    break
                }
                let used = before - buffer.readableBytes
                consumed += used
                if broken { problems.append("\(next) after a fatal result") }
                guard let header else {
                    problems.append("\(next) from fewer than 12 bytes")
                    break
                }
                switch next {
                case .fatal(let requestID, let error):
                    broken = true
                    if header.length <= limits.maxFrameBytes {
                        problems.append("fatal for a length of \(header.length)")
                    }
                    if error.code != .frameTooLarge || requestID != header.requestID || !parser.isBroken {
                        problems.append("fatal as \(error.code.name) #\(requestID), broken: \(parser.isBroken)")
                    }
                case .frame(let frame):
                    if frame.body.readableBytes > limits.maxDecompressedBytes {
                        problems.append("a \(frame.body.readableBytes)-byte body over the limit")
                    }
                    fallthrough
                case .refused:
                    if used != FrameHeader.size + Int(header.length) {
                        problems.append("consumed \(used) bytes for a \(header.length)-byte body")
                    }
                }
                parsed.append(next)
                if random.chance(0.3) { buffer.discardReadBytes() }
            }
        }
        if consumed > bytes.count { problems.append("consumed \(consumed) of \(bytes.count) bytes") }
        return (parsed, consumed)
    }

    /// What Protocol/README.md says a reader makes of `bytes`, read independently of `FrameParser`.
    static func expected(_ bytes: [UInt8], limits: ProtocolLimits) -> (outcomes: [Outcome], consumed: Int) {
        var outcomes: [Outcome] = []
        var at = 0
        func integer(_ offset: Int, _ count: Int) -> UInt32 {
            bytes[at + offset..<at + offset + count].reduce(0) { $0 << 8 | UInt32($1) }
        }
        while bytes.count - at >= FrameHeader.size {
            let length = Int(integer(0, 4))
            let version = bytes[at + 4]
            let flags = bytes[at + 5]
            let kind = FrameKind(rawValue: UInt16(integer(6, 2)))
            let requestID = integer(8, 4)
            if length > limits.maxFrameBytes {
                outcomes.append(.fatal(requestID))
                break
            }
            guard bytes.count - at - FrameHeader.size >= length else { break }
            let body = Array(bytes[at + FrameHeader.size..<at + FrameHeader.size + length])
            at += FrameHeader.size + length
            if version != 1 {
                outcomes.append(.refused(kind, requestID, .unsupportedVersion))
            } else if flags & 0xFE != 0 {
                outcomes.append(.refused(kind, requestID, .badFrame))
            } else if flags == 1 {
                outcomes.append(.compressed(kind, requestID, body))
            } else {
                outcomes.append(.frame(kind, requestID, body))
            }
        }
        return (outcomes, at)
    }

    /// Why `parsed` is not what `outcome` allows, or `nil` when it is.
    static func mismatch(
        _ parsed: ParsedFrame, _ outcome: Outcome, limits: ProtocolLimits, plains: [[UInt8]: [UInt8]]
    ) -> String? {
        let got: String
        switch parsed {
        case .frame(let frame): got = "frame \(frame.kind) #\(frame.requestID) \(frame.body.readableBytes) bytes"
        case .refused(let requestID, let kind, let error): got = "refused \(kind) #\(requestID) \(error.code.name)"
        case .fatal(let requestID, let error): got = "fatal #\(requestID) \(error.code.name)"
        }
        switch (outcome, parsed) {
        case (.frame(let kind, let requestID, let body), .frame(let frame)):
            if frame.kind == kind, frame.requestID == requestID, frame.body.readableArray == body { return nil }
        case (.refused(let kind, let requestID, let code), .refused(let gotID, let gotKind, let error)):
            if gotKind == kind, gotID == requestID, error.code == code { return nil }
        case (.fatal(let requestID), .fatal(let gotID, let error)):
            if gotID == requestID, error.code == .frameTooLarge { return nil }
        case (.compressed(let kind, let requestID, let body), _):
            if let plain = plains[body] {
                // A body the encoder compressed: its plain bytes, or too large.
                switch parsed {
                case .frame(let frame) where plain.count <= limits.maxDecompressedBytes:
                    if frame.kind == kind, frame.requestID == requestID, frame.body.readableArray == plain {
                        return nil
                    }
                case .refused(let gotID, let gotKind, let error) where plain.count > limits.maxDecompressedBytes:
                    if gotKind == kind, gotID == requestID, error.code == .decompressedTooLarge { return nil }
                default: break
                }
                return "\(got) for a compressed \(plain.count)-byte body"
            }
            switch parsed {
            case .frame(let frame):
                let declared = ZstdFrames.declared(body)
                if frame.kind == kind, frame.requestID == requestID,
                    declared == .size(UInt64(frame.body.readableBytes))
                {
                    return nil
                }
                return "\(got) from a zstd body declaring \(declared)"
            case .refused(let gotID, let gotKind, let error):
                if gotKind == kind, gotID == requestID, [.badCompression, .decompressedTooLarge].contains(error.code) {
                    return nil
                }
            case .fatal: break
            }
        default: break
        }
        return "\(got) where the spec says \(outcome)"
    }
}

// MARK: - zstd bodies

/// zstd bodies for the fuzzer: plain bytes to compress, frames made by hand, and mutations.
enum ZstdFuzz {
    static func plain(_ random: inout FuzzRandom) -> [UInt8] {
        switch random.below(3) {
        case 0: return random.bytes(random.below(2_000))
        case 1: return [UInt8](repeating: UInt8(truncatingIfNeeded: random.next()), count: random.below(100_000))
        default:
            return Array((0..<random.below(500)).map { _ in random.pick(["push", "relay", " ", "42"]) }.joined().utf8)
        }
    }

    static func compressed(_ plain: [UInt8]) -> [UInt8] { ZstdTests.compressed(plain) }

    /// A frame of raw and RLE blocks that may declare its size truthfully, falsely or not at all, with a random
    /// descriptor byte now and then, and trailing bytes or a skippable frame around it now and then.
    static func handMade(_ random: inout FuzzRandom) -> [UInt8] {
        var blocks: [ZstdFrames.Block] = []
        var content = 0
        for _ in 0..<random.below(4) {
            if random.chance(0.5) {
                let data = random.bytes(random.below(300))
                blocks.append(.raw(data))
                content += data.count
            } else {
                let count = random.below(5_000)
                blocks.append(.rle(UInt8(truncatingIfNeeded: random.next()), count: count))
                content += count
            }
        }
        let any = UInt64(random.below(1 << 20))
        let size: UInt64? = random.pick([
            UInt64(content), UInt64(content), UInt64(content) &+ 1, UInt64(content) &- 1, 0, nil, .max, .max - 1, any,
        ])
        // The smallest size field, or all 8 bytes.
        let wide = random.chance(0.3)
        let sizeBytes: Int? = size.map { $0 > UInt64(UInt32.max) || wide ? 8 : nil } ?? nil
        var frame = ZstdFrames.frame(contentSize: size, sizeFieldBytes: sizeBytes, blocks: blocks)
        if random.chance(0.15) { frame[4] = UInt8(truncatingIfNeeded: random.next()) }
        switch random.below(8) {
        case 0: frame += random.bytes(1 + random.below(8))
        case 1: frame = ZstdFrames.skippable(random.bytes(random.below(8))) + frame
        case 2: frame += frame
        default: break
        }
        return frame
    }

    /// One random change to a zstd body, often in its frame header.
    static func mutate(_ bytes: inout [UInt8], _ random: inout FuzzRandom) {
        guard !bytes.isEmpty else {
            bytes = random.bytes(random.below(16))
            return
        }
        let headerByte = min(bytes.count - 1, random.pick([4, 5, 6, 7, 8, 9, 10, 11, 12]))
        switch random.below(8) {
        case 0: bytes[random.below(bytes.count)] ^= 1 << UInt8(random.below(8))
        case 1: bytes[headerByte] = UInt8(truncatingIfNeeded: random.next())
        case 2: bytes[headerByte] ^= 1 << UInt8(random.below(8))
        case 3: bytes.removeLast(random.below(bytes.count + 1))
        case 4: bytes += random.bytes(1 + random.below(8))
        case 5: bytes.insert(contentsOf: random.bytes(1 + random.below(8)), at: random.below(bytes.count + 1))
        case 6:
            let start = random.below(bytes.count)
            bytes.removeSubrange(start..<min(bytes.count, start + 1 + random.below(8)))
        default: bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next())
        }
    }
}

// MARK: - Request bodies

/// Request messages with fields from a hostile palette, their mutated bodies, and the properties every message the
/// relay accepts has.
enum RequestFuzz {
    /// The relay's clock: 2026-05-28T20:26:40Z.
    static let now: Int64 = 1_780_000_000_000

    /// One request kind for the parameterized test.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var kind: FrameKind
        /// Whether any field of the message has a rule (every declared field has one: it appears at most once
        /// unless it is repeated).
        var hasRules: Bool
        /// Whether the message declares fields 1 to `fieldCount` and no field after them.
        var declaresItsFieldCount: Bool
        var run: @Sendable (_ inputs: Int) -> Totals
        var testDescription: String { name }
    }

    struct Totals {
        var accepted = 0
        var invalidBody = 0
        var invalidArgument = 0
        var tooManyRecipients = 0
        var failures: [String] = []
    }

    /// The fuzz case of request message `M`: `make` draws a message, `audit` states the properties of an accepted one.
    static func fuzz<M: FramedRequest>(
        _ type: M.Type, hasRules: Bool = true, make: @escaping @Sendable (inout Draw) -> M,
        audit: @escaping @Sendable (M, inout Audit) -> Void
    ) -> Case {
        let declared = (1..<M.fieldCount + 2).map { Protobuf.declares(M.self, field: $0) }
        let counted = declared == Array(repeating: true, count: M.fieldCount) + [false]
        return Case(name: M.fieldName, kind: M.frameKind, hasRules: hasRules, declaresItsFieldCount: counted) {
            inputs in
            var totals = Totals()
            let property = UInt64(M.frameKind.rawValue) << 8
            for input in 0..<inputs {
                var draw = Draw(random: FuzzConfig.random(property: property, input: input))
                let message = make(&draw)
                let limits = draw.limits
                let clock = draw.now
                let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
                var mutated = bytes
                for _ in 0...draw.random.below(3) { mutate(&mutated, &draw.random) }
                for (body, isMutated) in [(bytes, false), (mutated, true)] {
                    let verdict = Verdict(of: M.self, body: body, limits: limits, nowMilliseconds: clock)
                    var problems: [String] = []
                    switch verdict {
                    case .accepted:
                        totals.accepted += 1
                        var findings = Audit(limits: limits, now: clock)
                        if let decoded = try? M(serializedBytes: body) {
                            audit(decoded, &findings)
                            // Only fields the message does not declare are left unknown, and none is a group.
                            for field in Protobuf.fields(Array(decoded.unknownFields.data)) {
                                if field.number >= 1, field.number <= M.fieldCount {
                                    problems.append("accepted with field \(field.number) of another wire type")
                                }
                                if field.wireType == 3 || field.wireType == 4 {
                                    problems.append("accepted with group \(field.number)")
                                }
                            }
                        } else {
                            problems.append("accepted, yet does not decode")
                        }
                        problems += findings.problems
                    case .refused(.invalidBody, _):
                        totals.invalidBody += 1
                        if !isMutated { problems.append("the body of a message built in memory is invalid") }
                    case .refused(.invalidArgument, let field):
                        totals.invalidArgument += 1
                        if field != M.fieldName, !field.hasPrefix(M.fieldName + ".") {
                            problems.append("INVALID_ARGUMENT names field '\(field)'")
                        }
                    case .refused(.tooManyRecipients, let field) where M.frameKind == .send:
                        totals.tooManyRecipients += 1
                        if !["send.user_ids", "send.tokens", "send.exclude_user_ids"].contains(field) {
                            problems.append("TOO_MANY_RECIPIENTS names field '\(field)'")
                        }
                    case .refused(let code, let field):
                        problems.append("refused with \(code.name) (\(field))")
                    }
                    if !isMutated {
                        // The message's own validate agrees with what the relay makes of its frame.
                        var direct = Verdict.accepted
                        do throws(ProtocolError) {
                            try message.validate(limits: limits, nowMilliseconds: clock)
                        } catch {
                            direct = .refused(error.code, field: error.field)
                        }
                        if direct != verdict { problems.append("validate says \(direct), the frame \(verdict)") }
                    }
                    if !problems.isEmpty, totals.failures.count < 5 {
                        totals.failures.append(
                            "\(FuzzConfig.reproduce(input))\(isMutated ? " mutated" : ""), "
                                + "\(verdict), body \(hexDump(body)): \(problems)")
                    }
                }
            }
            return totals
        }
    }

    /// One random change to a protobuf body: a bit flip, a truncation, inserted bytes, or a field appended with a
    /// hostile value (an id of control characters, bytes that are not UTF-8, a 10-byte varint, a wire type the
    /// field may not have, a bad wire type, a group).
    static func mutate(_ bytes: inout [UInt8], _ random: inout FuzzRandom) {
        switch random.below(6) {
        case 0:
            guard !bytes.isEmpty else { return }
            bytes[random.below(bytes.count)] ^= 1 << UInt8(random.below(8))
        case 1: bytes.removeLast(random.below(bytes.count + 1))
        case 2: bytes.insert(contentsOf: random.bytes(1 + random.below(8)), at: random.below(bytes.count + 1))
        default:
            let field = UInt64(1 + random.below(30))
            switch random.below(6) {
            case 0:
                let value =
                    random.chance(0.3)
                    ? random.pick([[0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80]])
                    : Array(Palette.hostileString(&random).utf8)
                bytes += Protobuf.tag(field, 2) + Protobuf.varint(UInt64(value.count)) + value
            case 1:
                // Int64.min as a varint.
                bytes += Protobuf.tag(field, 0) + Protobuf.varint(UInt64(bitPattern: Int64.min))
            case 2: bytes += Protobuf.tag(field, random.pick([3, 4, 6, 7]))
            case 3: bytes += Protobuf.tag(field, 3) + Protobuf.tag(field, 4)
            case 4: bytes += Protobuf.tag(field, 5) + random.bytes(4)
            default: bytes += Protobuf.tag(field, 1) + random.bytes(8)
            }
        }
    }

    static let cases: [Case] = [
        fuzz(Pushrelay_V1_Hello.self) { draw in
            var message = Pushrelay_V1_Hello()
            message.minVersion = draw.anyUInt32()
            message.maxVersion = draw.anyUInt32()
            message.tenant = draw.id()
            message.credential = draw.hostile() ? draw.id() : "prk_" + Palette.hex(&draw.random, 40)
            message.clientName = draw.id(required: false)
            message.acceptZstd = draw.random.chance(0.5)
            return message
        } audit: { message, audit in
            // Tenant and credential are left to authentication.
            audit.id(message.clientName, "client_name", required: false)
        },
        fuzz(Pushrelay_V1_Ping.self) { draw in
            var message = Pushrelay_V1_Ping()
            let any = draw.random.next()
            message.nonce = draw.random.pick([0, 1, .max, any])
            return message
        } audit: { _, _ in
        },
        fuzz(Pushrelay_V1_Goodbye.self) { draw in
            var message = Pushrelay_V1_Goodbye()
            message.reason = draw.id(required: false)
            return message
        } audit: { message, audit in
            audit.id(message.reason, "reason", required: false)
        },
        fuzz(Pushrelay_V1_RegisterDevice.self) { draw in
            var message = Pushrelay_V1_RegisterDevice()
            message.userID = draw.id()
            message.provider = draw.hostile() ? draw.id() : draw.random.pick(["", "", "apns", "fcm"])
            message.token = draw.token()
            message.platform = draw.hostile() ? draw.id() : draw.random.pick(["ios", "ipados", "macos", "watchos"])
            message.environment =
                draw.hostile()
                ? draw.random.pick([.unspecified, .UNRECOGNIZED(3), .UNRECOGNIZED(-1)])
                : draw.random.pick([.production, .sandbox])
            message.deviceID = draw.id(required: false)
            message.appVersion = draw.id(required: false, maximumBytes: 64)
            message.locale = draw.hostile() ? draw.id() : draw.random.pick(["", "de-CH", "en-US"])
            message.timeZone = draw.timeZone()
            message.topics = draw.list(valid: 0...3, hostileCounts: [256, 257]) { $0.id() }
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
            let provider = message.provider.isEmpty ? "apns" : message.provider
            audit.that(
                (1...32).contains(provider.utf8.count)
                    && provider.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 },
                "provider")
            audit.token(message.token, "token", apnsOnly: provider == "apns")
            audit.id(message.platform, "platform", maximumBytes: 32)
            if provider == "apns" {
                audit.that(message.environment == .production || message.environment == .sandbox, "environment")
            }
            audit.id(message.deviceID, "device_id", required: false)
            audit.id(message.appVersion, "app_version", required: false, maximumBytes: 64)
            audit.id(message.locale, "locale", required: false, maximumBytes: 64)
            audit.timeZone(message.timeZone, "time_zone")
            audit.that(message.topics.count <= FieldRules.maximumListCount, "topics count")
            for topic in message.topics { audit.id(topic, "topics") }
        },
        fuzz(Pushrelay_V1_UnregisterDevice.self) { draw in
            var message = Pushrelay_V1_UnregisterDevice()
            let byToken = draw.random.chance(0.5)
            message.token = byToken || draw.hostile() ? draw.token() : ""
            message.userID = draw.id(required: !byToken)
            message.platform = draw.hostile() ? draw.id() : byToken && draw.random.chance(0.5) ? "" : "ios"
            return message
        } audit: { message, audit in
            if message.token.isEmpty {
                audit.id(message.userID, "user_id")
                audit.id(message.platform, "platform", maximumBytes: 32)
            } else {
                audit.token(message.token, "token")
                audit.id(message.userID, "user_id", required: false)
                audit.id(message.platform, "platform", required: false, maximumBytes: 32)
            }
        },
        fuzz(Pushrelay_V1_ListDevices.self) { draw in
            var message = Pushrelay_V1_ListDevices()
            message.userID = draw.id()
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
        },
        fuzz(Pushrelay_V1_Send.self, make: Draw.send, audit: Audit.send),
        fuzz(Pushrelay_V1_JobStatus.self) { draw in
            var message = Pushrelay_V1_JobStatus()
            message.jobID = draw.id()
            return message
        } audit: { message, audit in
            audit.id(message.jobID, "job_id")
        },
        fuzz(Pushrelay_V1_CancelJob.self) { draw in
            var message = Pushrelay_V1_CancelJob()
            message.jobID = draw.id()
            return message
        } audit: { message, audit in
            audit.id(message.jobID, "job_id")
        },
        fuzz(Pushrelay_V1_ListNotificationTypes.self, hasRules: false) { _ in
            Pushrelay_V1_ListNotificationTypes()
        } audit: { _, _ in
        },
        fuzz(Pushrelay_V1_QueryDeliveries.self) { draw in
            var message = Pushrelay_V1_QueryDeliveries()
            let filter = draw.random.below(4)
            if filter == 0 || draw.hostile() { message.jobID = draw.id() }
            if filter == 1 || draw.hostile() { message.userID = draw.id() }
            if filter == 2 || draw.hostile() { message.token = draw.token() }
            if filter == 3 || draw.hostile() {
                if draw.random.chance(0.3) {
                    message.toMs = .max
                } else {
                    message.fromMs = draw.int64(valid: 0...now)
                    message.toMs = draw.int64(valid: min(message.fromMs, .max - 1) + 1...Int64.max)
                }
            }
            message.limit = draw.uint32(valid: 0...FieldRules.maximumQueryLimit)
            return message
        } audit: { message, audit in
            audit.id(message.jobID, "job_id", required: false)
            audit.id(message.userID, "user_id", required: false)
            if !message.token.isEmpty { audit.token(message.token, "token") }
            let byTime = message.fromMs != 0 || message.toMs != 0
            audit.that(
                [!message.jobID.isEmpty, !message.userID.isEmpty, !message.token.isEmpty, byTime].count { $0 } == 1,
                "one filter")
            audit.that(message.fromMs >= 0 && message.toMs >= 0, "times from 0 on")
            // A range open at its end (to_ms 0) needs no order.
            audit.that(!byTime || message.toMs == 0 || message.fromMs < message.toMs, "from before to")
            audit.that(message.limit <= FieldRules.maximumQueryLimit, "limit")
        },
        fuzz(Pushrelay_V1_SetPreferences.self) { draw in
            var message = Pushrelay_V1_SetPreferences()
            message.userID = draw.id()
            message.preferences = draw.list(valid: 0...3, hostileCounts: [256, 257]) { draw in
                var preference = Pushrelay_V1_TypePreference()
                preference.notificationType = draw.id()
                preference.enabled = draw.random.chance(0.5)
                preference.mandatory = draw.random.chance(0.1)
                return preference
            }
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
            audit.that(message.preferences.count <= FieldRules.maximumListCount, "preferences count")
            for preference in message.preferences { audit.id(preference.notificationType, "notification_type") }
        },
        fuzz(Pushrelay_V1_GetPreferences.self) { draw in
            var message = Pushrelay_V1_GetPreferences()
            message.userID = draw.id()
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
        },
        fuzz(Pushrelay_V1_SetMute.self) { draw in
            var message = Pushrelay_V1_SetMute()
            message.userID = draw.id()
            message.threadID = draw.id(required: false)
            message.scope = draw.id(required: false)
            message.untilMs = draw.int64(valid: 0...FieldRules.latestMilliseconds)
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
            audit.id(message.threadID, "thread_id", required: false)
            audit.id(message.scope, "scope", required: false)
            audit.that((0...FieldRules.latestMilliseconds).contains(message.untilMs), "until_ms")
            audit.that(message.threadID.isEmpty != message.scope.isEmpty, "thread_id or scope")
        },
        fuzz(Pushrelay_V1_ClearMute.self) { draw in
            var message = Pushrelay_V1_ClearMute()
            message.userID = draw.id()
            message.threadID = draw.id(required: false)
            message.scope = draw.id(required: false)
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
            audit.id(message.threadID, "thread_id", required: false)
            audit.id(message.scope, "scope", required: false)
            audit.that(message.threadID.isEmpty != message.scope.isEmpty, "thread_id or scope")
        },
        fuzz(Pushrelay_V1_ListMutes.self) { draw in
            var message = Pushrelay_V1_ListMutes()
            message.userID = draw.id()
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
        },
        fuzz(Pushrelay_V1_SetPresence.self) { draw in
            var message = Pushrelay_V1_SetPresence()
            message.userID = draw.id()
            message.threadID = draw.id()
            message.seconds = draw.uint32(valid: 0...FieldRules.maximumPresenceSeconds)
            return message
        } audit: { message, audit in
            audit.id(message.userID, "user_id")
            audit.id(message.threadID, "thread_id")
            audit.that(message.seconds <= FieldRules.maximumPresenceSeconds, "seconds")
        },
        fuzz(Pushrelay_V1_SubscribeResults.self) { draw in
            var message = Pushrelay_V1_SubscribeResults()
            message.receipts = draw.random.chance(0.5)
            return message
        } audit: { _, _ in
        },
        fuzz(Pushrelay_V1_UnsubscribeResults.self) { draw in
            var message = Pushrelay_V1_UnsubscribeResults()
            message.subscriptionRequestID = draw.anyUInt32()
            return message
        } audit: { _, _ in
        },
    ]
}

/// The hostile palette.
enum Palette {
    static let hexDigits = Array("0123456789abcdefABCDEF")

    static func hex(_ random: inout FuzzRandom, _ count: Int) -> String {
        String((0..<count).map { _ in random.pick(hexDigits) })
    }

    static let strings: [String] = [
        "", "\0", "user\0", "\n", "a\nb", "\r\n", "\t", "\u{1B}[31m", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}", "\u{A0}",
        "\u{2028}", "\u{202E}evil", "\u{FEFF}", "\u{0301}", "🙂", String(repeating: "a", count: 200),
        String(repeating: "a", count: 201), String(repeating: "é", count: 100),
        String(repeating: "a", count: 199) + "é",
        String(repeating: "a", count: 32), String(repeating: "a", count: 33), String(repeating: "a", count: 64),
        String(repeating: "a", count: 65), String(repeating: "0123456789abcdef", count: 4),
        String(repeating: "0123456789ABCDEF", count: 4), String(repeating: "f", count: 63),
        String(repeating: "f", count: 62), String(repeating: "f", count: 65), String(repeating: "f", count: 200),
        String(repeating: "f", count: 201), String(repeating: "f", count: 202), String(repeating: "f", count: 63) + "g",
        "Europe/Berlin", "Mars/Olympus", "EST", "UTC", "GMT", "../../etc/passwd", "%s%n", "{name}", "2026-11-22T00:00",
        "user-1", "' OR 1=1 --",
    ]

    /// Scalars from every UTF-8 length, control characters included.
    static func unicode(_ random: inout FuzzRandom) -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<random.below(40) {
            let range: ClosedRange<UInt32> = random.pick([
                0...0x7F, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x10000...0x10FFFF,
            ])
            if let scalar = Unicode.Scalar(UInt32.random(in: range, using: &random)) { text.append(scalar) }
        }
        return String(text)
    }

    static func hostileString(_ random: inout FuzzRandom) -> String {
        random.chance(0.75) ? random.pick(strings) : unicode(&random)
    }

    static func validID(_ random: inout FuzzRandom) -> String {
        random.pick(["user-", "u", "thread:", "circle-", "type_", "ü-"]) + String(random.next() % 100_000)
    }

    static let int64s: [Int64] = [
        0, 1, -1, .min, .max, Int64(UInt32.max), FieldRules.latestMilliseconds, FieldRules.latestMilliseconds + 1,
        FieldRules.earliestSendAtMilliseconds, FieldRules.earliestSendAtMilliseconds - 1, RequestFuzz.now,
        RequestFuzz.now + FieldRules.scheduleHorizonMilliseconds,
        RequestFuzz.now + FieldRules.scheduleHorizonMilliseconds + 1, FieldRules.latestExpirationSeconds,
        FieldRules.latestExpirationSeconds + 1,
    ]
    static let uint32s: [UInt32] = [0, 1, 5, 10, .max, 604_800, 604_801, 1_000, 1_001]
    static let doubles: [Double] = [
        .nan, .infinity, -.infinity, -1, 0, 0.5, 1, 2, -0.0, 1.000_000_000_000_000_2, .leastNonzeroMagnitude,
        .greatestFiniteMagnitude,
    ]
}

/// Draws one message's fields: each is hostile with the message's hostility, else valid.
struct Draw {
    var random: FuzzRandom
    /// How likely each field is to be drawn from the hostile palette.
    let hostility: Double
    let limits: ProtocolLimits
    let now: Int64

    init(random: FuzzRandom) {
        var random = random
        hostility = random.pick([0, 0, 0.03, 0.1, 0.3, 1])
        limits = ProtocolLimits(maxRecipients: random.pick([1, 3, 100]))
        // Clocks past the calendar's end too; none before 1999, where Send's horizon ends before 2000.
        now = random.pick([RequestFuzz.now, RequestFuzz.now, FieldRules.latestMilliseconds, .max])
        self.random = random
    }

    mutating func hostile() -> Bool { random.chance(hostility) }

    mutating func id(required: Bool = true, maximumBytes: Int = FieldRules.maximumIDBytes) -> String {
        if hostile() { return Palette.hostileString(&random) }
        if !required, random.chance(0.5) { return "" }
        return String(Palette.validID(&random).prefix(maximumBytes))
    }

    mutating func token() -> String {
        if hostile() { return Palette.hostileString(&random) }
        if random.chance(0.2) { return "fcm:" + Palette.hex(&random, 20) + ":APA91b-Mixed_Case" }
        return Palette.hex(&random, 2 * random.pick([32, 33, 50, 100]))
    }

    mutating func text() -> String {
        hostile()
            ? Palette.hostileString(&random) : String(Palette.unicode(&random).unicodeScalars.filter { $0 != "\0" })
    }

    mutating func timeZone() -> String {
        hostile()
            ? Palette.hostileString(&random)
            : random.pick(["", "Europe/Berlin", "America/New_York", "UTC", "Asia/Kolkata", "Japan", "GMT+5"])
    }

    mutating func int64(valid range: ClosedRange<Int64>) -> Int64 {
        if hostile() {
            return random.chance(0.8) ? random.pick(Palette.int64s) : Int64.random(in: .min ... .max, using: &random)
        }
        let any = Int64.random(in: range, using: &random)
        return random.pick([range.lowerBound, range.upperBound, any])
    }

    mutating func uint32(valid range: ClosedRange<UInt32>) -> UInt32 {
        if hostile() {
            return random.chance(0.8) ? random.pick(Palette.uint32s) : UInt32.random(in: 0...UInt32.max, using: &random)
        }
        let any = UInt32.random(in: range, using: &random)
        return random.pick([range.lowerBound, range.upperBound, any])
    }

    mutating func anyUInt32() -> UInt32 {
        random.chance(0.5) ? random.pick(Palette.uint32s) : UInt32.random(in: 0...UInt32.max, using: &random)
    }

    mutating func list<T>(valid counts: ClosedRange<Int>, hostileCounts: [Int], _ element: (inout Draw) -> T) -> [T] {
        let count = hostile() ? random.pick(hostileCounts) : Int.random(in: counts, using: &random)
        return (0..<count).map { _ in element(&self) }
    }

    /// A Send: one audience when valid, any number of them when hostile.
    @Sendable static func send(_ draw: inout Draw) -> Pushrelay_V1_Send {
        var message = Pushrelay_V1_Send()
        message.notificationType = draw.id()
        let audience = draw.random.below(3)
        let recipients = [draw.limits.maxRecipients, draw.limits.maxRecipients + 1]
        if audience == 0 || draw.hostile() {
            message.userIds = draw.list(valid: 1...3, hostileCounts: [0] + recipients) { $0.id() }
        }
        if audience == 1 || draw.hostile() {
            message.tokens = draw.list(valid: 1...3, hostileCounts: [0] + recipients) { draw in
                var target = Pushrelay_V1_TokenTarget()
                target.token = draw.token()
                return target
            }
        }
        if audience == 2 || draw.hostile() { message.topic = draw.id() }
        message.excludeUserIds = draw.list(valid: 0...2, hostileCounts: recipients) { $0.id() }
        message.idempotencyKey = draw.id(required: false)
        if draw.random.chance(0.5) {
            message.alert.title = draw.text()
            message.alert.subtitle = draw.text()
            message.alert.body = draw.text()
            message.alert.launchImage = draw.text()
            message.alert.titleLocKey = draw.text()
            message.alert.subtitleLocKey = draw.text()
            message.alert.locKey = draw.text()
            message.alert.titleLocArgs = draw.list(valid: 0...2, hostileCounts: [3]) { $0.text() }
            message.alert.subtitleLocArgs = draw.list(valid: 0...2, hostileCounts: [3]) { $0.text() }
            message.alert.locArgs = draw.list(valid: 0...2, hostileCounts: [3]) { $0.text() }
        }
        if draw.random.chance(0.3) { message.badge = draw.anyUInt32() }
        message.sound = draw.id(required: false)
        message.threadID = draw.id(required: false)
        message.category = draw.id(required: false)
        message.contentAvailable = draw.random.chance(0.5)
        message.mutableContent = draw.random.chance(0.5)
        message.interruptionLevel = draw.hostile() ? draw.id() : draw.random.pick(["", "passive", "time-sensitive"])
        if draw.random.chance(0.5) {
            let any = Double.random(in: 0...1, using: &draw.random)
            message.relevanceScore = draw.hostile() ? draw.random.pick(Palette.doubles) : draw.random.pick([0, 1, any])
        }
        message.customJson = draw.text()
        for _ in 0..<draw.random.below(3) { message.templateValues[draw.id()] = draw.id(required: false) }
        message.collapseID = draw.id(required: false, maximumBytes: FieldRules.maximumCollapseIDBytes)
        if draw.random.chance(0.5) { message.expiration = draw.int64(valid: 0...FieldRules.latestExpirationSeconds) }
        if draw.random.chance(0.5) {
            message.priority = draw.hostile() ? draw.anyUInt32() : draw.random.pick([1, 5, 10])
        }
        message.wait = draw.random.chance(0.5)
        message.scope = draw.id(required: false)
        if draw.random.chance(0.5) {
            let latest = min(draw.now, FieldRules.latestMilliseconds) + FieldRules.scheduleHorizonMilliseconds
            message.sendAtMs = draw.int64(valid: FieldRules.earliestSendAtMilliseconds...latest)
        }
        message.sendAtLocal =
            draw.hostile()
            ? draw.random.pick([draw.id(), "2026-02-29T00:00", "2026-11-22T24:00", "+2026-11-22T00:00"])
            : draw.random.pick(["", "2026-11-22T00:00", "2026-11-22T00:00:00"])
        return message
    }
}

/// The properties of an accepted message, stated apart from RequestValidation.swift: control characters are
/// Unicode's category Cc, hex digits are ASCII.
struct Audit {
    let limits: ProtocolLimits
    let now: Int64
    var problems: [String] = []

    mutating func that(_ condition: Bool, _ what: String) {
        if !condition { problems.append("accepted with a bad \(what)") }
    }

    mutating func id(
        _ value: String, _ field: String, required: Bool = true, maximumBytes: Int = FieldRules.maximumIDBytes
    ) {
        if required, value.isEmpty { problems.append("accepted without \(field)") }
        if value.utf8.count > maximumBytes { problems.append("accepted a \(value.utf8.count)-byte \(field)") }
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            problems.append("accepted a control character in \(field): \(value.debugDescription)")
        }
    }

    /// A token of APNs (`apnsOnly`) or of any provider: APNs' hex form, or 1 to 4,096 bytes without spaces,
    /// control or format characters.
    mutating func token(_ value: String, _ field: String, apnsOnly: Bool = false) {
        let hexDigit = { (byte: UInt8) in
            (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
        }
        let apns =
            (64...200).contains(value.utf8.count) && value.utf8.count % 2 == 0 && value.utf8.allSatisfy(hexDigit)
        let opaque =
            (1...4_096).contains(value.utf8.count)
            && !value.unicodeScalars.contains {
                $0.value <= 0x20 || $0.value == 0x7F || $0.properties.isWhitespace
                    || [.control, .format].contains($0.properties.generalCategory)
            }
        if !(apns || (!apnsOnly && opaque)) {
            problems.append("accepted the \(field) \(value.debugDescription)")
        }
    }

    mutating func text(_ value: String, _ field: String) {
        if value.utf8.contains(0) { problems.append("accepted a NUL in \(field)") }
    }

    mutating func timeZone(_ value: String, _ field: String) {
        guard !value.isEmpty else { return }
        id(value, field, maximumBytes: 64)
        if !FieldRules.timeZoneNames.contains(value) || TimeZone(identifier: value) == nil {
            problems.append("accepted the \(field) \(value.debugDescription)")
        }
    }

    /// A wall-clock time of the calendar (Foundation's Gregorian calendar gives back the same fields) that UTC+14
    /// and UTC−12 both reach within `send_at_ms`'s range.
    mutating func localDateTime(_ value: String, _ field: String) {
        guard value.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?/) != nil else {
            problems.append("accepted the \(field) \(value.debugDescription)")
            return
        }
        let numbers = value.split(whereSeparator: { "-T:".contains($0) }).map { Int($0)! }
        let fields = DateComponents(
            year: numbers[0], month: numbers[1], day: numbers[2], hour: numbers[3], minute: numbers[4],
            second: numbers.count == 6 ? numbers[5] : 0)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: fields),
            calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date) == fields
        else {
            problems.append("accepted the \(field) \(value.debugDescription), no time of the calendar")
            return
        }
        let wallClock = Int64(date.timeIntervalSince1970 * 1_000)
        let latest = min(now, FieldRules.latestMilliseconds) + FieldRules.scheduleHorizonMilliseconds
        that(wallClock - 14 * 3_600_000 >= FieldRules.earliestSendAtMilliseconds, field)
        that(wallClock + 12 * 3_600_000 <= latest, field)
    }

    @Sendable static func send(_ message: Pushrelay_V1_Send, _ audit: inout Audit) {
        audit.id(message.notificationType, "notification_type")
        let audiences = [!message.userIds.isEmpty, !message.tokens.isEmpty, !message.topic.isEmpty]
        audit.that(audiences.count { $0 } == 1, "audience")
        audit.that(message.userIds.count + message.tokens.count <= audit.limits.maxRecipients, "recipient count")
        audit.that(message.excludeUserIds.count <= audit.limits.maxRecipients, "exclusion count")
        for user in message.userIds { audit.id(user, "user_ids") }
        for target in message.tokens { audit.token(target.token, "tokens") }
        audit.id(message.topic, "topic", required: false)
        for user in message.excludeUserIds { audit.id(user, "exclude_user_ids") }
        for value in [
            message.idempotencyKey, message.sound, message.threadID, message.category, message.interruptionLevel,
            message.scope,
        ] {
            audit.id(value, "short id", required: false)
        }
        let alert = message.alert
        for text in [
            alert.title, alert.subtitle, alert.body, alert.launchImage, alert.titleLocKey, alert.subtitleLocKey,
            alert.locKey,
        ]
            + alert.titleLocArgs + alert.subtitleLocArgs + alert.locArgs + [message.customJson]
        {
            audit.text(text, "alert or custom_json")
        }
        for (name, value) in message.templateValues {
            audit.id(name, "template_values")
            audit.id(value, "template_values", required: false)
        }
        audit.id(message.collapseID, "collapse_id", required: false, maximumBytes: FieldRules.maximumCollapseIDBytes)
        if !message.sendAtLocal.isEmpty {
            audit.that(message.sendAtMs == 0, "send_at_ms with send_at_local")
            audit.localDateTime(message.sendAtLocal, "send_at_local")
        }
        if message.hasRelevanceScore {
            audit.that(
                message.relevanceScore.isFinite && message.relevanceScore >= 0 && message.relevanceScore <= 1,
                "relevance_score")
        }
        if message.hasExpiration {
            audit.that((0...FieldRules.latestExpirationSeconds).contains(message.expiration), "expiration")
        }
        if message.hasPriority { audit.that([1, 5, 10].contains(message.priority), "priority") }
        if message.sendAtMs != 0 {
            let latest = min(audit.now, FieldRules.latestMilliseconds) + FieldRules.scheduleHorizonMilliseconds
            audit.that(
                message.sendAtMs >= FieldRules.earliestSendAtMilliseconds && message.sendAtMs <= latest, "send_at_ms")
        }
    }
}

/// Protobuf's wire format, written from its spec: tags, varints, and the fields of a body.
enum Protobuf {
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    static func tag(_ field: UInt64, _ wireType: UInt64) -> [UInt8] { varint(field << 3 | wireType) }

    /// Whether `M` declares field `number`: the field's smallest value of some wire type decodes into it rather than
    /// into the unknown fields.
    static func declares<M: SwiftProtobuf.Message>(_ type: M.Type, field number: Int) -> Bool {
        let field = UInt64(number)
        let encodings = [
            tag(field, 0) + [0], tag(field, 1) + Array(repeating: 0, count: 8), tag(field, 2) + [0],
            tag(field, 5) + Array(repeating: 0, count: 4),
        ]
        return encodings.contains { bytes in (try? M(serializedBytes: bytes))?.unknownFields.data.isEmpty ?? false }
    }

    /// The top-level fields of `bytes`, in order, as far as they can be read; groups are read through.
    static func fields(_ bytes: [UInt8]) -> [(number: Int, wireType: Int)] {
        var at = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                guard at < bytes.count else { return nil }
                let byte = bytes[at]
                at += 1
                value |= UInt64(byte & 0x7F) << UInt64(shift)
                if byte < 0x80 { return value }
            }
            return nil
        }
        func skip(_ count: UInt64) -> Bool {
            guard count <= UInt64(bytes.count - at) else { return false }
            at += Int(count)
            return true
        }
        func skipValue(number: UInt64, wireType: UInt64) -> Bool {
            switch wireType {
            case 0: return varint() != nil
            case 1: return skip(8)
            case 2: return varint().map(skip) ?? false
            case 5: return skip(4)
            case 3:
                while let tag = varint() {
                    if tag & 7 == 4 { return tag >> 3 == number }
                    guard skipValue(number: tag >> 3, wireType: tag & 7) else { return false }
                }
                return false
            default: return false
            }
        }
        var fields: [(number: Int, wireType: Int)] = []
        while at < bytes.count, let tag = varint() {
            fields.append((Int(truncatingIfNeeded: tag >> 3), Int(tag & 7)))
            guard skipValue(number: tag >> 3, wireType: tag & 7) else { break }
        }
        return fields
    }
}

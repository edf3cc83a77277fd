import Foundation
import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

/// Protocol/vectors.json: every example frame decodes to its stated meaning, and every refused one is
/// refused with its stated error (the Python client's tests check the same file).
@Suite struct VectorTests {
    struct Vector: Decodable {
        struct Header: Decodable {
            var length: UInt32
            var version: UInt8
            var flags: UInt8
            var kind: UInt16
            var request_id: UInt32
        }

        var name: String
        var hex: String
        var header: Header
        var type: String?
        var error: String?
    }

    struct File: Decodable {
        struct Limits: Decodable {
            var max_frame_bytes: Int
            var max_decompressed_bytes: Int
        }

        var limits: Limits
        var vectors: [Vector]
    }

    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Protocol/vectors.json")

    static let messageTypes: [String: any SwiftProtobuf.Message.Type] = [
        Pushrelay_V1_Hello.protoMessageName: Pushrelay_V1_Hello.self,
        Pushrelay_V1_HelloOk.protoMessageName: Pushrelay_V1_HelloOk.self,
        Pushrelay_V1_Ping.protoMessageName: Pushrelay_V1_Ping.self,
        Pushrelay_V1_Pong.protoMessageName: Pushrelay_V1_Pong.self,
        Pushrelay_V1_Goodbye.protoMessageName: Pushrelay_V1_Goodbye.self,
        Pushrelay_V1_Error.protoMessageName: Pushrelay_V1_Error.self,
        Pushrelay_V1_RegisterDevice.protoMessageName: Pushrelay_V1_RegisterDevice.self,
        Pushrelay_V1_Send.protoMessageName: Pushrelay_V1_Send.self,
        Pushrelay_V1_SendResult.protoMessageName: Pushrelay_V1_SendResult.self,
        Pushrelay_V1_ResultEvent.protoMessageName: Pushrelay_V1_ResultEvent.self,
        Pushrelay_V1_SetMute.protoMessageName: Pushrelay_V1_SetMute.self,
        Pushrelay_V1_QueryDeliveries.protoMessageName: Pushrelay_V1_QueryDeliveries.self,
        Pushrelay_V1_Subscribed.protoMessageName: Pushrelay_V1_Subscribed.self,
        Pushrelay_V1_ListDevices.protoMessageName: Pushrelay_V1_ListDevices.self,
        Pushrelay_V1_Mute.protoMessageName: Pushrelay_V1_Mute.self,
    ]

    static func load() throws -> (File, [[String: Any]]) {
        let data = try Data(contentsOf: path)
        let file = try JSONDecoder().decode(File.self, from: data)
        let raw = try #require(
            (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["vectors"] as? [[String: Any]])
        return (file, raw)
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test func everyVectorDecodesToItsMeaning() throws {
        let (file, raw) = try Self.load()
        #expect(file.vectors.count >= 20)
        let limits = ProtocolLimits(
            maxFrameBytes: file.limits.max_frame_bytes, maxDecompressedBytes: file.limits.max_decompressed_bytes
        )
        for (vector, json) in zip(file.vectors, raw) {
            var buffer = ByteBuffer(bytes: Self.bytes(vector.hex))
            let header = try #require(FrameHeader.peek(buffer), "\(vector.name)")
            #expect(header.length == vector.header.length, "\(vector.name)")
            #expect(header.version == vector.header.version, "\(vector.name)")
            #expect(header.flags.rawValue == vector.header.flags, "\(vector.name)")
            #expect(header.kind.rawValue == vector.header.kind, "\(vector.name)")
            #expect(header.requestID == vector.header.request_id, "\(vector.name)")
            var parser = FrameParser(limits: limits)
            let parsed = parser.next(from: &buffer)
            if let expected = vector.error {
                let code: Pushrelay_V1_ErrorCode?
                switch parsed {
                case .refused(_, _, let error), .fatal(_, let error): code = error.code
                case .frame(let frame):
                    let type = try #require(Self.messageTypes[vector.type ?? ""] ?? Self.type(of: frame.kind))
                    do {
                        _ = try type.init(serializedBytes: Array(frame.body.readableBytesView))
                        code = nil
                    } catch {
                        code = .invalidBody
                    }
                case nil: code = nil
                }
                #expect(code?.name == expected, "\(vector.name)")
                continue
            }
            guard case .frame(let frame) = parsed else {
                Issue.record("\(vector.name): not a frame: \(String(describing: parsed))")
                continue
            }
            let type = try #require(Self.messageTypes[vector.type ?? ""], "\(vector.name): \(vector.type ?? "")")
            let decoded = try type.init(serializedBytes: Array(frame.body.readableBytesView))
            let bodyJSON = try JSONSerialization.data(withJSONObject: json["body"] ?? [:])
            let expected = try type.init(jsonUTF8Bytes: Array(bodyJSON))
            #expect(decoded.isEqualTo(message: expected), "\(vector.name)")
            if header.flags.isEmpty {
                var encoded = ByteBuffer()
                FrameEncoder().encode(kind: header.kind, requestID: header.requestID, message: decoded, into: &encoded)
                #expect(Array(encoded.readableBytesView) == Self.bytes(vector.hex), "\(vector.name) re-encoded")
            }
        }
    }

    /// The request message type of a request kind, for refused vectors that name none.
    static func type(of kind: FrameKind) -> (any SwiftProtobuf.Message.Type)? {
        switch kind {
        case .hello: Pushrelay_V1_Hello.self
        case .registerDevice: Pushrelay_V1_RegisterDevice.self
        case .send: Pushrelay_V1_Send.self
        case .ping: Pushrelay_V1_Ping.self
        case .listDevices: Pushrelay_V1_ListDevices.self
        default: nil
        }
    }

    @Test func seededRandomStreamsOnlyEverYieldTypedResults() {
        var generator = SplitMix(seed: 7)
        var frames = 0
        for _ in 0..<3_000 {
            var parser = FrameParser(limits: ProtocolLimits(maxFrameBytes: 256, maxDecompressedBytes: 1_024))
            let count = Int.random(in: 0...300, using: &generator)
            var buffer = ByteBuffer(bytes: (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
            while let parsed = parser.next(from: &buffer) {
                frames += 1
                if case .fatal = parsed { #expect(parser.isBroken) }
            }
        }
        #expect(frames > 0)
    }
}

/// SplitMix64, for reproducible random input.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

import Foundation
import NIOCore
import NIOHPACK
import Testing

@testable import APNs

@Suite("Request header blocks with the repeated fields kept as bytes")
struct HeaderBlockEncoderTests {
    /// A peer's decoder, which keeps its own dynamic table as APNs does.
    private struct Peer {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

        mutating func decode(_ block: ByteBuffer) throws -> [String] {
            var block = block
            return try decoder.decodeHeaders(from: &block).map { "\($0.name): \($0.value)" }
        }
    }

    private static func fields(token: String, priority: String = "10") -> HeaderBlockEncoder.RepeatedFields {
        .init(authorization: "bearer " + token, topic: "com.example.app", pushType: "alert", priority: priority)
    }

    private static func expected(
        device: String, _ fields: HeaderBlockEncoder.RepeatedFields, expiration: String? = nil
    ) -> [String] {
        [
            ":method: POST", ":scheme: https", ":authority: api.push.apple.com", ":path: /3/device/" + device,
            "authorization: " + fields.authorization!, "apns-topic: " + fields.topic,
            "apns-push-type: " + fields.pushType, "apns-priority: " + fields.priority,
        ] + (expiration.map { ["apns-expiration: " + $0] } ?? [])
    }

    @Test("every block decodes to its request's fields, through runs, a new token, another priority and a resize")
    func blocksDecodeInTheirPeersTable() throws {
        var encoder = HeaderBlockEncoder(authority: "api.push.apple.com")
        var peer = Peer()
        let first = Self.fields(token: "token-one")
        let second = Self.fields(token: "token-two")
        let other = Self.fields(token: "token-two", priority: "5")
        // (fields, whether the block may reuse kept bytes)
        let runs: [(HeaderBlockEncoder.RepeatedFields, Bool)] =
            [(first, false), (first, false), (first, true), (first, true)]
            + [(second, false), (second, false), (second, true)]
            + [(other, false), (other, false), (other, true)]
            // Back to the earlier fields: still in the table, so indexed at once, and kept from the next block.
            + [(second, false), (second, true), (second, true)]
        for (number, (fields, reuses)) in runs.enumerated() {
            let device = String(repeating: "\(number % 10)", count: 64)
            let own = HeaderBlockEncoder.OwnFields(expiration: Int64(number))
            var block = ByteBuffer()
            encoder.encode(device: device, repeated: fields, own: own, to: &block)
            #expect(try peer.decode(block) == Self.expected(device: device, fields, expiration: "\(number)"))
            #expect(encoder.lastBlockReused == reuses, "block \(number)")
        }

        // The peer shrinks its table: the next block starts with the size update (which the peer's decoder
        // applies) and is encoded in full.
        try encoder.setDynamicTableSize(512)
        for reuses in [false, false, true] {
            var block = ByteBuffer()
            encoder.encode(device: "abc", repeated: second, own: .init(), to: &block)
            #expect(try peer.decode(block) == Self.expected(device: "abc", second))
            #expect(encoder.lastBlockReused == reuses)
        }
    }

    @Test(":path is a literal without indexing, its value not Huffman-coded, its length an HPACK integer")
    func pathLiteral() throws {
        var short = ByteBuffer()
        HeaderBlockEncoder.writePath(device: "ab", to: &short)
        #expect(Array(short.readableBytesView) == [0x04, 12] + Array("/3/device/ab".utf8))

        // 200 bytes: the length is 127 (the 7-bit prefix full), then 73.
        let token = String(repeating: "a", count: 190)
        var block = ByteBuffer()
        HeaderBlockEncoder.writePath(device: token, to: &block)
        #expect(Array(block.readableBytesView.prefix(3)) == [0x04, 0x7F, 73])
        var peer = Peer()
        #expect(try peer.decode(block) == [":path: /3/device/" + token])
    }

    @Test("own fields written again only when equal: each block decodes to its own fields, in their order")
    func ownFieldsKeptWhenEqual() throws {
        var encoder = HeaderBlockEncoder(authority: "api.push.apple.com")
        var peer = Peer()
        let fields = Self.fields(token: "token-one")
        let id = UUID()
        let owns: [HeaderBlockEncoder.OwnFields] = [
            .init(expiration: 1_700_000_000, collapseID: "c1"), .init(expiration: 1_700_000_000, collapseID: "c1"),
            .init(expiration: 1_700_000_001, collapseID: "c1"), .init(expiration: 1_700_000_001),
            .init(collapseID: "c2", apnsID: id), .init(collapseID: "c2", apnsID: id), .init(),
            .init(expiration: 1_700_000_001),
        ]
        for (number, own) in owns.enumerated() {
            let device = String(repeating: "\(number)", count: 64)
            var block = ByteBuffer()
            encoder.encode(device: device, repeated: fields, own: own, to: &block)
            let decoded = try peer.decode(block)
            #expect(decoded.prefix(8) == Self.expected(device: device, fields).prefix(8))
            let ownFields =
                (own.expiration.map { ["apns-expiration: \($0)"] } ?? [])
                + (own.collapseID.map { ["apns-collapse-id: " + $0] } ?? [])
                + (own.apnsID.map { ["apns-id: " + $0.uuidString.lowercased()] } ?? [])
            #expect(Array(decoded.dropFirst(8)) == ownFields, "block \(number)")
        }
    }

    @Test("only indexed header fields count as reusable bytes")
    func indexedOnly() {
        #expect(HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0x82, 0x87, 0xBE])))
        // An index past 126 takes more bytes: 0xFF then 7-bit groups.
        #expect(HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0xFF, 0x81, 0x01, 0x82])))
        #expect(!HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0xFF, 0x81])))
        // A literal with indexing (0x40), a table size update (0x20), index 0 and nothing at all are not.
        #expect(!HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0x82, 0x41, 0x01, 0x61])))
        #expect(!HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0x3F, 0xE1, 0x1F, 0x82])))
        #expect(!HeaderBlockEncoder.isIndexedOnly(ByteBuffer(bytes: [0x80])))
        #expect(!HeaderBlockEncoder.isIndexedOnly(ByteBuffer()))
    }
}

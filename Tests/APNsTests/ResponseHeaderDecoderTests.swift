import NIOCore
import NIOHPACK
import Testing

@testable import APNs

@Suite("Response header blocks read straight from their bytes when they leave the HPACK table alone")
struct ResponseHeaderDecoderTests {
    /// The server's side: its encoder, which keeps its own dynamic table.
    private struct Server {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())

        mutating func block(_ fields: [(String, String, HPACKIndexing)]) throws -> ByteBuffer {
            var headers = HPACKHeaders()
            for (name, value, indexing) in fields { headers.add(name: name, value: value, indexing: indexing) }
            var buffer = ByteBuffer()
            try encoder.encode(headers: headers, to: &buffer)
            return buffer
        }
    }

    /// What NIOHPACK's decoder makes of the same blocks, in the same order.
    private struct Reference {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

        mutating func decode(_ block: ByteBuffer) throws -> ResponseHeaderDecoder.Fields {
            var block = block
            var fields = ResponseHeaderDecoder.Fields()
            for (name, value, _) in try decoder.decodeHeaders(from: &block) {
                if name == ":status" { fields.status = Int(value) } else if name == "apns-id" { fields.apnsID = value }
            }
            return fields
        }
    }

    @Test("an answer as APNs sends it (:status indexed, apns-id never indexed) is read from its bytes")
    func apnsAnswerIsReadDirectly() throws {
        var server = Server()
        let id = "5F7C2A8E-3B1D-4C9A-8E6F-1A2B3C4D5E6F"
        for status in ["200", "400", "410", "429"] {
            let block = try server.block([(":status", status, .indexable), ("apns-id", id, .neverIndexed)])
            // 200 and 400 are static entries; 410 and 429 are literals of the static name, which `.indexable`
            // would add to the table: only the former are read directly.
            let direct = ResponseHeaderDecoder.directFields(of: block)
            if status == "200" || status == "400" {
                #expect(direct == .init(status: Int(status), apnsID: id))
            } else {
                #expect(direct == nil)
            }
        }
        let literal = try server.block([(":status", "429", .nonIndexable), ("apns-id", id, .nonIndexable)])
        #expect(ResponseHeaderDecoder.directFields(of: literal) == .init(status: 429, apnsID: id))
        // `:status` and `apns-id` as literal names (not the static table's index), sent as is or Huffman-coded.
        let named: [UInt8] =
            [0x10, 0x07] + Array(":status".utf8) + [0x03] + Array("503".utf8)
            + [0x00, 0x80 | UInt8(HPACKHuffman.encode(Array("apns-id".utf8)).count)]
            + HPACKHuffman.encode(Array("apns-id".utf8)) + [0x02] + Array("ID".utf8)
        #expect(ResponseHeaderDecoder.directFields(of: ByteBuffer(bytes: named)) == .init(status: 503, apnsID: "ID"))
        var reference = Reference()
        let expected = try reference.decode(ByteBuffer(bytes: named))
        #expect(expected == .init(status: 503, apnsID: "ID"))
    }

    @Test("HPACK's Huffman code: every byte value of NIOHPACK's coding decodes, and `apns-id` codes as it does")
    func huffmanMatchesNIOHPACK() throws {
        var server = Server()
        var generator = SystemRandomNumberGenerator()
        var texts = ["", "a", "apns-id", "0123456789ABCDEF-", String(repeating: "\u{7F}", count: 9)]
        // Every byte value (controls, and the bytes of multi-byte UTF-8 sequences), which have the longest codes.
        texts.append(String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self))
        texts.append("é€😀\u{10FFFF}\u{80}\u{7FF}\u{FFFF}")
        // Short enough that their blocks are read directly (``ResponseHeaderDecoder/directBlockLimit``).
        for _ in 0..<300 {
            let scalars = (0..<Int.random(in: 1...10, using: &generator)).map { _ in
                Unicode.Scalar(UInt32.random(in: 0...0xD7FF, using: &generator)) ?? "x"
            }
            texts.append(String(String.UnicodeScalarView(scalars)))
        }
        for text in texts {
            let block = try server.block([("apns-id", text, .neverIndexed)])
            // NIOHPACK codes a literal name with Huffman: the block is read directly only when `apns-id`'s coding
            // matches ours byte for byte.
            #expect(ResponseHeaderDecoder.directFields(of: block)?.apnsID == text, "\(Array(text.utf8))")
            #expect(
                HPACKHuffman.encode(Array(text.utf8)).withUnsafeBytes { HPACKHuffman.decode($0) } == text)
        }
    }

    @Test("through blocks that add to the table, refer to it and resize it, every block reads as NIOHPACK reads it")
    func decodesAsNIOHPACKAcrossTableChanges() throws {
        var server = Server()
        var reference = Reference()
        var decoder = ResponseHeaderDecoder()
        var directBlocks = 0
        for index in 0..<200 {
            let id = "ID-\(index % 7)-\(index)"
            var fields: [(String, String, HPACKIndexing)] = [(":status", index % 5 == 0 ? "410" : "200", .indexable)]
            // The first blocks leave `apns-id` out of the table (read directly unless `:status` is 410); then
            // `apns-id` goes into it, and the blocks that name it refer to the table.
            switch index < 60 ? 2 + index % 2 : index % 4 {
            case 0: fields.append(("apns-id", id, .indexable))  // added to the table
            case 1: fields.append(("apns-id", "ID-1-1", .indexable))  // may refer to an entry
            case 2: fields.append(("apns-id", id, .nonIndexable))
            default: fields += [("apns-id", id, .neverIndexed), ("content-type", "application/json", .nonIndexable)]
            }
            if index == 120 { try server.encoder.setDynamicTableSize(256) }
            let block = try server.block(fields)
            if ResponseHeaderDecoder.directFields(of: block) != nil { directBlocks += 1 }
            let decoded = try decoder.decode(block)
            let expected = try reference.decode(block)
            #expect(decoded == expected, "block \(index)")
        }
        // The first 60 blocks but the twelve with `:status` 410 (added to the table, then referred to).
        #expect(directBlocks == 48)
    }

    @Test("a malformed block is not read directly, and fails as NIOHPACK fails it")
    func malformedBlocksFail() throws {
        var server = Server()
        let good = try server.block([(":status", "200", .indexable), ("apns-id", "ABC", .neverIndexed)])
        let apnsIDName = HPACKHuffman.encode(Array("apns-id".utf8))
        let blocks: [[UInt8]] = [
            Array(good.readableBytesView.dropLast()),  // a string cut short
            [0x88, 0x10, 0x87],  // a name announced and missing
            [0x80],  // index 0
            [0x10, 0x80 | UInt8(apnsIDName.count)] + apnsIDName + [0x81, 0x00],  // padding of zeros
            [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],  // an index past any table
        ]
        for bytes in blocks {
            let block = ByteBuffer(bytes: bytes)
            #expect(ResponseHeaderDecoder.directFields(of: block) == nil, "\(bytes)")
            var decoder = ResponseHeaderDecoder()
            let decoded = Result { try decoder.decode(block) }
            #expect(throws: (any Error).self, "\(bytes)") { try decoded.get() }
        }
        // Padding of ones longer than 7 bits, or not of ones, is invalid.
        #expect([UInt8]([0xFF]).withUnsafeBytes { HPACKHuffman.decode($0) } == nil)
        #expect([UInt8]([0x00]).withUnsafeBytes { HPACKHuffman.decode($0) } == nil)
        #expect([UInt8]([0x07]).withUnsafeBytes { HPACKHuffman.decode($0) } == "0")
    }
}

import NIOCore
import NIOHPACK

/// Decodes the header blocks of one connection's responses into the fields the client reads: `:status`, `apns-id`
/// and `retry-after`.
///
/// A short block made only of fields that neither change nor read the HPACK dynamic table (references to the
/// static table, literals without indexing or never indexed whose names are the static table's or literal) is read
/// straight from its bytes: such fields leave the table as it was, so the next block finds it as NIOHPACK's
/// decoder would have left it. APNs answers with such blocks (`:status` indexed, `apns-id` a literal never indexed);
/// NIOHPACK's decoder, which builds a header list of `String`s, took two and a half times as long for them in a
/// fan-out. Any other block (one that adds to the table, refers to it or resizes it, anything malformed) goes
/// through NIOHPACK's decoder, which keeps the table and throws on a malformed block.
struct ResponseHeaderDecoder {
    /// What a response's header block says.
    struct Fields: Equatable {
        /// `:status`, when the block has a valid one.
        var status: Int?
        /// `apns-id`, when the block has one.
        var apnsID: String?
        /// `retry-after`, when the block has one (FCM's 429 and 503).
        var retryAfter: String?
    }

    /// The longest block read straight from its bytes. With ``directFieldLimit`` it bounds what such a block can
    /// decode to far below the header list size (16 KiB) that the full decoder enforces.
    static let directBlockLimit = 256
    /// The most fields of a block read straight from its bytes.
    static let directFieldLimit = 8

    private var decoder = HPACKDecoder(
        allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: 16_384)

    /// Decodes one block; throws what NIOHPACK's decoder throws for a malformed block.
    mutating func decode(_ block: ByteBuffer) throws -> Fields {
        if let fields = Self.directFields(of: block) { return fields }
        var block = block
        let headers = try decoder.decodeHeaders(from: &block)
        var fields = Fields()
        for (name, value, _) in headers {
            if name == ":status" {
                fields.status = Int(value)
            } else if name == "apns-id" {
                fields.apnsID = value
            } else if name == "retry-after" {
                fields.retryAfter = value
            }
        }
        return fields
    }

    /// The block's fields when it is short and made only of fields that leave the dynamic table alone; `nil` when
    /// it needs the full decoder.
    static func directFields(of block: ByteBuffer) -> Fields? {
        guard block.readableBytes <= directBlockLimit else { return nil }
        return block.withUnsafeReadableBytes { bytes -> Fields? in
            var reader = BlockReader(bytes: bytes)
            var fields = Fields()
            var count = 0
            while !reader.isAtEnd {
                count += 1
                guard count <= directFieldLimit else { return nil }
                let first = reader.bytes[reader.offset]
                if first & 0x80 != 0 {
                    // Indexed field: the static table only (61 entries).
                    guard let index = reader.integer(prefix: 7), (1...61).contains(index) else { return nil }
                    if let status = staticStatus(index) { fields.status = status }
                } else if first & 0xE0 == 0 {
                    // Literal without indexing (0000) or never indexed (0001): the table is left alone.
                    guard let nameIndex = reader.integer(prefix: 4), nameIndex <= 61 else { return nil }
                    var isStatus = staticStatus(nameIndex) != nil
                    let isRetryAfter = nameIndex == Self.retryAfterIndex
                    var isAPNsID = false
                    if nameIndex == 0 {
                        guard let name = reader.string() else { return nil }
                        isAPNsID = name.matches(raw: apnsIDName, huffman: apnsIDHuffmanName)
                        isStatus = name.matches(raw: statusName, huffman: statusHuffmanName)
                        guard isAPNsID || isStatus || name.isValid else { return nil }
                    }
                    guard let value = reader.string() else { return nil }
                    if isStatus {
                        guard let text = value.decoded() else { return nil }
                        fields.status = Int(text)
                    } else if isAPNsID {
                        guard let text = value.decoded() else { return nil }
                        fields.apnsID = text
                    } else if isRetryAfter {
                        guard let text = value.decoded() else { return nil }
                        fields.retryAfter = text
                    } else if !value.isValid {
                        return nil
                    }
                } else {
                    // A literal with incremental indexing, or a dynamic table size update.
                    return nil
                }
            }
            return fields
        }
    }

    /// `:status`'s value in static table entry `index` (8 to 14), else `nil`.
    private static func staticStatus(_ index: Int) -> Int? {
        switch index {
        case 8: 200
        case 9: 204
        case 10: 206
        case 11: 304
        case 12: 400
        case 13: 404
        case 14: 500
        default: nil
        }
    }

    /// `retry-after`'s entry in the static table.
    private static let retryAfterIndex = 53
    private static let apnsIDName = Array("apns-id".utf8)
    /// `apns-id` Huffman-coded: a string has one Huffman coding (its padding is fixed), so comparing bytes is exact.
    private static let apnsIDHuffmanName = HPACKHuffman.encode(apnsIDName)
    private static let statusName = Array(":status".utf8)
    private static let statusHuffmanName = HPACKHuffman.encode(statusName)
}

/// Reads a header block's integers and strings (RFC 7541 §5); every read returns `nil` on a malformed block.
private struct BlockReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    var isAtEnd: Bool { offset >= bytes.count }

    /// An integer with an `prefix`-bit prefix in the current byte; at most 2^28.
    mutating func integer(prefix: Int) -> Int? {
        guard offset < bytes.count else { return nil }
        let mask = (1 << prefix) - 1
        var value = Int(bytes[offset]) & mask
        offset += 1
        guard value == mask else { return value }
        var shift = 0
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            value += Int(byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0 { return value }
            guard shift < 28 else { return nil }
        }
        return nil
    }

    /// A string literal: its bytes as sent, and whether they are Huffman-coded.
    mutating func string() -> StringLiteral? {
        guard offset < bytes.count else { return nil }
        let isHuffmanCoded = bytes[offset] & 0x80 != 0
        guard let length = integer(prefix: 7), length <= bytes.count - offset else { return nil }
        let literal = StringLiteral(
            bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]), isHuffmanCoded: isHuffmanCoded)
        offset += length
        return literal
    }
}

/// A string literal of a header block.
private struct StringLiteral {
    let bytes: UnsafeRawBufferPointer
    let isHuffmanCoded: Bool

    /// Whether it is `raw`, sent as is or Huffman-coded (`huffman`).
    func matches(raw: [UInt8], huffman: [UInt8]) -> Bool {
        bytes.elementsEqual(isHuffmanCoded ? huffman : raw)
    }

    /// Whether it decodes (a Huffman code must be valid), as the full decoder checks of every field.
    var isValid: Bool { !isHuffmanCoded || HPACKHuffman.decode(bytes) != nil }

    /// Its text; `nil` when its Huffman code is invalid.
    func decoded() -> String? {
        guard isHuffmanCoded else { return String(decoding: bytes, as: UTF8.self) }
        return HPACKHuffman.decode(bytes)
    }
}

/// HPACK's Huffman code (RFC 7541 Appendix B), a canonical code: a symbol's code follows from the code lengths.
enum HPACKHuffman {
    /// The code length of each byte value, then of EOS (256).
    static let lengths: [UInt8] = [
        13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28,
        28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7,
        8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19,
        13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13,
        28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21,
        22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23,
        22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
        19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25,
        25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
    ]

    /// The canonical code's layout: per length, its first code, how many symbols have it, and where they start in
    /// ``symbols`` (the symbols by length, then value).
    private struct Layout {
        var firstCode = [UInt32](repeating: 0, count: 31)
        var count = [UInt32](repeating: 0, count: 31)
        var start = [Int](repeating: 0, count: 31)
        var symbols: [Int] = []
        var codes = [UInt32](repeating: 0, count: 257)
        /// For each byte value, the symbol whose code (of at most 8 bits) begins it, and the code's length in the
        /// high byte; 0 when its code is longer.
        var shortCodes = [UInt16](repeating: 0, count: 256)

        init() {
            symbols = (0..<257).sorted { (lengths[$0], $0) < (lengths[$1], $1) }
            var code: UInt32 = 0
            var previousLength = Int(lengths[symbols[0]])
            for (position, symbol) in symbols.enumerated() {
                let length = Int(lengths[symbol])
                if position > 0 { code = (code + 1) << (length - previousLength) }
                if count[length] == 0 {
                    firstCode[length] = code
                    start[length] = position
                }
                count[length] += 1
                codes[symbol] = code
                previousLength = length
            }
            for byte in 0..<256 {
                for length in 5...8 where count[length] > 0 {
                    let prefix = UInt32(byte >> (8 - length))
                    if prefix >= firstCode[length], prefix - firstCode[length] < count[length] {
                        let symbol = symbols[start[length] + Int(prefix - firstCode[length])]
                        shortCodes[byte] = UInt16(length) << 8 | UInt16(symbol)
                        break
                    }
                }
            }
        }
    }

    private static let layout = Layout()

    /// `text` Huffman-coded, padded with the most significant bits of EOS.
    static func encode(_ text: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var bits: UInt64 = 0
        var bitCount = 0
        for byte in text {
            let length = Int(lengths[Int(byte)])
            bits = bits << length | UInt64(layout.codes[Int(byte)])
            bitCount += length
            while bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: bits >> bitCount))
            }
        }
        if bitCount > 0 {
            output.append(UInt8(truncatingIfNeeded: bits << (8 - bitCount) | (1 << (8 - bitCount) - 1)))
        }
        return output
    }

    /// The text Huffman-coded in `bytes`; `nil` when the code is invalid (EOS, a code that does not end, or padding
    /// of 8 bits or more or not of ones). Bytes that are not UTF-8 are repaired, as NIOHPACK's decoder does.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> String? {
        var valid = true
        let text = layout.shortCodes.withUnsafeBufferPointer { table in
            // A code is at least 5 bits long.
            String(unsafeUninitializedCapacity: bytes.count * 8 / 5 + 1) { output in
                var written = 0
                // Bits not decoded yet, the most significant first, in the low `bitCount` bits.
                var bits: UInt64 = 0
                var bitCount = 0
                var next = 0
                while true {
                    while bitCount <= 56, next < bytes.count {
                        bits = bits << 8 | UInt64(bytes[next])
                        bitCount += 8
                        next += 1
                    }
                    if bitCount == 0 { break }
                    // The next 8 bits, padded with ones past the end.
                    let peek =
                        bitCount >= 8
                        ? Int(truncatingIfNeeded: bits >> (bitCount - 8)) & 0xFF
                        : Int(truncatingIfNeeded: bits << (8 - bitCount)) & 0xFF | (1 << (8 - bitCount) - 1)
                    let entry = table[peek]
                    let length = Int(entry >> 8)
                    if length > 0, length <= bitCount {
                        output[written] = UInt8(truncatingIfNeeded: entry)
                        written += 1
                        bitCount -= length
                        continue
                    }
                    // What is left is padding when it is fewer than 8 bits, all ones.
                    if bitCount < 8, bits & (1 << bitCount - 1) == 1 << bitCount - 1 { break }
                    guard let (symbol, length) = longCode(bits, bitCount), symbol < 256 else {
                        valid = false
                        return 0
                    }
                    output[written] = UInt8(symbol)
                    written += 1
                    bitCount -= length
                }
                return written
            }
        }
        return valid ? text : nil
    }

    /// The symbol of the code of more than 8 bits at the top of `bits`' low `bitCount` bits, and its length.
    private static func longCode(_ bits: UInt64, _ bitCount: Int) -> (symbol: Int, length: Int)? {
        let layout = layout
        var code: UInt32 = 0
        var length = 0
        while length < 30, length < bitCount {
            code = code << 1 | UInt32(truncatingIfNeeded: bits >> (bitCount - length - 1)) & 1
            length += 1
            if code >= layout.firstCode[length], code - layout.firstCode[length] < layout.count[length] {
                return (layout.symbols[layout.start[length] + Int(code - layout.firstCode[length])], length)
            }
        }
        return nil
    }
}

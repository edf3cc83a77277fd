/// Why a request body is not JSON: a code to match on and the byte offset where reading stopped.
struct JSONSyntaxError: Error, Sendable, Hashable {
    /// What kind of fault it is.
    enum Code: Sendable, Hashable {
        /// A byte that cannot start or continue a value here.
        case unexpectedToken
        /// The text ended inside a value.
        case unexpectedEnd
        /// Arrays and objects nested deeper than ``RequestJSON/maximumDepth``.
        case nestingTooDeep
        /// A string that is not UTF-8, or has a bad escape.
        case invalidString
    }

    /// What kind of fault it is.
    var code: Code
    /// Where reading stopped, in bytes from the start.
    var offset: Int
}

/// One member of a JSON object: its key, its value, and where the value's bytes are in the text.
struct JSONMember: Sendable, Hashable {
    /// The key.
    var key: String
    /// The value.
    var value: RequestJSON
    /// The value's bytes in the parsed text, so that the simulator can keep the `message` object as received.
    var range: Range<Int>
}

/// A JSON value as the simulator reads a request body: objects keep their members in the order received (Google's
/// messages name a map entry by its position, `message.data[0].value`), numbers keep their text, and booleans are
/// not numbers (Foundation's parser blurs both).
indirect enum RequestJSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as written.
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([RequestJSON])
    /// An object, its members in order.
    case object([JSONMember])

    /// Deeper nesting is refused: a request body never needs it, and recursion must stop somewhere.
    static let maximumDepth = 64

    /// The JSON value of `bytes` (surrounding whitespace allowed, nothing else after the value).
    static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> RequestJSON {
        var reader = Reader(bytes: bytes)
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.offset == bytes.count else { throw JSONSyntaxError(code: .unexpectedToken, offset: reader.offset) }
        return value
    }

    /// The members, when this is an object.
    var members: [JSONMember]? {
        if case .object(let members) = self { members } else { nil }
    }

    /// The text, when this is a string.
    var string: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// The value as Google quotes it in an error message: strings in quotes, anything else as JSON's kind.
    var quoted: String {
        switch self {
        case .null: "null"
        case .bool(let value): String(value)
        case .number(let text): text
        case .string(let text): "\"\(text)\""
        case .array: "[...]"
        case .object: "{...}"
        }
    }

    /// A recursive-descent reader over the bytes of one JSON text.
    private struct Reader {
        /// The text.
        let bytes: [UInt8]
        /// Where reading is.
        var offset = 0

        /// A reader at the start of `bytes`.
        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        /// Moves past spaces, tabs and line ends.
        mutating func skipWhitespace() {
            while offset < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[offset]) { offset += 1 }
        }

        /// The value starting here, `depth` arrays and objects deep.
        mutating func value(depth: Int) throws(JSONSyntaxError) -> RequestJSON {
            skipWhitespace()
            guard offset < bytes.count else { throw JSONSyntaxError(code: .unexpectedEnd, offset: offset) }
            switch bytes[offset] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            default: return .number(try number())
            }
        }

        /// The object starting here.
        private mutating func object(depth: Int) throws(JSONSyntaxError) -> RequestJSON {
            guard depth <= RequestJSON.maximumDepth else {
                throw JSONSyntaxError(code: .nestingTooDeep, offset: offset)
            }
            offset += 1
            var members: [JSONMember] = []
            skipWhitespace()
            if try peek() == UInt8(ascii: "}") {
                offset += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard try peek() == UInt8(ascii: "\"") else {
                    throw JSONSyntaxError(code: .unexpectedToken, offset: offset)
                }
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                let start = offset
                let value = try value(depth: depth)
                members.append(JSONMember(key: key, value: value, range: start..<offset))
                skipWhitespace()
                if try peek() == UInt8(ascii: ",") {
                    offset += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return .object(members)
            }
        }

        /// The array starting here.
        private mutating func array(depth: Int) throws(JSONSyntaxError) -> RequestJSON {
            guard depth <= RequestJSON.maximumDepth else {
                throw JSONSyntaxError(code: .nestingTooDeep, offset: offset)
            }
            offset += 1
            var elements: [RequestJSON] = []
            skipWhitespace()
            if try peek() == UInt8(ascii: "]") {
                offset += 1
                return .array(elements)
            }
            while true {
                elements.append(try value(depth: depth))
                skipWhitespace()
                if try peek() == UInt8(ascii: ",") {
                    offset += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return .array(elements)
            }
        }

        /// The string starting here (at its opening quote).
        private mutating func string() throws(JSONSyntaxError) -> String {
            offset += 1
            var text: [UInt8] = []
            while true {
                let byte = try peek()
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let decoded = String(validating: text, as: UTF8.self) else {
                        throw JSONSyntaxError(code: .invalidString, offset: offset)
                    }
                    return decoded
                case UInt8(ascii: "\\"):
                    try escape(into: &text)
                case 0..<0x20:
                    throw JSONSyntaxError(code: .invalidString, offset: offset - 1)
                default:
                    text.append(byte)
                }
            }
        }

        /// The escape after a backslash, appended to `text` as UTF-8.
        private mutating func escape(into text: inout [UInt8]) throws(JSONSyntaxError) {
            let byte = try peek()
            offset += 1
            let simple: [UInt8: UInt8] = [
                UInt8(ascii: "\""): 0x22, UInt8(ascii: "\\"): 0x5C, UInt8(ascii: "/"): 0x2F, UInt8(ascii: "b"): 0x08,
                UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A, UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09,
            ]
            if let replacement = simple[byte] {
                text.append(replacement)
                return
            }
            guard byte == UInt8(ascii: "u") else { throw JSONSyntaxError(code: .invalidString, offset: offset - 1) }
            var scalar = try hexQuad()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by `\u` and a low one.
                guard offset + 1 < bytes.count, bytes[offset] == UInt8(ascii: "\\"),
                    bytes[offset + 1] == UInt8(ascii: "u")
                else { throw JSONSyntaxError(code: .invalidString, offset: offset) }
                offset += 2
                let low = try hexQuad()
                guard (0xDC00..<0xE000).contains(low) else {
                    throw JSONSyntaxError(code: .invalidString, offset: offset)
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else {
                throw JSONSyntaxError(code: .invalidString, offset: offset)
            }
            text.append(contentsOf: Array(String(Character(unicode)).utf8))
        }

        /// The four hex digits of a `\u` escape.
        private mutating func hexQuad() throws(JSONSyntaxError) -> UInt32 {
            guard offset + 4 <= bytes.count,
                let value = UInt32(String(decoding: bytes[offset..<offset + 4], as: UTF8.self), radix: 16)
            else { throw JSONSyntaxError(code: .invalidString, offset: offset) }
            offset += 4
            return value
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, as written.
        private mutating func number() throws(JSONSyntaxError) -> String {
            let start = offset
            let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
            func digits() throws(JSONSyntaxError) {
                guard offset < bytes.count, isDigit(bytes[offset]) else {
                    throw JSONSyntaxError(code: .unexpectedToken, offset: offset)
                }
                while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "0") {
                offset += 1
            } else {
                try digits()
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                try digits()
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
                offset += 1
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") {
                    offset += 1
                }
                try digits()
            }
            return String(decoding: bytes[start..<offset], as: UTF8.self)
        }

        /// `true`, `false` or `null`, spelt `word`.
        private mutating func literal(_ word: String, _ value: RequestJSON) throws(JSONSyntaxError) -> RequestJSON {
            let expected = Array(word.utf8)
            guard offset + expected.count <= bytes.count, Array(bytes[offset..<offset + expected.count]) == expected
            else { throw JSONSyntaxError(code: .unexpectedToken, offset: offset) }
            offset += expected.count
            return value
        }

        /// The byte here; the text must not end.
        private func peek() throws(JSONSyntaxError) -> UInt8 {
            guard offset < bytes.count else { throw JSONSyntaxError(code: .unexpectedEnd, offset: offset) }
            return bytes[offset]
        }

        /// Moves past `byte`, which must be here.
        private mutating func expect(_ byte: UInt8) throws(JSONSyntaxError) {
            guard try peek() == byte else { throw JSONSyntaxError(code: .unexpectedToken, offset: offset) }
            offset += 1
        }
    }
}

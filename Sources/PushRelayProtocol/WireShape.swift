public import NIOCore

/// How many times each field of a request message may appear in a body, checked on the body's bytes before protobuf
/// decodes it (Protocol/README.md, "Field rules").
///
/// Decoding works for every occurrence of a field: a body of a few hundred compressed bytes holding two million
/// empty `loc_args` would cost seconds of CPU before any rule saw it. So the relay first walks the wire bytes,
/// counting each field at every depth and stopping at the first one over its count: a repeated field has its limit,
/// a field that is not repeated appears at most once, and fields the messages do not declare (a newer version's)
/// appear at most ``Frame/maximumUnknownFields`` times in all, with at most ``Frame/maximumUnknownFieldNumbers``
/// distinct numbers. A declared field of another wire type than its own is `INVALID_BODY` at once, as decoding
/// would find. Only then is the body decoded.
public struct WireShape: Sendable {
    /// How a field's value is encoded (protobuf's wire types, groups aside).
    public enum WireType: UInt64, Sendable {
        /// Integers, booleans and enums.
        case varint = 0
        /// `double`, `fixed64`.
        case fixed64 = 1
        /// Strings, bytes and messages: a length, then that many bytes.
        case lengthDelimited = 2
        /// `float`, `fixed32`.
        case fixed32 = 5
    }

    /// One field a message declares.
    public struct Field: Sendable {
        /// Its name, as errors write it after the message's (`loc_args`).
        public var name: String
        /// How its values are encoded.
        public var wireType: WireType
        /// The most times it may appear: 1 for a field that is not repeated.
        public var limit: Int
        /// `INVALID_ARGUMENT` (naming the field) or `TOO_MANY_RECIPIENTS`: the error when it appears more often.
        public var code: Pushrelay_V1_ErrorCode
        /// The shape of its message when it is one: each occurrence is checked in turn.
        public var message: WireShape?

        /// A field that is not repeated, a string unless `wireType` says otherwise: at most once.
        public static func once(_ name: String, _ wireType: WireType = .lengthDelimited) -> Field {
            Field(name: name, wireType: wireType, limit: 1, code: .invalidArgument)
        }

        /// A message field that is not repeated: at most once, its fields as `message` says.
        public static func once(_ name: String, _ message: WireShape) -> Field {
            Field(name: name, wireType: .lengthDelimited, limit: 1, code: .invalidArgument, message: message)
        }

        /// A repeated field of strings (of messages as `message` says when given) of at most `limit` entries,
        /// refused with `code` beyond it.
        public static func many(
            _ name: String,
            _ limit: Int,
            _ message: WireShape? = nil,
            code: Pushrelay_V1_ErrorCode = .invalidArgument
        ) -> Field {
            Field(name: name, wireType: .lengthDelimited, limit: limit, code: code, message: message)
        }
    }

    /// What errors write before a field's name: the request's name (`send`), or for a nested message the path of
    /// the field that holds it (`send.alert`).
    public private(set) var prefix: String
    /// The fields the message declares, by number.
    public private(set) var fields: [Int: Field]

    /// The shape of a message with `fields`, named `prefix` in errors; the shapes of its fields' messages are named
    /// after the fields that hold them.
    public init(_ prefix: String, _ fields: [Int: Field]) {
        self.prefix = prefix
        self.fields = fields.mapValues { field in
            var field = field
            field.message?.rename(prefix + "." + field.name)
            return field
        }
    }

    /// The shape of a nested message with `fields`, named in errors after the field that holds it.
    public init(_ fields: [Int: Field]) {
        self.init("", fields)
    }

    private mutating func rename(_ prefix: String) {
        self = WireShape(prefix, fields)
    }

    /// Checks the field counts of `body`, a `messageName` (`pushrelay.v1.Send`), at every depth: the first field
    /// over its count is refused with its error (`INVALID_ARGUMENT` or `TOO_MANY_RECIPIENTS`, naming
    /// `<request>.<field>`), without reading further; bytes that are not protobuf, a declared field of another wire
    /// type (named as well), a group or too many undeclared fields are `INVALID_BODY`.
    public func check(_ body: ByteBuffer, messageName: String) throws(ProtocolError) {
        let result = body.withUnsafeReadableBytes { bytes in
            Result { () throws(ProtocolError) in
                var reader = WireReader(bytes: bytes, index: 0, end: bytes.count, messageName: messageName)
                var undeclared = Undeclared()
                try scan(&reader, undeclared: &undeclared)
            }
        }
        try result.get()
    }

    /// Counts the fields from `reader` to its end.
    private func scan(_ reader: inout WireReader, undeclared: inout Undeclared) throws(ProtocolError) {
        var counts: [Int: Int] = [:]
        while !reader.isAtEnd {
            let (number, wireType) = try reader.tag()
            guard let field = fields[number] else {
                undeclared.occurrences += 1
                undeclared.numbers.insert(number)
                guard undeclared.occurrences <= Frame.maximumUnknownFields else {
                    throw reader.invalid(
                        "it holds more than \(Frame.maximumUnknownFields) fields its messages do not declare")
                }
                guard undeclared.numbers.count <= Frame.maximumUnknownFieldNumbers else {
                    throw reader.invalid(
                        "it holds more than \(Frame.maximumUnknownFieldNumbers) field numbers its messages do not "
                            + "declare")
                }
                try reader.skip(wireType)
                continue
            }
            guard wireType == field.wireType.rawValue else {
                var error = reader.invalid(
                    "field \(number) (\(prefix).\(field.name)) has the wrong wire type for its type")
                // A value of another type names its field; a group or a wire type that does not exist is no value.
                if WireType(rawValue: wireType) != nil { error.field = prefix + "." + field.name }
                throw error
            }
            let count = counts[number, default: 0] + 1
            counts[number] = count
            guard count <= field.limit else { throw error(field) }
            if let message = field.message {
                var nested = try reader.lengthDelimited()
                try message.scan(&nested, undeclared: &undeclared)
            } else {
                try reader.skip(wireType)
            }
        }
    }

    /// The error for `field` appearing more often than its limit.
    private func error(_ field: Field) -> ProtocolError {
        let path = prefix + "." + field.name
        if field.code == .tooManyRecipients {
            return ProtocolError(
                .tooManyRecipients,
                "\(path) names more than \(field.limit) entries; at most \(field.limit) recipients or exclusions are "
                    + "allowed", field: path)
        }
        guard field.limit > 1 else {
            return .invalidArgument(path, "\(path) appears more than once; a field that is not repeated appears once")
        }
        return .invalidArgument(
            path, "\(path) holds more than \(field.limit) entries; at most \(field.limit) are allowed")
    }
}

/// The fields of a body its messages do not declare, at every depth: how many, and their numbers.
private struct Undeclared {
    var occurrences = 0
    var numbers: Set<Int> = []
}

/// Reads protobuf's wire format from a range of bytes, refusing what protobuf would not decode.
private struct WireReader {
    let bytes: UnsafeRawBufferPointer
    var index: Int
    let end: Int
    let messageName: String

    var isAtEnd: Bool { index >= end }

    /// `INVALID_BODY` saying why the body is not a `messageName`.
    func invalid(_ reason: String) -> ProtocolError {
        ProtocolError(.invalidBody, "the body is not a valid \(messageName): \(reason)")
    }

    mutating func varint() throws(ProtocolError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while index < end, shift < 64 {
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        throw invalid("a varint is cut short or longer than 10 bytes")
    }

    /// The next field's number and wire type.
    mutating func tag() throws(ProtocolError) -> (number: Int, wireType: UInt64) {
        let tag = try varint()
        let number = tag >> 3
        guard number >= 1, number < 1 << 29 else { throw invalid("field number \(number) is out of range") }
        return (Int(number), tag & 7)
    }

    /// A reader of the next length-delimited value, which this one skips.
    mutating func lengthDelimited() throws(ProtocolError) -> WireReader {
        let length = try varint()
        guard length <= UInt64(end - index) else { throw invalid("a length-delimited field runs past its end") }
        let nested = WireReader(bytes: bytes, index: index, end: index + Int(length), messageName: messageName)
        index += Int(length)
        return nested
    }

    /// Skips the value of a field of `wireType`.
    mutating func skip(_ wireType: UInt64) throws(ProtocolError) {
        switch wireType {
        case 0: _ = try varint()
        case 1: try advance(8)
        case 2: _ = try lengthDelimited()
        case 5: try advance(4)
        case 3, 4: throw ProtocolError(.invalidBody, "the body holds a group, which proto3 messages do not have")
        default: throw invalid("wire type \(wireType) does not exist")
        }
    }

    private mutating func advance(_ count: Int) throws(ProtocolError) {
        guard count <= end - index else { throw invalid("a fixed-size field runs past its end") }
        index += count
    }
}

/// The validator's readings of accepted message bodies that differ only in their registration token, so that the
/// bodies of one fan-out, rendered from one template, are parsed and judged once per connection instead of once
/// each.
///
/// A body's *shape* is its bytes without the value of its first `"token":"…"`. A reading is kept only when the full
/// parse found `message.token` exactly there, and a body is read from its shape only when that value is plain token
/// characters (`[A-Za-z0-9_:-]`, 1 to 4,096 of them), so nothing a quote or an escape could change is spliced: the
/// reading is the one a full parse of that body gives, and the token passes Google's token check. Any other body
/// (another spelling, a refused message, an unknown shape) is parsed in full.
struct ValidatedShapes {
    /// How many shapes a connection keeps; the oldest half is forgotten when full.
    static let capacity = 64

    /// A body without its token value, and where the value was.
    private struct Shape: Hashable {
        /// The bytes before the value, then the bytes after it.
        var bytes: [UInt8]
        /// The value's first byte in the body.
        var tokenStart: Int

        /// Hashes the bytes at once (an array of bytes hashes them one by one).
        func hash(into hasher: inout Hasher) {
            hasher.combine(tokenStart)
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// What the validator read from a body of the shape.
    private struct Reading {
        /// The message as read (its token and `messageJSON` are the body's own).
        var message: FCMSimulatorMessage
        /// Where the `message` object starts in the body.
        var messageStart: Int
        /// How many bytes follow the `message` object.
        var bytesAfterMessage: Int
        /// When the reading was kept, to forget the oldest first.
        var age: Int
    }

    /// The readings kept, by shape.
    private var readings: [Shape: Reading] = [:]
    /// Readings kept so far.
    private var kept = 0

    /// No shape known yet.
    init() {}

    /// How many shapes are known.
    var count: Int { readings.count }

    /// The bytes of the first `"token":"…"` value in `body` when they are plain token characters, else nil.
    static func tokenValue(in body: [UInt8]) -> Range<Int>? {
        let key = Array(#""token":""#.utf8)
        guard body.count > key.count else { return nil }
        var start = 0
        while start + key.count <= body.count {
            guard body[start] == key[0], body[start..<start + key.count].elementsEqual(key) else {
                start += 1
                continue
            }
            let value = start + key.count
            var end = value
            while end < body.count, FCMRequestValidator.isTokenCharacter(body[end]) { end += 1 }
            guard end < body.count, body[end] == UInt8(ascii: "\""), (1...4_096).contains(end - value) else {
                return nil
            }
            return value..<end
        }
        return nil
    }

    /// Fills `message` as the validator would for `body`, whose token value is at `token`, when its shape is known;
    /// returns whether it was.
    func read(_ body: [UInt8], token: Range<Int>, into message: inout FCMSimulatorMessage) -> Bool {
        guard let reading = readings[Self.shape(of: body, token: token)] else { return false }
        let (connectionID, projectID, clientEmail, receivedAt) =
            (message.connectionID, message.projectID, message.clientEmail, message.receivedAt)
        message = reading.message
        message.connectionID = connectionID
        message.projectID = projectID
        message.clientEmail = clientEmail
        message.receivedAt = receivedAt
        message.token = String(decoding: body[token], as: UTF8.self)
        message.messageJSON = Array(body[reading.messageStart..<(body.count - reading.bytesAfterMessage)])
        return true
    }

    /// Keeps the reading of an accepted `body` whose `message` object is at `messageRange` and whose full parse
    /// found `message.token` at `token`.
    mutating func remember(
        _ message: FCMSimulatorMessage, body: [UInt8], token: Range<Int>, messageRange: Range<Int>
    ) {
        if readings.count >= Self.capacity {
            let oldest = readings.values.map(\.age).sorted()[Self.capacity / 2]
            readings = readings.filter { $0.value.age >= oldest }
        }
        kept += 1
        readings[Self.shape(of: body, token: token)] = Reading(
            message: message, messageStart: messageRange.lowerBound,
            bytesAfterMessage: body.count - messageRange.upperBound, age: kept)
    }

    /// `body` without the bytes of `token`.
    private static func shape(of body: [UInt8], token: Range<Int>) -> Shape {
        var bytes = [UInt8]()
        bytes.reserveCapacity(body.count - token.count)
        bytes.append(contentsOf: body[..<token.lowerBound])
        bytes.append(contentsOf: body[token.upperBound...])
        return Shape(bytes: bytes, tokenStart: token.lowerBound)
    }
}

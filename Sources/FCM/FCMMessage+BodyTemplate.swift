import Foundation
public import NIOCore

extension FCMMessage {
    /// A message's `messages:send` body with a hole for the token: encoded once per job (and expiration), then
    /// filled for each token by copying bytes, without encoding the message again.
    public struct BodyTemplate: Sendable {
        /// The body's bytes before the token's.
        let prefix: [UInt8]
        /// The body's bytes after the token's.
        let suffix: [UInt8]

        /// The body of ``FCMMessage/body(to:)`` for `token`, the same bytes.
        public func body(to token: String) -> ByteBuffer {
            var buffer = ByteBuffer()
            buffer.reserveCapacity(prefix.count + token.utf8.count + suffix.count + 8)
            buffer.writeBytes(prefix)
            Self.writeJSONStringContent(token, to: &buffer)
            buffer.writeBytes(suffix)
            return buffer
        }

        /// Writes `text` as the inside of a JSON string: `"` and `\` escaped, control characters as `\u00XX`
        /// (a stored token has none), everything else as its UTF-8 bytes, as the message's encoder writes them.
        static func writeJSONStringContent(_ text: String, to buffer: inout ByteBuffer) {
            let utf8 = text.utf8
            let plain =
                utf8.withContiguousStorageIfAvailable { bytes in
                    !bytes.contains { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }
                } ?? false
            guard !plain else {
                buffer.writeString(text)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    buffer.writeInteger(UInt8(ascii: "\\"))
                    buffer.writeInteger(byte)
                case ..<0x20:
                    buffer.writeString(String(format: "\\u%04x", byte))
                default:
                    buffer.writeInteger(byte)
                }
            }
        }
    }

    /// The message's body with a hole for the token (``BodyTemplate``).
    public func bodyTemplate() -> BodyTemplate {
        // A stand-in token of letters, digits and hyphens is written as it is; where it lands is the hole.
        let standIn = Array("pushrelay-token-\(UUID().uuidString)".utf8)
        let body = Array(body(to: String(decoding: standIn, as: UTF8.self)))
        guard let start = Self.firstIndex(of: standIn, in: body) else {
            return BodyTemplate(prefix: body, suffix: [])
        }
        return BodyTemplate(prefix: Array(body[..<start]), suffix: Array(body[(start + standIn.count)...]))
    }

    /// Where `needle` first occurs in `haystack`.
    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }
}

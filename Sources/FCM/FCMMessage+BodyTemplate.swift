public import APNs
import Foundation
import NIOCore

extension FCMMessage {
    /// A message's `messages:send` body with a hole for the token: encoded once per job (and expiration), then
    /// sent to each token as the same shared bytes with the token's inserted where the engine writes them
    /// (``APNs/HTTP2Request/Body``), without encoding the message again or building a body per token.
    public struct BodyTemplate: Sendable {
        /// The body's bytes without the token's.
        let bytes: ByteBuffer
        /// Where the token's bytes go in ``bytes``.
        let holeOffset: Int

        /// The body of ``FCMMessage/body(to:)`` for `token`: the same bytes once written.
        public func body(to token: String) -> HTTP2Request.Body {
            HTTP2Request.Body(bytes, inserting: Self.jsonStringContent(token), at: holeOffset)
        }

        /// `text` as the inside of a JSON string, as the message's encoder writes it: itself when it needs no
        /// escape (a stored token never does); else `"` and `\` escaped and control characters as `\u00XX`.
        static func jsonStringContent(_ text: String) -> String {
            let plain =
                text.utf8.withContiguousStorageIfAvailable { bytes in
                    !bytes.contains { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }
                } ?? false
            guard !plain else { return text }
            var escaped = ByteBuffer()
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    escaped.writeInteger(UInt8(ascii: "\\"))
                    escaped.writeInteger(byte)
                case ..<0x20:
                    escaped.writeString(String(format: "\\u%04x", byte))
                default:
                    escaped.writeInteger(byte)
                }
            }
            return String(buffer: escaped)
        }
    }

    /// The message's body with a hole for the token (``BodyTemplate``).
    public func bodyTemplate() -> BodyTemplate {
        // A stand-in token of letters, digits and hyphens is written as it is; where it lands is the hole.
        let standIn = Array("pushrelay-token-\(UUID().uuidString)".utf8)
        let body = Array(body(to: String(decoding: standIn, as: UTF8.self)))
        guard let start = Self.firstIndex(of: standIn, in: body) else {
            return BodyTemplate(bytes: ByteBuffer(bytes: body), holeOffset: body.count)
        }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(body.count - standIn.count)
        bytes.writeBytes(body[..<start])
        bytes.writeBytes(body[(start + standIn.count)...])
        return BodyTemplate(bytes: bytes, holeOffset: start)
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

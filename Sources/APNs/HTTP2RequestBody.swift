public import NIOCore

extension HTTP2Request {
    /// A request's body: bytes, and optionally a text written into them at an offset when the request is sent.
    ///
    /// A run of requests whose bodies differ in one value (FCM's bodies differ only in their token) share one
    /// buffer and each carries its own text: no body is built or freed per request, and the bytes are copied once,
    /// into the connection's outbound buffer.
    public struct Body: Sendable {
        /// The body's bytes around the inserted text (all of it when there is none).
        public let bytes: ByteBuffer
        /// The text written at ``insertionOffset``, as its UTF-8 bytes; empty for none.
        public let insertion: String
        /// Where in ``bytes`` the ``insertion`` goes, from their reader index.
        public let insertionOffset: Int

        /// The body `bytes`.
        public init(_ bytes: ByteBuffer) {
            self.bytes = bytes
            self.insertion = ""
            self.insertionOffset = 0
        }

        /// The body of `bytes` with `text`'s UTF-8 bytes written `offset` bytes in (clamped to `bytes`).
        public init(_ bytes: ByteBuffer, inserting text: String, at offset: Int) {
            self.bytes = bytes
            self.insertion = text
            self.insertionOffset = min(max(offset, 0), bytes.readableBytes)
        }

        /// How many bytes the body has.
        public var count: Int {
            bytes.readableBytes + insertion.utf8.count
        }

        /// Writes the body's bytes to `buffer`.
        func write(to buffer: inout ByteBuffer) {
            guard !insertion.isEmpty else {
                buffer.writeImmutableBuffer(bytes)
                return
            }
            buffer.writeImmutableBuffer(bytes.getSlice(at: bytes.readerIndex, length: insertionOffset)!)
            buffer.writeString(insertion)
            buffer.writeImmutableBuffer(
                bytes.getSlice(
                    at: bytes.readerIndex + insertionOffset, length: bytes.readableBytes - insertionOffset)!)
        }

        /// The body's bytes in one buffer (what ``write(to:)`` writes).
        package var joined: ByteBuffer {
            var buffer = ByteBuffer()
            buffer.reserveCapacity(count)
            write(to: &buffer)
            return buffer
        }
    }
}

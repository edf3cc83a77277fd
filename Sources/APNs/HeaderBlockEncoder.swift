import Foundation
import NIOCore
import NIOHPACK

/// Encodes the header blocks of one connection's requests, writing the fields that repeat from one request
/// to the next as bytes kept from an earlier block instead of encoding them again.
///
/// A request's block is `:method`, `:scheme`, `:authority` (the connection's), `:path` (the device), then
/// `authorization`, `apns-topic`, `apns-push-type` and `apns-priority` (the same for a run of requests), then
/// the request's own fields (`apns-expiration`, `apns-collapse-id`, `apns-id`), which are never indexed.
/// Once the repeated fields encode as indexed fields only (references to entries already in the HPACK
/// dynamic table, a byte or two each), nothing changes the table while the run lasts, so those bytes stay
/// right and are kept. A block with other repeated fields (a new provider token, another priority) is
/// encoded in full and may add entries, which is why only the last run's bytes are kept; a dynamic table
/// size change drops them too, since the next block must begin with the size update.
///
/// `:path` differs in every request: it is written as a literal without indexing whose value is not
/// Huffman-coded (19 more bytes for a 64-digit token, and no Huffman coding of a new value in every request),
/// straight from the device token (no path string is made). The request's own fields are literals without
/// indexing too, so they never change the table: when they are those of the previous block (the same
/// expiration second), that block's bytes for them are written again, without making their header list.
///
/// An ``HTTP2Request``'s block (FCM's) is its `:path` and headers, all indexed: the same for a run of requests,
/// it is kept and written again in the same way.
struct HeaderBlockEncoder {
    /// A request's own fields, written in this order when present.
    struct OwnFields: Equatable {
        /// `apns-expiration`, in seconds since 1970.
        var expiration: Int64?
        /// `apns-collapse-id`.
        var collapseID: String?
        /// `apns-id`.
        var apnsID: UUID?

        /// The fields as header fields that are never indexed.
        var headers: HPACKHeaders {
            var headers = HPACKHeaders()
            if let expiration {
                headers.add(name: "apns-expiration", value: String(expiration), indexing: .nonIndexable)
            }
            if let collapseID {
                headers.add(name: "apns-collapse-id", value: collapseID, indexing: .nonIndexable)
            }
            if let apnsID {
                headers.add(name: "apns-id", value: apnsID.uuidString.lowercased(), indexing: .nonIndexable)
            }
            return headers
        }

        /// Whether no field is present.
        var isEmpty: Bool { expiration == nil && collapseID == nil && apnsID == nil }
    }

    /// The fields that repeat across a run of requests.
    struct RepeatedFields: Equatable {
        /// The `authorization` value (`bearer <JWT>`), or `nil` with certificate credentials.
        var authorization: String?
        /// `apns-topic`.
        var topic: String
        /// `apns-push-type`.
        var pushType: String
        /// `apns-priority`.
        var priority: String
    }

    private var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    /// The last run's fields and their encoded bytes: the pseudo-header fields before `:path`, and the regular
    /// fields after it.
    private var kept: (fields: RepeatedFields, pseudo: ByteBuffer, regular: ByteBuffer)?
    /// The last block's own fields and their encoded bytes.
    private var keptOwn: (fields: OwnFields, bytes: ByteBuffer)?
    /// The last ``HTTP2Request`` block's path and headers and its bytes, when they are indexed fields only.
    private var keptRequest: (path: String, headers: [HTTP2Request.Header], bytes: ByteBuffer)?
    /// `:method`, `:scheme` and `:authority`, the same for every request of the connection.
    private let pseudoFields: HPACKHeaders

    /// Whether the last block reused kept bytes (for tests).
    private(set) var lastBlockReused = false

    /// An encoder for a connection to `authority` (`host` or `host:port`).
    init(authority: String) {
        self.pseudoFields = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", authority)])
    }

    /// Applies the peer's `SETTINGS_HEADER_TABLE_SIZE` (at most HPACK's default size).
    mutating func setDynamicTableSize(_ size: Int) throws {
        try encoder.setDynamicTableSize(min(size, HPACKEncoder.defaultDynamicTableSize))
        kept = nil
        keptOwn = nil
        keptRequest = nil
    }

    /// Writes the header block of an ``HTTP2Request`` to `buffer`: the pseudo-header fields with its `:path`, then
    /// its headers, all with incremental indexing, so that from a run's second request on the block is indexed
    /// fields only; those bytes are kept and written again while the run lasts.
    mutating func encode(path: String, headers: [HTTP2Request.Header], to buffer: inout ByteBuffer) {
        if let keptRequest, keptRequest.path == path, keptRequest.headers == headers {
            buffer.writeImmutableBuffer(keptRequest.bytes)
            lastBlockReused = true
            return
        }
        // The block may add to the table: bytes kept for APNs' fields may no longer be right.
        kept = nil
        keptOwn = nil
        var fields = pseudoFields
        fields.add(name: ":path", value: path)
        for header in headers { fields.add(name: header.name, value: header.value) }
        let start = buffer.writerIndex
        try! encoder.encode(headers: fields, to: &buffer)
        let bytes = Self.copy(of: buffer, from: start)
        keptRequest = Self.isIndexedOnly(bytes) ? (path, headers, bytes) : nil
        lastBlockReused = false
    }

    /// Writes the header block of a request to device `token` (`:path` `/3/device/<token>`) to `buffer`.
    mutating func encode(device token: String, repeated: RepeatedFields, own: OwnFields, to buffer: inout ByteBuffer) {
        // Encoding into a buffer fails only while another encoding is open, which never happens here.
        if let kept, kept.fields == repeated {
            buffer.writeImmutableBuffer(kept.pseudo)
            Self.writePath(device: token, to: &buffer)
            buffer.writeImmutableBuffer(kept.regular)
            lastBlockReused = true
        } else {
            keptRequest = nil
            let pseudoStart = buffer.writerIndex
            try! encoder.encode(headers: pseudoFields, to: &buffer)
            let pseudo = Self.copy(of: buffer, from: pseudoStart)
            Self.writePath(device: token, to: &buffer)
            let regularStart = buffer.writerIndex
            var regularFields = HPACKHeaders()
            regularFields.reserveCapacity(4)
            if let authorization = repeated.authorization {
                regularFields.add(name: "authorization", value: authorization)
            }
            regularFields.add(name: "apns-topic", value: repeated.topic)
            regularFields.add(name: "apns-push-type", value: repeated.pushType)
            regularFields.add(name: "apns-priority", value: repeated.priority)
            try! encoder.encode(headers: regularFields, to: &buffer)
            let regular = Self.copy(of: buffer, from: regularStart)
            kept =
                Self.isIndexedOnly(pseudo) && Self.isIndexedOnly(regular) ? (repeated, pseudo, regular) : nil
            lastBlockReused = false
        }
        guard !own.isEmpty else { return }
        if let keptOwn, keptOwn.fields == own {
            buffer.writeImmutableBuffer(keptOwn.bytes)
            return
        }
        keptRequest = nil
        let ownStart = buffer.writerIndex
        try! encoder.encode(headers: own.headers, to: &buffer)
        // Literals that are never indexed: they leave the table as it is, so their bytes may be written again.
        keptOwn = (own, Self.copy(of: buffer, from: ownStart))
    }

    /// The start of every request's `:path`.
    static let pathPrefix = "/3/device/"

    /// Writes `:path` (`/3/device/<token>`) as a literal header field without indexing, its name the static
    /// table's entry 4 and its value not Huffman-coded (RFC 7541 §6.2.2).
    static func writePath(device token: String, to buffer: inout ByteBuffer) {
        // 0000 and the name's index in 4 bits; then H = 0 and the value's length in 7 bits.
        writeInteger(4, prefixBits: 4, to: &buffer)
        writeInteger(pathPrefix.utf8.count + token.utf8.count, prefixBits: 7, to: &buffer)
        buffer.writeString(pathPrefix)
        buffer.writeString(token)
    }

    /// Writes `value` as an HPACK integer with a `prefixBits`-bit prefix, the bits before it zero (RFC 7541 §5.1;
    /// NIOHPACK's own encoder of integers is internal).
    static func writeInteger(_ value: Int, prefixBits: Int, to buffer: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            buffer.writeInteger(UInt8(value))
            return
        }
        buffer.writeInteger(UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest % 128 + 128))
            rest /= 128
        }
        buffer.writeInteger(UInt8(rest))
    }

    /// The bytes written to `buffer` since `start`, in a buffer of their own (a slice would share `buffer`'s
    /// storage and make its next write copy it).
    private static func copy(of buffer: ByteBuffer, from start: Int) -> ByteBuffer {
        ByteBuffer(bytes: buffer.getBytes(at: start, length: buffer.writerIndex - start) ?? [])
    }

    /// Whether `block` holds indexed header fields only (RFC 7541 §6.1: the top bit set, then an index as
    /// an integer with a 7-bit prefix), so that writing it again adds nothing to the peer's dynamic table.
    static func isIndexedOnly(_ block: ByteBuffer) -> Bool {
        let bytes = block.readableBytesView
        guard !bytes.isEmpty else { return false }
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let first = bytes[index]
            guard first & 0x80 != 0, first != 0x80 else { return false }
            index += 1
            guard first & 0x7F == 0x7F else { continue }
            // The index goes on in 7-bit groups, the last one with its top bit clear.
            while index < bytes.endIndex, bytes[index] & 0x80 != 0 { index += 1 }
            guard index < bytes.endIndex else { return false }
            index += 1
        }
        return true
    }
}

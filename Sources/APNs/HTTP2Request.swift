public import NIOCore

/// A `POST` to an HTTP/2 JSON API other than APNs' device endpoint, sent through the same engine with the same
/// discipline (self-sizing pool, stream limits, GOAWAY, PINGs, deadlines, retries): FCM HTTP v1's
/// `messages:send`, an OAuth 2.0 token endpoint.
///
/// A run of requests shares its path and headers (the first request adds them to the HPACK table, the next ones
/// refer to them in a byte or two), and each has its own body, or shares one with its own text inserted (``Body``).
/// Such a pool has no credential of its own (``APNsCredential/none``): a request carries its `authorization` among
/// its headers.
///
/// What an answer means is the HTTP status's: 2xx delivered, 429 and 5xx retried within the deadline (not before a
/// `Retry-After` in seconds), anything else final. The report keeps the answer's body
/// (``APNsResponse/body``) and `Retry-After` for the caller, which reads the API's own error codes in them.
public struct HTTP2Request: Sendable {
    /// One header field, its name in lower case.
    public struct Header: Sendable, Hashable {
        /// The field's name, lower case (HTTP/2 requires it).
        public var name: String
        /// The field's value.
        public var value: String

        /// A field `name: value`.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The most bytes of a request body: one DATA frame of the smallest frame size a peer may announce.
    public static let maximumBodySize = 16_384

    /// `:path`, from the first `/` (`/v1/projects/p/messages:send`).
    public var path: String
    /// The regular header fields (`authorization`, `content-type`), the same for a run of requests.
    public var headers: [Header]
    /// The body, sent as one DATA frame with END_STREAM.
    public var body: Body

    /// A `POST` of `body` to `path` with `headers`.
    public init(path: String, headers: [Header], body: Body) {
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// A `POST` of the bytes `body` to `path` with `headers`.
    public init(path: String, headers: [Header], body: ByteBuffer) {
        self.init(path: path, headers: headers, body: Body(body))
    }

    /// Checks what the engine needs before anything is sent. Throws ``APNsValidationError``.
    public func validate() throws(APNsValidationError) {
        guard path.hasPrefix("/") else { throw .invalidPath }
        let size = body.count
        if size == 0 { throw .emptyPayload }
        if size > Self.maximumBodySize {
            throw .payloadTooLarge(size: size, limit: Self.maximumBodySize)
        }
        for header in headers where !Self.isLowerCaseName(header.name) {
            throw .invalidHeaderName
        }
    }

    /// Whether `name` is a regular field name HTTP/2 takes: not empty, not a pseudo-header, no upper-case letter
    /// (checked on its bytes: it runs for every request).
    private static func isLowerCaseName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, first != UInt8(ascii: ":") else { return false }
        return !bytes.contains { $0 &- UInt8(ascii: "A") < 26 }
    }
}

/// A typed protocol error: what an ERROR frame carries (Protocol/README.md, "Errors").
public struct ProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error code.
    public var code: Pushrelay_V1_ErrorCode
    /// A sentence for people: what was wrong.
    public var message: String
    /// The field at fault, `<request>.<field>` (`send.alert.title`), or the request alone for a rule on several of
    /// its fields: always with `INVALID_ARGUMENT` and `TOO_MANY_RECIPIENTS`, with `NOT_FOUND` when a field names
    /// what was not found, with `INVALID_BODY` when a declared field has another wire type; empty otherwise
    /// (Protocol/README.md, "Field rules").
    public var field: String
    /// With `RATE_LIMITED` and `UNAVAILABLE`: when to try again, in milliseconds.
    public var retryAfterMilliseconds: UInt32
    /// With `DUPLICATE_REQUEST_ID` (answered on request id 0): the request id already in flight.
    public var requestID: UInt32 = 0

    /// An error with a code and a message.
    public init(
        _ code: Pushrelay_V1_ErrorCode, _ message: String, field: String = "", retryAfterMilliseconds: UInt32 = 0
    ) {
        self.code = code
        self.message = message
        self.field = field
        self.retryAfterMilliseconds = retryAfterMilliseconds
    }

    /// The error read from an ERROR frame's body.
    public init(_ error: Pushrelay_V1_Error) {
        self.init(error.code, error.message, field: error.field, retryAfterMilliseconds: error.retryAfterMs)
        requestID = error.requestID
    }

    /// A `DUPLICATE_REQUEST_ID` error for request id `id`, still in flight: answered on request id 0, it names the
    /// id as a field (`request_id`) and a number, so a client can tell which of its requests it is about.
    public static func duplicateRequestID(_ id: UInt32) -> ProtocolError {
        var error = ProtocolError(
            .duplicateRequestID, "request id \(id) is already in flight; this frame was skipped", field: "request_id")
        error.requestID = id
        return error
    }

    /// An `INVALID_ARGUMENT` error naming its field.
    public static func invalidArgument(_ field: String, _ message: String) -> ProtocolError {
        ProtocolError(.invalidArgument, message, field: field)
    }

    /// The body of the ERROR frame that carries this error.
    public var wireError: Pushrelay_V1_Error {
        var error = Pushrelay_V1_Error()
        error.code = code
        error.message = message
        error.field = field
        error.retryAfterMs = retryAfterMilliseconds
        error.requestID = requestID
        return error
    }

    /// The code's name as the spec writes it, then the message.
    public var description: String {
        var text = "\(code.name): \(message)"
        if !field.isEmpty { text += " (field \(field))" }
        if retryAfterMilliseconds > 0 { text += " (retry after \(retryAfterMilliseconds) ms)" }
        return text
    }
}

extension Pushrelay_V1_ErrorCode {
    /// The code's name as the spec and the proto file write it: `RATE_LIMITED`.
    public var name: String {
        switch self {
        case .unspecified: "ERROR_CODE_UNSPECIFIED"
        case .badFrame: "BAD_FRAME"
        case .unsupportedVersion: "UNSUPPORTED_VERSION"
        case .unknownKind: "UNKNOWN_KIND"
        case .frameTooLarge: "FRAME_TOO_LARGE"
        case .decompressedTooLarge: "DECOMPRESSED_TOO_LARGE"
        case .badCompression: "BAD_COMPRESSION"
        case .invalidBody: "INVALID_BODY"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .helloRequired: "HELLO_REQUIRED"
        case .authenticationFailed: "AUTHENTICATION_FAILED"
        case .notFound: "NOT_FOUND"
        case .tooManyRecipients: "TOO_MANY_RECIPIENTS"
        case .rateLimited: "RATE_LIMITED"
        case .notSupported: "NOT_SUPPORTED"
        case .internal: "INTERNAL"
        case .unavailable: "UNAVAILABLE"
        case .duplicateRequestID: "DUPLICATE_REQUEST_ID"
        case .shuttingDown: "SHUTTING_DOWN"
        case .alreadyAuthenticated: "ALREADY_AUTHENTICATED"
        case .noProviderKey: "NO_PROVIDER_KEY"
        case .providerKeyUnreadable: "PROVIDER_KEY_UNREADABLE"
        case .tooManyConnections: "TOO_MANY_CONNECTIONS"
        case .UNRECOGNIZED(let value): "UNRECOGNIZED(\(value))"
        }
    }
}

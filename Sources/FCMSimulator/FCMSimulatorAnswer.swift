package import Foundation

/// One HTTP answer of the simulator, in Google's exact shapes: the JSON of `messages:send` (its success, and the
/// `{"error": {"code", "message", "status", "details": [FcmError]}}` of its errors) and of the OAuth 2.0 token
/// endpoint (`access_token`, or `{"error", "error_description"}`). Made without a network, so that tests can feed
/// every answer the simulator gives to the relay's own reading of them (`FCMAnswer`).
package struct FCMSimulatorAnswer: Sendable, Hashable {
    /// The `@type` of the detail that carries FCM's error code.
    package static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    /// Google's message for a token that is not a registration token: what makes a sender drop it.
    package static let invalidTokenMessage = "The registration token is not a valid FCM registration token"

    /// The HTTP status.
    package var status: Int
    /// The JSON body.
    package var body: Data
    /// The `Retry-After` header's seconds, when the answer has one.
    package var retryAfter: Int?
    /// What the statistics count the answer as: FCM's error code (or Google's status when there is no FcmError
    /// detail), the OAuth error, or nil for a success.
    package var errorCode: String?

    /// An answer of `status` with `body`.
    init(status: Int, body: Data, retryAfter: Int? = nil, errorCode: String? = nil) {
        self.status = status
        self.body = body
        self.retryAfter = retryAfter
        self.errorCode = errorCode
    }

    // MARK: messages:send

    /// 200: FCM took the message; `name` is `projects/{project}/messages/{id}`.
    static func sent(name: String) -> FCMSimulatorAnswer {
        // Written by hand when nothing in the name needs escaping: the encoder is most of an answer's cost.
        let plain = name.utf8.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        guard plain else { return FCMSimulatorAnswer(status: 200, body: encode(["name": name])) }
        return FCMSimulatorAnswer(status: 200, body: Data((#"{"name":""# + name + #""}"#).utf8))
    }

    /// Google's error of HTTP `status` saying `message`; with an FcmError detail of `errorCode` when given, and
    /// Google's canonical status name for the HTTP status.
    static func googleError(
        status: Int, message: String, errorCode: String?, retryAfter: Int? = nil
    ) -> FCMSimulatorAnswer {
        let canonical = canonicalStatus(status)
        let details = errorCode.map { [ErrorDetail(type: fcmErrorType, errorCode: $0)] }
        let body = ErrorBody(error: .init(code: status, message: message, status: canonical, details: details))
        return FCMSimulatorAnswer(
            status: status, body: encode(body), retryAfter: retryAfter, errorCode: errorCode ?? canonical)
    }

    /// 400 INVALID_ARGUMENT about the message (not its token).
    static func invalidArgument(_ message: String) -> FCMSimulatorAnswer {
        googleError(status: 400, message: message, errorCode: "INVALID_ARGUMENT")
    }

    /// 400 INVALID_ARGUMENT about the registration token: the token is dead.
    static let invalidRegistrationToken = googleError(
        status: 400, message: invalidTokenMessage, errorCode: "INVALID_ARGUMENT")
    /// 404 UNREGISTERED: the app is gone from the device, or the token expired.
    static let unregistered = googleError(
        status: 404, message: "Requested entity was not found.", errorCode: "UNREGISTERED")
    /// 403 SENDER_ID_MISMATCH: the token belongs to another Firebase project.
    static let senderIDMismatch = googleError(
        status: 403, message: "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
    /// 401 THIRD_PARTY_AUTH_ERROR: the APNs credential uploaded to Firebase is refused by Apple.
    static let thirdPartyAuthError = googleError(
        status: 401, message: "Auth error from APNS or Web Push Service", errorCode: "THIRD_PARTY_AUTH_ERROR")
    /// 500 INTERNAL.
    static let internalError = googleError(
        status: 500, message: "Internal error encountered.", errorCode: "INTERNAL")
    /// 401 UNAUTHENTICATED without FcmError detail: the access token is missing, unknown, revoked or expired.
    static let unauthenticated = googleError(
        status: 401,
        message:
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
            + "valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        errorCode: nil)

    /// 503 UNAVAILABLE, with `Retry-After` when `retryAfter` is given.
    static func unavailable(retryAfter: Int?) -> FCMSimulatorAnswer {
        googleError(
            status: 503, message: "The service is currently unavailable.", errorCode: "UNAVAILABLE",
            retryAfter: retryAfter)
    }

    /// 429 QUOTA_EXCEEDED with `Retry-After`.
    static func quotaExceeded(retryAfter: Int) -> FCMSimulatorAnswer {
        googleError(
            status: 429,
            message: "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'.",
            errorCode: "QUOTA_EXCEEDED", retryAfter: retryAfter)
    }

    /// 403 PERMISSION_DENIED without FcmError detail: the access token's account may not send for `project`.
    static func permissionDenied(project: String) -> FCMSimulatorAnswer {
        googleError(
            status: 403,
            message: "Permission 'cloudmessaging.messages.create' denied on resource "
                + "'//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
            errorCode: nil)
    }

    /// 404 NOT_FOUND without FcmError detail: no such method or path (not a dead token).
    static func notFound(method: String, path: String) -> FCMSimulatorAnswer {
        googleError(status: 404, message: "No handler for \(method) \(path).", errorCode: nil)
    }

    // MARK: The token endpoint

    /// 200 with an access token valid for `expiresIn` seconds.
    static func accessToken(_ token: String, expiresIn: Int) -> FCMSimulatorAnswer {
        FCMSimulatorAnswer(
            status: 200, body: encode(TokenBody(access_token: token, expires_in: expiresIn, token_type: "Bearer")))
    }

    /// 400 with the OAuth 2.0 error `error` (`invalid_grant`, `invalid_scope`, `unsupported_grant_type`,
    /// `invalid_request`) and Google's `description`.
    static func oauthError(_ error: String, _ description: String) -> FCMSimulatorAnswer {
        FCMSimulatorAnswer(
            status: 400, body: encode(["error": error, "error_description": description]), errorCode: error)
    }

    // MARK: Encoding

    /// Google's canonical status name of an HTTP status.
    private static func canonicalStatus(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 503: "UNAVAILABLE"
        default: "INTERNAL"
        }
    }

    /// `value` as JSON, keys in a fixed order, slashes as they are.
    private static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, numbers and arrays of them always encode.
        return (try? encoder.encode(value)) ?? Data()
    }

    /// `{"error": {...}}`.
    private struct ErrorBody: Encodable {
        /// The error's fields.
        struct Fields: Encodable {
            /// The HTTP status.
            var code: Int
            /// What is wrong, in Google's words.
            var message: String
            /// Google's canonical status name.
            var status: String
            /// Absent without an FcmError, as Google leaves it out.
            var details: [ErrorDetail]?
        }

        /// The error.
        var error: Fields
    }

    /// One entry of `details`: the FcmError.
    private struct ErrorDetail: Encodable {
        /// The detail's type URL.
        var type: String
        /// FCM's error code.
        var errorCode: String

        /// `@type` is not a Swift name.
        enum CodingKeys: String, CodingKey {
            case type = "@type"
            case errorCode
        }
    }

    /// The token endpoint's success, in its wire names.
    private struct TokenBody: Encodable {
        /// The token.
        var access_token: String
        /// Its lifetime in seconds.
        var expires_in: Int
        /// Always `Bearer`.
        var token_type: String
    }
}

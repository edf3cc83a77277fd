public import Foundation
public import NIOCore

/// What FCM's answer to one `messages:send` means for the relay, by Google's error table: the message delivered
/// (with its name), the token dead, the tenant's configuration at fault, a passing failure to retry (honouring
/// `Retry-After`), the access token refused (fetch a new one once), or the message itself refused.
public enum FCMAnswer: Sendable, Hashable {
    /// 200: FCM took the message; its name is `projects/{project}/messages/{id}`.
    case delivered(messageName: String)
    /// 404 `UNREGISTERED`, or 400 `INVALID_ARGUMENT` naming the token: the token is dead. (A 404 without
    /// `UNREGISTERED` is a wrong path or project, not a dead token: ``rejected(errorCode:message:)``.)
    case tokenDead(errorCode: String)
    /// 403 `SENDER_ID_MISMATCH`, 401 `THIRD_PARTY_AUTH_ERROR`, 403 `PERMISSION_DENIED`: only an operator fixes
    /// it; not retried.
    case configurationFault(errorCode: String)
    /// 429 `QUOTA_EXCEEDED`, 503 `UNAVAILABLE`, 500 `INTERNAL` (and other 5xx): retried with backoff, not before
    /// `retryAfter` when FCM gave one.
    case retryLater(errorCode: String, retryAfter: Duration?)
    /// 401 without an FCM error code: the access token is missing, invalid or expired.
    case unauthenticated
    /// 400 `INVALID_ARGUMENT` about the message (not the token), or another 4xx: the same message fails again.
    case rejected(errorCode: String, message: String)

    /// The meaning of an answer of `status` with `body`, read from the engine's buffer without copying it first
    /// when it is a success.
    public init(status: Int, body: ByteBuffer?, retryAfter: String? = nil) {
        if status == 200, let body, let name = body.withUnsafeReadableBytes({ Self.messageName(in: $0) }) {
            self = .delivered(messageName: name)
            return
        }
        self.init(status: status, body: body.map { Data($0.readableBytesView) } ?? Data(), retryAfter: retryAfter)
    }

    /// The meaning of an answer of `status` with `body` (Google's error JSON, or the success JSON) and the
    /// `Retry-After` header's value, if any.
    public init(status: Int, body: Data, retryAfter: String? = nil) {
        if status == 200, let name = body.withUnsafeBytes({ Self.messageName(in: $0) }) {
            self = .delivered(messageName: name)
            return
        }
        let error = (try? JSONDecoder().decode(ErrorBody.self, from: body))?.error
        let fcmCode = error?.details?.compactMap(\.errorCode).first
        let code = fcmCode ?? error?.status ?? "HTTP_\(status)"
        let message = error?.message ?? ""
        switch status {
        case 200:
            let name = (try? JSONDecoder().decode(Success.self, from: body))?.name ?? ""
            self = .delivered(messageName: name)
        case 404 where fcmCode == "UNREGISTERED":
            self = .tokenDead(errorCode: code)
        case 400 where fcmCode == "INVALID_ARGUMENT" && Self.namesTheToken(message):
            self = .tokenDead(errorCode: code)
        case 401 where fcmCode == "THIRD_PARTY_AUTH_ERROR":
            self = .configurationFault(errorCode: code)
        case 401:
            self = .unauthenticated
        case 403:
            self = .configurationFault(errorCode: code)
        case 429, 500...599:
            self = .retryLater(errorCode: code, retryAfter: Self.seconds(retryAfter))
        default:
            self = .rejected(errorCode: code, message: message)
        }
    }

    /// Whether an `INVALID_ARGUMENT` message is about the registration token ("The registration token is not a
    /// valid FCM registration token"), not the message.
    private static func namesTheToken(_ message: String) -> Bool {
        message.lowercased().contains("registration token")
    }

    /// A `Retry-After` of delay-seconds; an HTTP date is read as no delay given.
    private static func seconds(_ header: String?) -> Duration? {
        guard let header, let seconds = Int(header.trimmingCharacters(in: .whitespaces)), seconds >= 0 else {
            return nil
        }
        return .seconds(seconds)
    }

    /// The `name` of a success body (`{"name": "projects/p/messages/0:1%ab"}`), read straight from its bytes
    /// (a JSON decoder per answer cost more than the rest of it); `nil` when it is not of that simple form (the
    /// decoder reads it then).
    static func messageName(in body: UnsafeRawBufferPointer) -> String? {
        let key = Array(#""name""#.utf8)
        let count = body.count
        var index = 0
        var found = false
        while index + key.count <= count {
            if body[index] == key[0], body[index..<(index + key.count)].elementsEqual(key) {
                found = true
                index += key.count
                break
            }
            index += 1
        }
        guard found else { return nil }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        while index < count, isSpace(body[index]) { index += 1 }
        guard index < count, body[index] == UInt8(ascii: ":") else { return nil }
        index += 1
        while index < count, isSpace(body[index]) { index += 1 }
        guard index < count, body[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        var end = index
        while end < count, body[end] != UInt8(ascii: "\"") {
            if body[end] == UInt8(ascii: "\\") { return nil }
            end += 1
        }
        guard end < count else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: body[index..<end]), as: UTF8.self)
    }

    private struct Success: Decodable {
        var name: String
    }

    private struct ErrorBody: Decodable {
        struct Detail: Decodable {
            var errorCode: String?
        }

        struct Error: Decodable {
            var code: Int?
            var message: String?
            var status: String?
            var details: [Detail]?
        }

        var error: Error
    }
}

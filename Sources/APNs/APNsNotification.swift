public import Foundation
public import NIOCore

/// One notification to one device: what goes into the HTTP/2 request's path, headers and body.
///
/// The payload is a `ByteBuffer` so that a fan-out encodes it once and every device's request shares
/// the same bytes.
public struct APNsNotification: Sendable {
    /// The device token as hex (even length, any length).
    public var deviceToken: String
    /// The app's bundle id (for `mdm`, the MDM topic); the push type's suffix is added to form `apns-topic`.
    public var bundleID: String
    /// `apns-push-type`.
    public var pushType: APNsPushType
    /// `apns-priority`; nil uses the push type's default.
    public var priority: APNsPriority?
    /// `apns-expiration` in seconds since 1970; 0 means deliver once or never; nil lets APNs store it.
    public var expiration: Int64?
    /// `apns-collapse-id`, at most 64 bytes of UTF-8.
    public var collapseID: String?
    /// `apns-id`; nil lets APNs assign one.
    public var apnsID: UUID?
    /// The JSON payload bytes.
    public var payload: ByteBuffer

    /// A notification with an already encoded JSON payload.
    public init(
        deviceToken: String, bundleID: String, pushType: APNsPushType = .alert, priority: APNsPriority? = nil,
        expiration: Int64? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: ByteBuffer
    ) {
        self.deviceToken = deviceToken
        self.bundleID = bundleID
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    /// A notification whose payload is encoded from `payload`.
    public init(
        deviceToken: String, bundleID: String, pushType: APNsPushType = .alert, priority: APNsPriority? = nil,
        expiration: Int64? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: APNsPayload
    ) throws {
        self.init(
            deviceToken: deviceToken, bundleID: bundleID, pushType: pushType, priority: priority,
            expiration: expiration, collapseID: collapseID, apnsID: apnsID,
            payload: ByteBuffer(bytes: try payload.jsonBytes())
        )
    }

    /// The `apns-topic` header: the bundle id plus the push type's suffix.
    public var topic: String { pushType.topic(forBundleID: bundleID) }

    /// The priority that is sent: the one set, or the push type's default.
    public var effectivePriority: APNsPriority { priority ?? pushType.defaultPriority }

    /// Checks everything APNs would reject before it is sent. Throws ``APNsValidationError``.
    public func validate() throws(APNsValidationError) {
        try Self.validateDeviceToken(deviceToken)
        if bundleID.isEmpty { throw .emptyTopic }
        if payload.readableBytes == 0 { throw .emptyPayload }
        if payload.readableBytes > pushType.maximumPayloadSize {
            throw .payloadTooLarge(size: payload.readableBytes, limit: pushType.maximumPayloadSize)
        }
        if pushType == .background && effectivePriority != .powerAware {
            throw .priorityNotAllowed(pushType: pushType, priority: effectivePriority)
        }
        if let collapseID, collapseID.utf8.count > 64 { throw .collapseIDTooLong(bytes: collapseID.utf8.count) }
        if let expiration, expiration < 0 { throw .negativeExpiration(expiration) }
    }

    /// Checks that a device token is non-empty, even-length hex.
    public static func validateDeviceToken(_ token: String) throws(APNsValidationError) {
        let utf8 = token.utf8
        if utf8.isEmpty { throw .emptyDeviceToken }
        if utf8.count % 2 != 0 { throw .deviceTokenOddLength(utf8.count) }
        /// A digit, or a letter from a to f in either case (`| 0x20` lower-cases a letter).
        func isHex(_ byte: UInt8) -> Bool {
            byte &- UInt8(ascii: "0") < 10 || (byte | 0x20) &- UInt8(ascii: "a") < 6
        }
        // Checked over the string's bytes in place when it has them (every native string): a loop over the
        // view's iterator was a hundredth of the relay's CPU in a fan-out.
        let allHex = utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isHex) } ?? utf8.allSatisfy(isHex)
        if !allHex { throw .deviceTokenNotHex }
    }

    /// Checks that `bytes` are a JSON object, as APNs requires of a payload.
    public static func validateJSONPayload(_ bytes: [UInt8]) throws(APNsValidationError) {
        guard (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] != nil else {
            throw .payloadNotJSONObject
        }
    }
}

/// Why a notification was refused before anything was sent: a ``code`` to act on, the details the code has, and a
/// sentence for people.
///
/// A struct rather than an enum, in the manner of postgres-nio's `PSQLError`, so that a new code is not a breaking
/// change: compare ``code`` (`error.code == .emptyTopic`) instead of matching cases.
public struct APNsValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong with the notification.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case emptyDeviceToken, deviceTokenOddLength, deviceTokenNotHex, emptyTopic, emptyPayload
            case payloadNotJSONObject, payloadTooLarge, priorityNotAllowed, collapseIDTooLong, negativeExpiration
            case invalidPath, invalidHeaderName
        }

        let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The device token is empty.
        public static let emptyDeviceToken = Code(.emptyDeviceToken)
        /// The device token has an odd number of hex digits.
        public static let deviceTokenOddLength = Code(.deviceTokenOddLength)
        /// The device token contains a character that is not a hex digit.
        public static let deviceTokenNotHex = Code(.deviceTokenNotHex)
        /// The bundle id (topic) is empty.
        public static let emptyTopic = Code(.emptyTopic)
        /// The payload is empty.
        public static let emptyPayload = Code(.emptyPayload)
        /// The payload is not a JSON object.
        public static let payloadNotJSONObject = Code(.payloadNotJSONObject)
        /// The payload is larger than APNs accepts for the push type.
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// The priority is not allowed for the push type (background requires 5).
        public static let priorityNotAllowed = Code(.priorityNotAllowed)
        /// `apns-collapse-id` is longer than 64 bytes.
        public static let collapseIDTooLong = Code(.collapseIDTooLong)
        /// `apns-expiration` is negative.
        public static let negativeExpiration = Code(.negativeExpiration)
        /// An ``HTTP2Request``'s path does not begin with `/`.
        public static let invalidPath = Code(.invalidPath)
        /// An ``HTTP2Request``'s header name is empty, a pseudo-header or not lower case.
        public static let invalidHeaderName = Code(.invalidHeaderName)

        /// The code's name (`emptyTopic`).
        public var description: String { base.rawValue }
    }

    /// What is wrong with the notification.
    public var code: Code
    /// The length at fault: the device token's hex digits (``Code/deviceTokenOddLength``), the payload's bytes
    /// (``Code/payloadTooLarge``) or the collapse id's bytes (``Code/collapseIDTooLong``).
    public var length: Int?
    /// With ``Code/payloadTooLarge``: the most bytes the push type allows.
    public var limit: Int?
    /// With ``Code/priorityNotAllowed``: the push type.
    public var pushType: APNsPushType?
    /// With ``Code/priorityNotAllowed``: the priority it does not allow.
    public var priority: APNsPriority?
    /// With ``Code/negativeExpiration``: the expiration.
    public var expiration: Int64?

    private init(
        _ code: Code, length: Int? = nil, limit: Int? = nil, pushType: APNsPushType? = nil,
        priority: APNsPriority? = nil, expiration: Int64? = nil
    ) {
        self.code = code
        self.length = length
        self.limit = limit
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
    }

    /// The device token is empty.
    public static let emptyDeviceToken = Self(.emptyDeviceToken)
    /// The device token has `digits` hex digits, an odd number.
    public static func deviceTokenOddLength(_ digits: Int) -> Self { Self(.deviceTokenOddLength, length: digits) }
    /// The device token contains a character that is not a hex digit.
    public static let deviceTokenNotHex = Self(.deviceTokenNotHex)
    /// The bundle id (topic) is empty.
    public static let emptyTopic = Self(.emptyTopic)
    /// The payload is empty.
    public static let emptyPayload = Self(.emptyPayload)
    /// The payload is not a JSON object.
    public static let payloadNotJSONObject = Self(.payloadNotJSONObject)
    /// The payload is `size` bytes, more than the push type's `limit`.
    public static func payloadTooLarge(size: Int, limit: Int) -> Self {
        Self(.payloadTooLarge, length: size, limit: limit)
    }
    /// `priority` is not allowed for `pushType` (background requires 5).
    public static func priorityNotAllowed(pushType: APNsPushType, priority: APNsPriority) -> Self {
        Self(.priorityNotAllowed, pushType: pushType, priority: priority)
    }
    /// `apns-collapse-id` is `bytes` long, more than 64.
    public static func collapseIDTooLong(bytes: Int) -> Self { Self(.collapseIDTooLong, length: bytes) }
    /// `apns-expiration` is `expiration`, a negative number.
    public static func negativeExpiration(_ expiration: Int64) -> Self {
        Self(.negativeExpiration, expiration: expiration)
    }
    /// An ``HTTP2Request``'s path does not begin with `/`.
    public static let invalidPath = Self(.invalidPath)
    /// An ``HTTP2Request``'s header name is empty, a pseudo-header or not lower case.
    public static let invalidHeaderName = Self(.invalidHeaderName)

    /// A sentence saying what is wrong.
    public var description: String {
        switch code.base {
        case .emptyDeviceToken: "device token is empty"
        case .deviceTokenOddLength: "device token has \(length ?? 0) hex digits; it must have an even number"
        case .deviceTokenNotHex: "device token must contain only hex digits 0-9 a-f"
        case .emptyTopic: "bundle id (topic) is empty"
        case .emptyPayload: "payload is empty"
        case .payloadNotJSONObject: "payload is not a JSON object"
        case .payloadTooLarge: "payload is \(length ?? 0) bytes; at most \(limit ?? 0) are allowed"
        case .priorityNotAllowed:
            "priority \(priority?.rawValue ?? 0) is not allowed for push type \(pushType?.rawValue ?? "") (use 5)"
        case .collapseIDTooLong: "apns-collapse-id is \(length ?? 0) bytes; at most 64 are allowed"
        case .negativeExpiration: "apns-expiration \(expiration ?? 0) is negative"
        case .invalidPath: "the request's path must begin with /"
        case .invalidHeaderName: "a request header's name must be lower case, and neither empty nor a pseudo-header"
        }
    }
}

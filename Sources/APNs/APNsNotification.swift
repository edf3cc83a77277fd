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

/// Why a notification was refused before anything was sent.
public enum APNsValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The device token is empty.
    case emptyDeviceToken
    /// The device token has an odd number of hex digits.
    case deviceTokenOddLength(Int)
    /// The device token contains a character that is not a hex digit.
    case deviceTokenNotHex
    /// The bundle id (topic) is empty.
    case emptyTopic
    /// The payload is empty.
    case emptyPayload
    /// The payload is not a JSON object.
    case payloadNotJSONObject
    /// The payload is larger than APNs accepts for the push type.
    case payloadTooLarge(size: Int, limit: Int)
    /// The priority is not allowed for the push type (background requires 5).
    case priorityNotAllowed(pushType: APNsPushType, priority: APNsPriority)
    /// `apns-collapse-id` is longer than 64 bytes.
    case collapseIDTooLong(bytes: Int)
    /// `apns-expiration` is negative.
    case negativeExpiration(Int64)

    /// A sentence saying what is wrong.
    public var description: String {
        switch self {
        case .emptyDeviceToken: "device token is empty"
        case .deviceTokenOddLength(let n): "device token has \(n) hex digits; it must have an even number"
        case .deviceTokenNotHex: "device token must contain only hex digits 0-9 a-f"
        case .emptyTopic: "bundle id (topic) is empty"
        case .emptyPayload: "payload is empty"
        case .payloadNotJSONObject: "payload is not a JSON object"
        case .payloadTooLarge(let size, let limit): "payload is \(size) bytes; at most \(limit) are allowed"
        case .priorityNotAllowed(let type, let priority):
            "priority \(priority.rawValue) is not allowed for push type \(type.rawValue) (use 5)"
        case .collapseIDTooLong(let n): "apns-collapse-id is \(n) bytes; at most 64 are allowed"
        case .negativeExpiration(let e): "apns-expiration \(e) is negative"
        }
    }
}

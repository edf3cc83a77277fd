import Foundation
public import NIOCore

/// A `reason` string from APNs's error body, or a failure of our own on the way there.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden
    case invalidProviderToken, missingProviderToken, unrelatedKeyIdInToken, badEnvironmentKeyIdInToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError, serviceUnavailable, shutdown
    /// A reason APNs sent that this version does not know.
    case other(String)

    /// Every reason in Apple's table, with its wire spelling.
    public static let known: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken,
        .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badPath, .methodNotAllowed, .expiredToken,
        .unregistered, .payloadTooLarge, .tooManyProviderTokenUpdates, .tooManyRequests,
        .internalServerError, .serviceUnavailable, .shutdown,
    ]

    private static let byName: [String: APNsReason] = Dictionary(
        uniqueKeysWithValues: known.map { ($0.rawValue, $0) }
    )

    /// The reason for a wire string; unknown strings become ``other(_:)``.
    public init(rawValue: String) {
        self = Self.byName[rawValue] ?? .other(rawValue)
    }

    /// The HTTP status Apple documents for this reason (nil for ``other(_:)``).
    public var status: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
            .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .other: nil
        }
    }

    /// The wire spelling, as in Apple's table.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .other(let s): s
        }
    }

    /// The wire spelling.
    public var description: String { rawValue }
}

/// What one HTTP/2 exchange with APNs (or the API of an ``HTTP2Request``) returned.
public struct APNsResponse: Sendable, Hashable {
    /// The HTTP status (200 on success).
    public var status: Int
    /// The `apns-id` header of the response, when present.
    public var apnsID: String?
    /// The error reason (nil on 200).
    public var reason: APNsReason?
    /// With 410: when APNs learned that the token stopped being valid, in milliseconds since 1970.
    public var timestampMilliseconds: Int64?
    /// The `retry-after` header, when present (FCM's 429 and 503: seconds to wait).
    public var retryAfter: String?
    /// The body of an ``HTTP2Request``'s answer (at most 16 KiB of it), for the caller to read; `nil` for APNs,
    /// whose error body is read into ``reason`` and ``timestampMilliseconds``.
    public var body: ByteBuffer?

    /// A response with these fields.
    public init(status: Int, apnsID: String? = nil, reason: APNsReason? = nil, timestampMilliseconds: Int64? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// The outcome class Apple's rules give this response; for an ``HTTP2Request``'s, which has no reason, its
    /// status's: 200 delivered, 429 and 5xx retried, anything else final.
    public var outcomeClass: APNsOutcomeClass {
        if status == 200 { return .delivered }
        switch reason {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic:
            return .tokenDead
        case .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown, .idleTimeout,
            .expiredProviderToken, .tooManyProviderTokenUpdates:
            return .retryLater
        default:
            if status == 410 { return .tokenDead }
            if status >= 500 || status == 429 { return .retryLater }
            return .configurationFault
        }
    }

    /// True when APNs refuses the sender's credentials or topic (its key, team, certificate or bundle id): every
    /// request of the pool fails the same way until that configuration is fixed, so the caller stops sending
    /// through it and holds its notifications instead of spending them.
    public var refusesConfiguration: Bool {
        switch reason {
        case .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken,
            .badCertificate, .badCertificateEnvironment, .forbidden, .badTopic, .topicDisallowed, .missingTopic:
            true
        default: false
        }
    }

    /// The wait ``retryAfter`` asks for, when it is delay-seconds (an HTTP date is read as none).
    public var retryAfterDelay: TimeAmount? {
        guard let retryAfter, let seconds = Int64(retryAfter.trimmingCharacters(in: .whitespaces)), seconds >= 0
        else { return nil }
        return .seconds(seconds)
    }

    /// True when this response means the connection's provider token must not be used again
    /// (403 ExpiredProviderToken or 429 TooManyProviderTokenUpdates): the connection is replaced.
    public var invalidatesConnection: Bool {
        reason == .expiredProviderToken || reason == .tooManyProviderTokenUpdates
    }
}

/// The four classes every delivery attempt falls into.
public enum APNsOutcomeClass: String, Sendable, Hashable, CaseIterable, Codable {
    /// APNs accepted the notification (200).
    case delivered
    /// The device token is no longer valid (410, BadDeviceToken, DeviceTokenNotForTopic): deactivate it.
    case tokenDead = "token_dead"
    /// A transient failure (429 TooManyRequests, 5xx, Shutdown, connection lost): retried with backoff.
    case retryLater = "retry_later"
    /// A fault in the sender's configuration (keys, topics, push types): reported, never retried.
    case configurationFault = "configuration_fault"
}

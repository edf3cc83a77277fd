public import APNs
public import Foundation
import Logging
import PostgresNIO

/// What a device sends when it registers (or re-registers) its APNs token.
public struct DeviceRegistration: Sendable, Hashable {
    /// The tenant's id for the user the device belongs to.
    public var userID: String
    /// The APNs device token in hex; stored lower-cased.
    public var token: String
    /// The device's platform (`ios`).
    public var platform: String
    /// The APNs environment the token was issued for.
    public var environment: TenantConfiguration.Environment
    /// The app's identifier for the device, if it sends one.
    public var deviceID: String?
    /// The app's version.
    public var appVersion: String?
    /// The device's locale (`en_US`).
    public var locale: String?
    /// The device's IANA time zone (`Europe/Paris`).
    public var timeZone: String?
    /// The subscription topics the device subscribes to; each must be one of the tenant's `subscription_topics`.
    public var topics: [String]

    /// Creates a registration.
    public init(
        userID: String,
        token: String,
        platform: String = "ios",
        environment: TenantConfiguration.Environment = .production,
        deviceID: String? = nil,
        appVersion: String? = nil,
        locale: String? = nil,
        timeZone: String? = nil,
        topics: [String] = []
    ) {
        self.userID = userID
        self.token = token
        self.platform = platform
        self.environment = environment
        self.deviceID = deviceID
        self.appVersion = appVersion
        self.locale = locale
        self.timeZone = timeZone
        self.topics = topics
    }
}

/// What a fan-out needs of an active device: whose it is, its token, its environment and its time zone.
public struct DeviceTarget: Sendable, Hashable {
    /// The user who holds the device.
    public var userID: String
    /// The device token, lower-case hex.
    public var token: String
    /// The APNs environment of its build.
    public var environment: TenantConfiguration.Environment
    /// Its IANA time zone, if it sent one.
    public var timeZone: String?

    /// A target with these fields.
    public init(userID: String, token: String, environment: TenantConfiguration.Environment, timeZone: String?) {
        self.userID = userID
        self.token = token
        self.environment = environment
        self.timeZone = timeZone
    }

    /// The target of a stored device.
    public init(_ device: DeviceRecord) {
        self.init(
            userID: device.userID, token: device.token, environment: device.environment, timeZone: device.timeZone)
    }

    /// The columns it is read from, in order.
    static let columns = "user_id, token, environment, time_zone"
}

/// A device as stored in the `devices` table.
public struct DeviceRecord: Sendable, Hashable {
    /// The tenant the device belongs to.
    public var tenantID: String
    /// The user the token belongs to now.
    public var userID: String
    /// The APNs token, lower-case hex.
    public var token: String
    /// The platform (`ios`).
    public var platform: String
    /// The APNs environment of the token.
    public var environment: TenantConfiguration.Environment
    /// The app's identifier for the device.
    public var deviceID: String?
    /// The app's version at the last registration.
    public var appVersion: String?
    /// The locale at the last registration.
    public var locale: String?
    /// The time zone at the last registration.
    public var timeZone: String?
    /// The subscription topics.
    public var topics: [String]
    /// Whether pushes go to this token; `false` after APNs declared it dead.
    public var active: Bool
    /// The time of the registration that wrote this row (the device's, as given to ``RelayStore/registerDevice(tenant:registration:at:)``).
    public var registeredAt: Date
    /// Apple's timestamp from the verdict that deactivated the token, or `nil` while it is alive.
    public var invalidatedAt: Date?
    /// When the row was first inserted.
    public var createdAt: Date
    /// When the row last changed.
    public var updatedAt: Date
}

/// What ``RelayStore/registerDevice(tenant:registration:at:)`` did.
public struct DeviceRegistrationResult: Sendable, Hashable {
    /// How the registration was applied.
    public enum Status: String, Sendable, Hashable {
        /// A new row was inserted.
        case created
        /// The existing row (same slot under the token policy) was overwritten and is active.
        case updated
        /// The existing row was inactive (APNs had declared the token dead) and the registration,
        /// newer than Apple's timestamp, brought it back.
        case reactivated
        /// The token was declared dead by APNs at a time at or after this registration's time, so the device
        /// stays inactive: the registration was ignored, or, when the slot held no row or another token, its row
        /// was written inactive with Apple's timestamp. No push goes to the token.
        case notReactivatedAfterInvalidation = "not_reactivated_after_invalidation"
        /// The stored registration is newer than this one (registrations arriving out of order), so this one
        /// was ignored.
        case ignoredOutdated = "ignored_outdated"
    }

    /// How the registration was applied.
    public var status: Status
    /// The user the token belonged to before, when it moved to another user (`token_moves_to_last_user`).
    public var previousUserID: String?
    /// The token the row held before, when the registration replaced it (`one_per_user_platform`).
    public var replacedToken: String?
    /// The row as stored after the call.
    public var device: DeviceRecord

    /// Whether the registration left an active device (created, updated or reactivated).
    public var applied: Bool {
        status == .created || status == .updated || status == .reactivated
    }
}

/// Where a page of a user's devices ended (keyset paging): the last device's place in LIST_DEVICES' order, the most
/// recently registered first, then by token descending.
public struct DeviceKey: Sendable, Hashable {
    /// `registered_at` in microseconds since 1970.
    public var registeredAtMicroseconds: Int64
    /// The token.
    public var token: String

    /// A key of these values.
    public init(registeredAtMicroseconds: Int64, token: String) {
        self.registeredAtMicroseconds = registeredAtMicroseconds
        self.token = token
    }

    /// The key of `device`: the page after it starts with the device after it.
    public init(after device: DeviceRecord) {
        self.init(
            registeredAtMicroseconds: Int64((device.registeredAt.timeIntervalSince1970 * 1_000_000).rounded()),
            token: device.token)
    }
}

package import Foundation
import Logging
import PostgresNIO
package import PushRelayProtocol

/// What a device sends when it registers (or re-registers) its token.
package struct DeviceRegistration: Sendable, Hashable {
    /// The tenant's id for the user the device belongs to.
    package var userID: String
    /// The device token, stored by its provider's rule (``PushRelayProtocol/PushProvider/storedToken(_:)``: an
    /// APNs token lower-cased, any other byte for byte).
    package var token: String
    /// The push service the token belongs to.
    package var provider: PushProvider
    /// The device's platform (`ios`, `android`).
    package var platform: String
    /// The APNs environment the token was issued for (`production` for other providers' devices).
    package var environment: TenantConfiguration.Environment
    /// The app's identifier for the device, if it sends one.
    package var deviceID: String?
    /// The app's version.
    package var appVersion: String?
    /// The device's locale (`en_US`).
    package var locale: String?
    /// The device's IANA time zone (`Europe/Paris`).
    package var timeZone: String?
    /// The subscription topics the device subscribes to; each must be one of the tenant's `subscription_topics`.
    package var topics: [String]

    /// Creates a registration.
    package init(
        userID: String,
        token: String,
        provider: PushProvider = .apns,
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
        self.provider = provider
        self.platform = platform
        self.environment = environment
        self.deviceID = deviceID
        self.appVersion = appVersion
        self.locale = locale
        self.timeZone = timeZone
        self.topics = topics
    }
}

/// What a fan-out needs of an active device: whose it is, its token, where it is sent and its time zone.
package struct DeviceTarget: Sendable, Hashable {
    /// The user who holds the device.
    package var userID: String
    /// The device token as stored.
    package var token: String
    /// Its provider and the provider's scope (APNs: the environment of its build).
    package var destination: Destination
    /// Its IANA time zone, if it sent one.
    package var timeZone: String?

    /// A target with these fields.
    package init(userID: String, token: String, destination: Destination, timeZone: String?) {
        self.userID = userID
        self.token = token
        self.destination = destination
        self.timeZone = timeZone
    }

    /// The target of a stored device.
    package init(_ device: DeviceRecord) {
        self.init(
            userID: device.userID, token: device.token, destination: device.destination, timeZone: device.timeZone)
    }

    /// The columns it is read from, in order (the destination by its stored name).
    static let columns = "user_id, token, \(Destination.deviceColumn) AS destination, time_zone"
}

/// A device as stored in the `devices` table.
package struct DeviceRecord: Sendable, Hashable {
    /// The tenant the device belongs to.
    package var tenantID: String
    /// The user the token belongs to now.
    package var userID: String
    /// The token as stored (an APNs token lower-case hex, any other as its provider gave it).
    package var token: String
    /// The push service the token belongs to.
    package var provider: PushProvider
    /// The platform (`ios`, `android`).
    package var platform: String
    /// The APNs environment of the token (`production` for other providers' devices).
    package var environment: TenantConfiguration.Environment
    /// The app's identifier for the device.
    package var deviceID: String?
    /// The app's version at the last registration.
    package var appVersion: String?
    /// The locale at the last registration.
    package var locale: String?
    /// The time zone at the last registration.
    package var timeZone: String?
    /// The subscription topics.
    package var topics: [String]
    /// Whether pushes go to this token; `false` after its provider declared it dead.
    package var active: Bool
    /// The time of the registration that wrote this row (the device's, as given to ``RelayStore/registerDevice(tenant:registration:at:)``).
    package var registeredAt: Date
    /// The provider's timestamp (Apple's) from the verdict that deactivated the token, or `nil` while it is alive.
    package var invalidatedAt: Date?
    /// When the row was first inserted.
    package var createdAt: Date
    /// When the row last changed.
    package var updatedAt: Date

    /// Where the device's notifications go.
    package var destination: Destination {
        provider == .apns ? .apns(environment) : Destination(provider: provider)
    }
}

/// What ``RelayStore/registerDevice(tenant:registration:at:)`` did.
package struct DeviceRegistrationResult: Sendable, Hashable {
    /// How the registration was applied.
    package enum Status: String, Sendable, Hashable {
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
    package var status: Status
    /// The user the token belonged to before, when it moved to another user (`token_moves_to_last_user`).
    package var previousUserID: String?
    /// The token the row held before, when the registration replaced it (`one_per_user_platform`).
    package var replacedToken: String?
    /// The row as stored after the call.
    package var device: DeviceRecord

    /// Whether the registration left an active device (created, updated or reactivated).
    package var applied: Bool {
        status == .created || status == .updated || status == .reactivated
    }
}

/// Where a page of a user's devices ended (keyset paging): the last device's place in LIST_DEVICES' order, the most
/// recently registered first, then by token descending.
package struct DeviceKey: Sendable, Hashable {
    /// `registered_at` in microseconds since 1970.
    package var registeredAtMicroseconds: Int64
    /// The token.
    package var token: String

    /// A key of these values.
    package init(registeredAtMicroseconds: Int64, token: String) {
        self.registeredAtMicroseconds = registeredAtMicroseconds
        self.token = token
    }

    /// The key of `device`: the page after it starts with the device after it.
    package init(after device: DeviceRecord) {
        self.init(
            registeredAtMicroseconds: Int64((device.registeredAt.timeIntervalSince1970 * 1_000_000).rounded()),
            token: device.token)
    }
}

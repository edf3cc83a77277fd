import Foundation
import PushRelayProtocol
import RelayStore

extension Date {
    /// Milliseconds since 1970, as the wire carries times.
    var unixMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    /// The date `milliseconds` after 1970.
    init(unixMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension Pushrelay_V1_Environment {
    /// The wire value for an APNs environment.
    init(_ environment: TenantConfiguration.Environment) {
        self = environment == .production ? .production : .sandbox
    }

    /// The APNs environment, or `nil` when unspecified.
    var apns: TenantConfiguration.Environment? {
        switch self {
        case .production: .production
        case .sandbox: .development
        default: nil
        }
    }
}

extension TenantConfiguration.Environment {
    /// The environment as the wire's enum names it: `PRODUCTION` or `SANDBOX`.
    var wireName: String { self == .production ? "PRODUCTION" : "SANDBOX" }
}

extension Pushrelay_V1_Device {
    /// The wire form of a registry row.
    init(_ record: DeviceRecord) {
        self.init()
        userID = record.userID
        token = record.token
        provider = record.provider.rawValue
        platform = record.platform
        environment = record.provider == .apns ? .init(record.environment) : .unspecified
        deviceID = record.deviceID ?? ""
        appVersion = record.appVersion ?? ""
        locale = record.locale ?? ""
        timeZone = record.timeZone ?? ""
        topics = record.topics
        active = record.active
        registeredAtMs = record.registeredAt.unixMilliseconds
        invalidatedAtMs = record.invalidatedAt?.unixMilliseconds ?? 0
    }
}

extension DeliveryOutcome {
    /// The outcome as the wire names it.
    var wireName: String {
        switch self {
        case .delivered: "delivered"
        case .tokenDead: "dead_token"
        case .configurationFault: "rejected"
        case .retryLater: "failed"
        case .skipped: "skipped"
        case .expired: "expired"
        case .deferred: "deferred"
        }
    }
}

extension Pushrelay_V1_Delivery {
    /// The wire form of a recorded attempt.
    init(_ record: DeliveryRecord) {
        self.init()
        jobID = record.jobID
        userID = record.userID ?? ""
        token = record.token
        providerMessageID = record.providerMessageID ?? ""
        apnsID = record.apnsMessageID
        outcome = record.outcome.wireName
        reason = record.reason ?? ""
        attempt = UInt32(clamping: record.attempt)
        sentAtMs = record.sentAt.unixMilliseconds
        answeredAtMs = record.answeredAt?.unixMilliseconds ?? 0
        latencyMs = UInt32(clamping: record.latencyMilliseconds ?? 0)
    }
}

extension DeliveryRecord {
    /// The `apns_id` the wire shows beside `provider_message_id`: the message id when it is an APNs one (a UUID,
    /// as the `apns-id` is), else empty.
    var apnsMessageID: String {
        guard let id = providerMessageID, UUID(uuidString: id) != nil else { return "" }
        return id
    }
}

extension Pushrelay_V1_Job {
    /// The wire form of a job row.
    init(_ record: JobRecord) {
        self.init()
        jobID = record.id
        state = .init(record.state)
        notificationType = record.notificationType
        createdAtMs = record.createdAt.unixMilliseconds
        finishedAtMs = record.finishedAt?.unixMilliseconds ?? 0
        devices = UInt32(clamping: record.devices)
        delivered = UInt32(clamping: record.delivered)
        failed = UInt32(clamping: record.failed)
        skipped = UInt32(clamping: record.skipped)
        error = record.error ?? ""
    }
}

extension Pushrelay_V1_NotificationTypeList {
    /// The notification types of `tenant`, by name.
    init(_ tenant: TenantConfiguration) {
        self.init()
        types = tenant.notificationTypes.sorted { $0.key < $1.key }.map { name, type in
            var wire = Pushrelay_V1_NotificationType()
            wire.name = name
            wire.pushType = type.pushType.rawValue
            wire.priority = UInt32(clamping: type.priority)
            wire.mandatory = !type.optOutAllowed
            wire.defaultEnabled = type.defaultEnabled
            wire.subscription = type.subscription ?? ""
            wire.templateValues = Array(
                Set([type.threadID, type.category].compactMap(\.self).flatMap(SendPlan.placeholders(in:)))
            ).sorted()
            wire.expirationSeconds = UInt32(clamping: type.expiration ?? 0)
            wire.interruptionLevel = type.interruptionLevel?.rawValue ?? ""
            wire.quietHoursAction = tenant.quietHours.map { ($0.actions[name] ?? $0.defaultAction).rawValue } ?? ""
            let caps = tenant.rateLimits.perUser[name]
            wire.maxPerHour = UInt32(clamping: caps?.maxPerHour ?? 0)
            wire.maxPerDay = UInt32(clamping: caps?.maxPerDay ?? 0)
            wire.environments = (tenant.bundleIDs[type.bundleID]?.environments ?? []).map(Pushrelay_V1_Environment.init)
            wire.retryForSeconds = UInt32(clamping: type.retryFor ?? 0)
            return wire
        }
        subscriptionTopics = tenant.subscriptionTopics
        tokenPolicy = tenant.tokenPolicy.rawValue
        quietHoursStart = tenant.quietHours?.start.description ?? ""
        quietHoursEnd = tenant.quietHours?.end.description ?? ""
        quietHoursTimeZone = tenant.quietHours?.timeZone ?? ""
        notificationsPerSecond = UInt32(clamping: tenant.rateLimits.notificationsPerSecond)
    }
}

extension Pushrelay_V1_JobState {
    /// The wire form of a job state.
    init(_ state: JobState) {
        switch state {
        case .accepted: self = .accepted
        case .scheduled: self = .scheduled
        case .running: self = .running
        case .completed: self = .completed
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }
}

extension Pushrelay_V1_Mute {
    /// The wire form of a mute.
    init(_ record: MuteRecord) {
        self.init()
        userID = record.userID
        threadID = record.threadID ?? ""
        scope = record.scope ?? ""
        untilMs = record.until?.unixMilliseconds ?? 0
    }
}

extension ProtocolError {
    /// This error, naming the request of `kind` (`set_mute`) when it is an `INVALID_ARGUMENT` that names no field: the
    /// database refused the request's data where no field rule did (``init(_:)``), so the request as a whole is at
    /// fault.
    func namingRequest(_ kind: FrameKind) -> ProtocolError {
        guard code == .invalidArgument, field.isEmpty else { return self }
        var named = self
        named.field = kind.metricName
        return named
    }

    /// The wire error for a store failure: a bad argument stays the caller's fault (an `INVALID_ARGUMENT` that
    /// ``namingRequest(_:)`` names), anything else is the relay's (`UNAVAILABLE` when the database cannot be reached).
    init(_ error: RelayStoreError) {
        switch error.code {
        case .invalidDeviceRegistration, .invalidArgument, .statementRejected:
            self.init(.invalidArgument, error.detail)
        case .unknownTenant:
            self.init(.notFound, "no tenant \(error.detail)")
        case .databaseUnavailable:
            self.init(.unavailable, "\(error)", retryAfterMilliseconds: 1_000)
        default:
            self.init(.internal, "\(error)")
        }
    }
}

import Foundation
import PushRelayProtocol
import RelayStore

/// A SEND request checked against the tenant's configuration: what every provider's devices share (audience,
/// schedule, thread and scope for mutes and presence, the urgency quiet hours decide on, expiration, collapse key),
/// and the notification rendered once per provider (``renderings``) for every device of the job.
struct SendPlan: Sendable {
    /// Whom the notification goes to.
    enum Audience: Sendable, Hashable {
        case users([String])
        /// Tokens as stored: one in the APNs form lower-cased, any other as the request gave it
        /// (``PushRelayProtocol/PushProvider/canonicalForm(of:)``).
        case tokens([String])
        case topic(String)
    }

    var notificationType: String
    var audience: Audience
    var excludedUsers: Set<String>
    /// The topics a device must be subscribed to: the type's `subscription`, if it has one.
    var requiredTopics: [String]
    /// Expiration relative to sending, in seconds; `nil` sends none.
    var expirationSeconds: Int64?
    /// An absolute expiration from the request, Unix seconds.
    var absoluteExpiration: Int64?
    /// The collapse key (APNs' `apns-collapse-id`), or `nil`.
    var collapseID: String?
    /// Where the job's devices may be sent: a device of another destination gets a configuration fault.
    var destinations: Set<Destination>
    /// The notification rendered for each provider the tenant's devices may have.
    var renderings: [PushProvider: any ProviderRendering]
    /// When the devices are due.
    var schedule: Schedule
    /// The notification's thread id after templates (mutes and presence match it).
    var threadID: String?
    /// The notification's category after templates.
    var category: String?
    /// The scope the notification belongs to (scope mutes match it).
    var scope: String?
    /// The urgency after the type's default (quiet hours let time-sensitive ones pass).
    var interruptionLevel: TenantConfiguration.InterruptionLevel?

    /// Seconds a notification without a positive expiration is held while its provider cannot take it.
    var retryFor: Int64

    /// The expiration for a notification sent at `now`; a held one (`hold`) keeps the expiration it had when it
    /// was first due.
    func expiration(now: Date, hold: DeliveryHold? = nil) -> Int64? {
        if let absoluteExpiration { return absoluteExpiration }
        guard let expirationSeconds else { return nil }
        if expirationSeconds == 0 { return 0 }
        if let hold { return Int64(hold.until.timeIntervalSince1970) }
        return Int64(now.timeIntervalSince1970) + expirationSeconds
    }

    /// The last instant a notification first due at `due` may still go out when it is held: its expiration when
    /// it has a positive one, else `due` plus the type's `retry_for`.
    func holdDeadline(due: Date) -> Date {
        if let absoluteExpiration, absoluteExpiration > 0 {
            return Date(timeIntervalSince1970: TimeInterval(absoluteExpiration))
        }
        if let expirationSeconds, expirationSeconds > 0 {
            return due.addingTimeInterval(TimeInterval(expirationSeconds))
        }
        return due.addingTimeInterval(TimeInterval(retryFor))
    }

    /// Checks `request`, whose fields passed ``Pushrelay_V1_Send/validate(limits:nowMilliseconds:)``, against
    /// `tenant`, and renders it for each of `services` (each refuses what its provider would).
    init(
        _ request: Pushrelay_V1_Send, tenant: TenantConfiguration, services: PushServices
    ) throws(ProtocolError) {
        guard let type = tenant.notificationTypes[request.notificationType] else {
            let known = tenant.notificationTypes.keys.sorted().joined(separator: ", ")
            throw .invalidArgument(
                "send.notification_type",
                "unknown notification type '\(request.notificationType)' for \(tenant.id); known: \(known)"
            )
        }
        notificationType = request.notificationType
        if !request.userIds.isEmpty {
            audience = .users(request.userIds)
        } else if !request.tokens.isEmpty {
            audience = .tokens(request.tokens.map { PushProvider.canonicalForm(of: $0.token) })
        } else {
            guard tenant.subscriptionTopics.contains(request.topic) else {
                throw .invalidArgument(
                    "send.topic", "'\(request.topic)' is not one of \(tenant.id)'s subscription topics"
                )
            }
            if let subscription = type.subscription, subscription != request.topic {
                throw .invalidArgument(
                    "send.topic",
                    "'\(request.notificationType)' goes only to devices subscribed to '\(subscription)', not to topic "
                        + "'\(request.topic)'"
                )
            }
            audience = .topic(request.topic)
        }
        excludedUsers = Set(request.excludeUserIds)
        requiredTopics = type.subscription.map { [$0] } ?? []
        expirationSeconds = type.expiration.map(Int64.init)
        retryFor = Int64(type.retryFor ?? TenantConfiguration.NotificationType.defaultRetryFor)
        absoluteExpiration = request.hasExpiration ? request.expiration : nil
        collapseID = request.collapseID.isEmpty ? nil : request.collapseID
        threadID = try Self.value(request.threadID, template: type.threadID, request: request, filling: "thread_id")
        category = try Self.value(request.category, template: type.category, request: request, filling: "category")
        if !request.interruptionLevel.isEmpty {
            guard let level = TenantConfiguration.InterruptionLevel(rawValue: request.interruptionLevel) else {
                throw .invalidArgument(
                    "send.interruption_level",
                    "'\(request.interruptionLevel)' is not passive, active, time-sensitive or critical"
                )
            }
            interruptionLevel = level
        } else {
            interruptionLevel = type.interruptionLevel
        }
        scope = request.scope.nonEmpty
        schedule = try Schedule(request)
        destinations = []
        renderings = [:]
        for service in services.all {
            guard let rendering = try service.render(request, plan: self, type: type) else { continue }
            renderings[service.provider] = rendering
            destinations.formUnion(service.destinations(of: type, tenant: tenant))
        }
    }

    /// The send's own value of a field, else the type's `template` filled from the send's template values, else
    /// `nil`.
    private static func value(
        _ own: String, template: String?, request: Pushrelay_V1_Send, filling key: String
    ) throws(ProtocolError) -> String? {
        if !own.isEmpty { return own }
        guard let template else { return nil }
        return try fill(template, values: request.templateValues, filling: key)
    }

    /// The names of `template`'s `{name}` placeholders, in order.
    static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// Fills `{name}` placeholders of `template`, the template of the payload's `key` (`thread_id`), from `values`: a
    /// missing value is `INVALID_ARGUMENT` naming it, `send.template_values.<name>`.
    static func fill(_ template: String, values: [String: String], filling key: String) throws(ProtocolError) -> String
    {
        var output = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            output += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else { break }
            let name = String(rest[rest.index(after: open)..<close])
            guard let value = values[name] else {
                throw .invalidArgument(
                    "send.template_values.\(name)", "the \(key) template '\(template)' needs a value for '\(name)'"
                )
            }
            output += value
            rest = rest[rest.index(after: close)...]
        }
        return output + rest
    }
}

/// When a job's devices are due: now, at one instant, or at a wall-clock time in each device's time zone.
struct Schedule: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case now
        case at(Date)
        case local(DateComponents)
    }

    var kind: Kind

    /// The schedule a SEND asks for.
    init(_ request: Pushrelay_V1_Send) throws(ProtocolError) {
        switch (request.sendAtMs, request.sendAtLocal) {
        case (0, ""):
            kind = .now
        case (let milliseconds, ""):
            kind = .at(Date(unixMilliseconds: milliseconds))
        case (0, let text):
            // Checked when the SEND arrived; a job an older relay accepted may hold a time that is no day.
            guard let local = try? LocalDateTime(parsing: text) else {
                throw .invalidArgument("send.send_at_local", "send_at_local '\(text)' is not a wall-clock time")
            }
            kind = .local(
                DateComponents(
                    year: local.year, month: local.month, day: local.day, hour: local.hour, minute: local.minute,
                    second: local.second))
        default:
            throw .invalidArgument("send.send_at_local", "give send_at_ms or send_at_local, not both")
        }
    }

    /// The first instant any device can be due: the job waits (scheduled) until then; `nil` is now.
    var earliest: Date? {
        switch kind {
        case .now: nil
        case .at(let date): date
        // The earliest time zone is UTC+14.
        case .local(let components): Self.date(components, in: TimeZone(secondsFromGMT: 14 * 3_600))
        }
    }

    /// When every device is due, whatever its time zone; `nil` for a local-time schedule.
    func dueAt(now: Date) -> Date? {
        switch kind {
        case .now: now
        case .at(let date): date
        case .local: nil
        }
    }

    /// When a device in `timeZone` (IANA; UTC when unknown) is due.
    func dueAt(timeZone: String?, now: Date) -> Date {
        switch kind {
        case .now: return now
        case .at(let date): return date
        case .local(let components):
            let zone = timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")
            return Self.date(components, in: zone) ?? now
        }
    }

    private static func date(_ components: DateComponents, in zone: TimeZone?) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        if let zone { calendar.timeZone = zone }
        return calendar.date(from: components)
    }
}

extension String {
    /// The string, or `nil` when it is empty.
    var nonEmpty: String? { isEmpty ? nil : self }
}

extension Array where Element == String {
    /// The array, or `nil` when it is empty.
    var nonEmpty: [String]? { isEmpty ? nil : self }
}

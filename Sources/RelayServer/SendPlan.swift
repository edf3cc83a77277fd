import APNs
import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

/// A SEND request checked against the tenant's configuration, with its payload encoded once for every
/// device of the job.
struct SendPlan: Sendable {
    /// Whom the notification goes to.
    enum Audience: Sendable, Hashable {
        case users([String])
        case tokens([String])
        case topic(String)
    }

    var notificationType: String
    var audience: Audience
    var excludedUsers: Set<String>
    /// The topics a device must be subscribed to: the type's `subscription`, if it has one.
    var requiredTopics: [String]
    var bundleID: String
    var pushType: APNsPushType
    var priority: APNsPriority
    /// `apns-expiration` relative to sending, in seconds; `nil` sends no header.
    var expirationSeconds: Int64?
    /// An absolute `apns-expiration` from the request, Unix seconds.
    var absoluteExpiration: Int64?
    var collapseID: String?
    var payload: ByteBuffer
    var environments: Set<APNsEnvironment>
    /// When the devices are due.
    var schedule: Schedule
    /// The notification's thread id after templates (mutes and presence match it).
    var threadID: String?
    /// The scope the notification belongs to (scope mutes match it).
    var scope: String?
    /// The interruption level after the type's default (quiet hours let time-sensitive ones pass).
    var interruptionLevel: APNsPayload.InterruptionLevel?

    /// Seconds a notification without a positive expiration is held while its provider cannot take it.
    var retryFor: Int64

    /// The `apns-expiration` for a notification sent at `now`; a held one (`hold`) keeps the expiration it had
    /// when it was first due.
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
    /// `tenant` and encodes its payload.
    init(_ request: Pushrelay_V1_Send, tenant: TenantConfiguration) throws(ProtocolError) {
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
            audience = .tokens(request.tokens.map { $0.token.lowercased() })
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
        bundleID = type.bundleID
        pushType = type.pushType
        environments = Set(tenant.bundleIDs[type.bundleID]?.environments ?? [])
        let priorityValue = request.hasPriority ? Int(request.priority) : type.priority
        guard let priority = APNsPriority(rawValue: priorityValue) else {
            throw .invalidArgument("send.priority", "priority is 10, 5 or 1, not \(priorityValue)")
        }
        self.priority = priority
        expirationSeconds = type.expiration.map(Int64.init)
        retryFor = Int64(type.retryFor ?? TenantConfiguration.NotificationType.defaultRetryFor)
        absoluteExpiration = request.hasExpiration ? request.expiration : nil
        collapseID = request.collapseID.isEmpty ? nil : request.collapseID
        let aps = try Self.aps(request, type: type)
        threadID = aps.threadID
        interruptionLevel = aps.interruptionLevel
        scope = request.scope.nonEmpty
        schedule = try Schedule(request)
        payload = ByteBuffer(bytes: try Self.payload(aps: aps, request))
        let check = APNsNotification(
            deviceToken: String(repeating: "0", count: 64), bundleID: bundleID, pushType: pushType, priority: priority,
            expiration: absoluteExpiration, collapseID: collapseID, payload: payload
        )
        do {
            try check.validate()
        } catch {
            throw .invalidArgument("send", "the notification is not valid for APNs: \(error)")
        }
    }

    private static func aps(
        _ request: Pushrelay_V1_Send,
        type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) -> APNsPayload.APS {
        var aps = APNsPayload.APS()
        if request.hasAlert {
            let alert = request.alert
            aps.alert = .fields(
                .init(
                    title: alert.title.nonEmpty, subtitle: alert.subtitle.nonEmpty, body: alert.body.nonEmpty,
                    launchImage: alert.launchImage.nonEmpty, titleLocKey: alert.titleLocKey.nonEmpty,
                    titleLocArgs: alert.titleLocArgs.nonEmpty, subtitleLocKey: alert.subtitleLocKey.nonEmpty,
                    subtitleLocArgs: alert.subtitleLocArgs.nonEmpty, locKey: alert.locKey.nonEmpty,
                    locArgs: alert.locArgs.nonEmpty
                )
            )
        }
        if request.hasBadge { aps.badge = Int(request.badge) }
        if !request.sound.isEmpty { aps.sound = .named(request.sound) }
        if let threadID = request.threadID.nonEmpty {
            aps.threadID = threadID
        } else if let template = type.threadID {
            aps.threadID = try fill(template, values: request.templateValues, filling: "thread_id")
        }
        if let category = request.category.nonEmpty {
            aps.category = category
        } else if let template = type.category {
            aps.category = try fill(template, values: request.templateValues, filling: "category")
        }
        if request.contentAvailable { aps.contentAvailable = true }
        if request.mutableContent { aps.mutableContent = true }
        if !request.interruptionLevel.isEmpty {
            guard let level = APNsPayload.InterruptionLevel(rawValue: request.interruptionLevel) else {
                throw .invalidArgument(
                    "send.interruption_level",
                    "'\(request.interruptionLevel)' is not passive, active, time-sensitive or critical"
                )
            }
            aps.interruptionLevel = level
        } else {
            aps.interruptionLevel = type.interruptionLevel
        }
        if request.hasRelevanceScore { aps.relevanceScore = request.relevanceScore }
        return aps
    }

    private static func payload(aps: APNsPayload.APS, _ request: Pushrelay_V1_Send) throws(ProtocolError) -> [UInt8] {
        var custom: [String: JSONValue] = [:]
        if !request.customJson.isEmpty {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(request.customJson.utf8))
            else {
                throw .invalidArgument("send.custom_json", "custom_json must be a JSON object")
            }
            guard object["aps"] == nil else {
                throw .invalidArgument("send.custom_json", "custom_json may not set \"aps\"; use the send's fields")
            }
            custom = object
        }
        do {
            return try APNsPayload(aps: aps, custom: custom).jsonBytes()
        } catch {
            throw .invalidArgument("send", "the payload cannot be encoded: \(error)")
        }
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

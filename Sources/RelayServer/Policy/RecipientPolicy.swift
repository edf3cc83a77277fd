import Foundation
import RelayStore

/// Why a recipient got nothing.
enum SkipReason: String, Sendable, Hashable, CaseIterable {
    /// The user turned the type off, or never turned on a type that is off by default.
    case optedOut = "opted_out"
    /// The user muted the notification's thread or scope.
    case muted
    /// The user is active in the notification's thread (the app shows it already).
    case active
    /// The user reached the type's per-user cap (`rate_limits.per_user`).
    case capped
    /// Quiet hours, for a type whose action is `drop`.
    case quietHours = "quiet_hours"
    /// The user has no active device (or the token listed is not an active device).
    case noDevice = "no_device"
    /// The recipient's active devices all list topics, none the type's `subscription` (a device that lists no
    /// topics takes every type).
    case notSubscribed = "not_subscribed"
}

/// What the policy decides for one device of one user.
enum PolicyDecision: Sendable, Hashable {
    /// Send now.
    case send
    /// Send nothing, for this reason.
    case skip(SkipReason)
    /// Hold the notification and send it at this instant (the end of the user's quiet hours).
    case deferUntil(Date)
}

/// The notification's side of the decision.
struct PolicyNotification: Sendable {
    /// The notification type's name (`message`).
    var type: String
    /// The type's configuration.
    var typeConfiguration: TenantConfiguration.NotificationType
    /// The notification's `thread-id` as sent (the send's own, or the type's template filled), or `nil`.
    var threadID: String?
    /// The scope the notification belongs to (for scope mutes), or `nil`.
    var scope: String?
    /// The send's own interruption level, or `nil` to use the type's.
    var interruptionLevel: TenantConfiguration.InterruptionLevel?

    /// Creates the notification's side.
    init(
        type: String,
        typeConfiguration: TenantConfiguration.NotificationType,
        threadID: String? = nil,
        scope: String? = nil,
        interruptionLevel: TenantConfiguration.InterruptionLevel? = nil
    ) {
        self.type = type
        self.typeConfiguration = typeConfiguration
        self.threadID = threadID.flatMap { $0.isEmpty ? nil : $0 }
        self.scope = scope.flatMap { $0.isEmpty ? nil : $0 }
        self.interruptionLevel = interruptionLevel
    }

    /// The interruption level the notification is delivered with: the send's, else the type's.
    var effectiveInterruptionLevel: TenantConfiguration.InterruptionLevel? {
        interruptionLevel ?? typeConfiguration.interruptionLevel
    }
}

/// The users' side, loaded in bulk for a page of recipients (``RecipientPolicy/load(users:store:now:)``).
///
/// Users absent from a map have nothing stored: no preference, no mute, no presence, nothing sent.
struct PolicyState: Sendable {
    /// Stored settings per user, then per notification type (`false`: opted out).
    var preferences: [String: [String: Bool]]
    /// Mutes per user (those in force when loaded; ``RecipientPolicy/decide(user:timeZone:state:now:)`` checks
    /// their end again).
    var mutes: [String: [MuteRecord]]
    /// Presence per user: thread id → until when the user is active in it.
    var presence: [String: [String: Date]]
    /// What each user at its per-user cap already received of the notification's type (a user below the cap is
    /// absent: ``RelayStore/userPolicy(tenant:users:reading:now:)``).
    var sentCounts: [String: SentCount]

    /// Creates a state; everything empty by default.
    init(
        preferences: [String: [String: Bool]] = [:],
        mutes: [String: [MuteRecord]] = [:],
        presence: [String: [String: Date]] = [:],
        sentCounts: [String: SentCount] = [:]
    ) {
        self.preferences = preferences
        self.mutes = mutes
        self.presence = presence
        self.sentCounts = sentCounts
    }
}

/// The tenant's rules for one notification: preferences, mutes, presence, per-user caps and quiet
/// hours, decided per device, in that order.
///
/// ``load(users:store:now:)`` reads what a page of users has stored in a few queries;
/// ``decide(user:timeZone:state:now:)`` is pure.
struct RecipientPolicy: Sendable {
    /// The tenant's configuration (its caps and quiet hours).
    var tenant: TenantConfiguration
    /// The notification being decided.
    var notification: PolicyNotification

    /// Creates the policy of `notification` for `tenant`.
    init(tenant: TenantConfiguration, notification: PolicyNotification) {
        self.tenant = tenant
        self.notification = notification
    }

    /// The type's per-user cap, when it has one.
    var cap: TenantConfiguration.PerUserLimit? {
        guard let limit = tenant.rateLimits.perUser[notification.type],
            limit.maxPerHour != nil || limit.maxPerDay != nil
        else { return nil }
        return limit
    }

    /// Loads everything ``decide(user:timeZone:state:now:)`` needs for `users` in one statement
    /// (``RelayStore/userPolicy(tenant:users:reading:now:)``), each lookup only when its rule can apply:
    /// preferences (unless the type is mandatory), mutes (when the notification has a thread id or a scope),
    /// presence (when it has a thread id), counts (when the type has a per-user cap: of the users `counts` does
    /// not know to be far enough below it, and `counts` learns them).
    func load(
        users: [String], store: RelayStore, counts: CapCountCache, now: Date
    ) async throws(RelayStoreError) -> PolicyState {
        let type = notification.type
        let reads = UserPolicyReads(
            preferences: notification.typeConfiguration.optOutAllowed,
            mutes: notification.threadID != nil || notification.scope != nil,
            presence: notification.threadID != nil,
            cap: cap.map { (type, $0) },
            known: cap == nil ? nil : counts.known(tenant: tenant.id, notificationType: type, users: users)
        )
        let found = try await store.userPolicy(tenant: tenant.id, users: users, reading: reads, now: now)
        if let epoch = found.epoch {
            counts.remember(
                tenant: tenant.id, notificationType: type, users: users, known: reads.known, counted: found.countedRows,
                epoch: epoch)
        }
        var state = PolicyState(
            preferences: found.preferences, presence: found.activeThreads, sentCounts: found.sentCounts)
        for mute in found.mutes {
            state.mutes[mute.userID, default: []].append(mute)
        }
        return state
    }

    /// The decision for `user`'s device in time zone `timeZone` (an IANA name; `nil`, empty or unknown: the
    /// tenant's `quiet_hours.time_zone`, else UTC).
    ///
    /// Rules, the first that applies wins: opted out, muted, active in the thread, capped, quiet hours; else send.
    func decide(user: String, timeZone: String?, state: PolicyState, now: Date) -> PolicyDecision {
        if isOptedOut(user, state: state) { return .skip(.optedOut) }
        if isMuted(user, state: state, now: now) { return .skip(.muted) }
        if isActive(user, state: state, now: now) { return .skip(.active) }
        if isCapped(user, state: state) { return .skip(.capped) }
        return quietHoursDecision(timeZone: timeZone, now: now)
    }

    // MARK: - Rules

    private func isOptedOut(_ user: String, state: PolicyState) -> Bool {
        let type = notification.typeConfiguration
        guard type.optOutAllowed else { return false }
        return !(state.preferences[user]?[notification.type] ?? type.defaultEnabled)
    }

    private func isMuted(_ user: String, state: PolicyState, now: Date) -> Bool {
        guard let mutes = state.mutes[user] else { return false }
        return mutes.contains { mute in
            guard mute.until.map({ $0 > now }) ?? true else { return false }
            if let thread = mute.threadID, thread == notification.threadID { return true }
            if let scope = mute.scope, scope == notification.scope { return true }
            return false
        }
    }

    private func isActive(_ user: String, state: PolicyState, now: Date) -> Bool {
        guard let thread = notification.threadID, let until = state.presence[user]?[thread] else { return false }
        return until > now
    }

    private func isCapped(_ user: String, state: PolicyState) -> Bool {
        guard let cap else { return false }
        let sent = state.sentCounts[user] ?? SentCount(lastHour: 0, lastDay: 0)
        if let maxPerHour = cap.maxPerHour, sent.lastHour >= maxPerHour { return true }
        if let maxPerDay = cap.maxPerDay, sent.lastDay >= maxPerDay { return true }
        return false
    }

    private func quietHoursDecision(timeZone: String?, now: Date) -> PolicyDecision {
        guard let quietHours = tenant.quietHours else { return .send }
        switch notification.effectiveInterruptionLevel {
        case .timeSensitive, .critical: return .send
        case .passive, .active, nil: break
        }
        let action = quietHours.action(for: notification.type)
        if action == .pass { return .send }
        let calendar = Self.calendar(
            in: Self.timeZone(named: timeZone) ?? Self.timeZone(named: quietHours.timeZone) ?? .gmt)
        guard Self.isQuiet(now, quietHours: quietHours, calendar: calendar) else { return .send }
        switch action {
        case .pass: return .send
        case .drop: return .skip(.quietHours)
        case .defer:
            return .deferUntil(Self.nextLocalTime(quietHours.end, after: now, calendar: calendar))
        }
    }

    // MARK: - Time

    /// The time zone named `identifier`, or `nil` when it is `nil`, empty or unknown.
    static func timeZone(named identifier: String?) -> TimeZone? {
        guard let identifier, !identifier.isEmpty else { return nil }
        return TimeZone(identifier: identifier)
    }

    /// A Gregorian calendar in `timeZone`.
    static func calendar(in timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// Whether the wall-clock time of `date` in `calendar`'s time zone falls in `[start, end)`; an end before
    /// the start wraps past midnight, and an end equal to the start is never quiet.
    static func isQuiet(_ date: Date, quietHours: TenantConfiguration.QuietHours, calendar: Calendar) -> Bool {
        let local = calendar.dateComponents([.hour, .minute], from: date)
        let minute = (local.hour ?? 0) * 60 + (local.minute ?? 0)
        let start = quietHours.start.hour * 60 + quietHours.start.minute
        let end = quietHours.end.hour * 60 + quietHours.end.minute
        return start <= end ? (start <= minute && minute < end) : (minute >= start || minute < end)
    }

    /// The first instant after `date` at which `calendar`'s wall clock shows `time`: a time skipped by a
    /// daylight-saving change gives the first instant after the gap, a repeated time its first occurrence.
    static func nextLocalTime(_ time: TenantConfiguration.LocalTime, after date: Date, calendar: Calendar) -> Date {
        let wanted = DateComponents(hour: time.hour, minute: time.minute, second: 0)
        if let next = calendar.nextDate(
            after: date, matching: wanted, matchingPolicy: .nextTime, repeatedTimePolicy: .first, direction: .forward)
        {
            return next
        }
        // Not reached with the Gregorian calendar; an hour later is a safe retry.
        return date.addingTimeInterval(3_600)
    }
}

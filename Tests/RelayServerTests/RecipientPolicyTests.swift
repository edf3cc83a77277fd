import APNs
import EmbeddedPostgres
import Foundation
import RelayStore
import Testing

@testable import RelayServer

/// A notification type of the test tenant.
private func notificationType(
    interruptionLevel: TenantConfiguration.InterruptionLevel? = nil,
    optOutAllowed: Bool = true,
    defaultEnabled: Bool = true
) -> TenantConfiguration.NotificationType {
    TenantConfiguration.NotificationType(
        pushType: .alert, priority: 10, bundleID: "com.example.app", interruptionLevel: interruptionLevel,
        optOutAllowed: optOutAllowed, defaultEnabled: defaultEnabled)
}

/// A tenant like Tenants/README.md's example: quiet hours 22:00–07:00 (deferred by default; `message` passes,
/// `promo` is dropped), `digest` opt-in, `refresh` mandatory, `reminder` time-sensitive, caps on `digest`.
private func exampleTenant(quietHours: TenantConfiguration.QuietHours? = quiet("22:00", "07:00")) -> TenantConfiguration
{
    TenantConfiguration(
        id: "example", displayName: "Example",
        bundleIDs: ["com.example.app": .init(environments: [.production])],
        tokenPolicy: .onePerUserPlatform,
        notificationTypes: [
            "message": notificationType(), "digest": notificationType(defaultEnabled: false),
            "refresh": notificationType(optOutAllowed: false),
            "reminder": notificationType(interruptionLevel: .timeSensitive), "promo": notificationType(),
            "news": notificationType(),
        ],
        rateLimits: .init(perUser: ["digest": .init(maxPerHour: 2, maxPerDay: 5), "news": .init(maxPerDay: 3)]),
        quietHours: quietHours)
}

private func quiet(
    _ start: String,
    _ end: String,
    timeZone: String = "UTC",
    actions: [String: TenantConfiguration.QuietHoursAction] = ["message": .pass, "promo": .drop]
) -> TenantConfiguration.QuietHours {
    TenantConfiguration.QuietHours(
        start: TenantConfiguration.LocalTime(start)!, end: TenantConfiguration.LocalTime(end)!, timeZone: timeZone,
        defaultAction: .defer, actions: actions)
}

/// The policy of a notification of `name` (thread `t1`, scope `s1` unless given) for `tenant`.
private func policy(
    _ name: String,
    tenant: TenantConfiguration = exampleTenant(),
    threadID: String? = "t1",
    scope: String? = "s1",
    interruptionLevel: TenantConfiguration.InterruptionLevel? = nil
) -> RecipientPolicy {
    RecipientPolicy(
        tenant: tenant,
        notification: PolicyNotification(
            type: name, typeConfiguration: tenant.notificationTypes[name]!, threadID: threadID, scope: scope,
            interruptionLevel: interruptionLevel))
}

/// An instant given in UTC, `2026-03-10T12:00:00Z`.
private func utc(_ text: String) -> Date {
    try! Date(text, strategy: .iso8601)
}

/// Noon UTC on a plain Tuesday: outside quiet hours in UTC.
private let noon = utc("2026-03-10T12:00:00Z")

@Suite("Recipient policy")
struct RecipientPolicyTests {
    @Test("opted out: a stored false on an optional type, or no choice on an opt-in type; never a mandatory type")
    func optedOut() {
        let empty = PolicyState()
        let prefs = PolicyState(preferences: ["u": ["message": false, "digest": true, "refresh": false]])
        #expect(policy("message").decide(user: "u", timeZone: nil, state: prefs, now: noon) == .skip(.optedOut))
        #expect(policy("message").decide(user: "u", timeZone: nil, state: empty, now: noon) == .send)
        #expect(policy("message").decide(user: "other", timeZone: nil, state: prefs, now: noon) == .send)
        // digest is opt-in: off without a choice, on once chosen.
        #expect(policy("digest").decide(user: "u", timeZone: nil, state: empty, now: noon) == .skip(.optedOut))
        #expect(policy("digest").decide(user: "u", timeZone: nil, state: prefs, now: noon) == .send)
        // refresh is mandatory: a stored false does not count.
        #expect(policy("refresh").decide(user: "u", timeZone: nil, state: prefs, now: noon) == .send)
        // A preference of another type does not count.
        let other = PolicyState(preferences: ["u": ["promo": false]])
        #expect(policy("message").decide(user: "u", timeZone: nil, state: other, now: noon) == .send)
    }

    @Test("muted: a mute in force of the notification's thread or scope; ended mutes and other threads do not count")
    func muted() {
        let thread = PolicyState(mutes: ["u": [MuteRecord(userID: "u", threadID: "t1")]])
        let scope = PolicyState(mutes: ["u": [MuteRecord(userID: "u", scope: "s1", until: noon + 60)]])
        let ended = PolicyState(mutes: ["u": [MuteRecord(userID: "u", threadID: "t1", until: noon)]])
        let others = PolicyState(
            mutes: ["u": [MuteRecord(userID: "u", threadID: "t2"), MuteRecord(userID: "u", scope: "s2")]])
        let message = policy("message")
        #expect(message.decide(user: "u", timeZone: nil, state: thread, now: noon) == .skip(.muted))
        #expect(message.decide(user: "u", timeZone: nil, state: scope, now: noon) == .skip(.muted))
        #expect(message.decide(user: "u", timeZone: nil, state: scope, now: noon + 60) == .send)
        #expect(message.decide(user: "u", timeZone: nil, state: ended, now: noon) == .send)
        #expect(message.decide(user: "u", timeZone: nil, state: others, now: noon) == .send)
        #expect(message.decide(user: "v", timeZone: nil, state: thread, now: noon) == .send)
        // A notification without a thread id or scope is never muted, even by a mute named like nothing.
        let bare = policy("message", threadID: nil, scope: "")
        #expect(bare.notification.scope == nil)
        #expect(bare.decide(user: "u", timeZone: nil, state: thread, now: noon) == .send)
        #expect(bare.decide(user: "u", timeZone: nil, state: scope, now: noon) == .send)
        // A thread mute does not match the same name as a scope.
        let swapped = policy("message", threadID: "s1", scope: "t1")
        #expect(
            swapped.decide(
                user: "u", timeZone: nil, state: PolicyState(mutes: ["u": [MuteRecord(userID: "u", threadID: "t1")]]),
                now: noon)
                == .send)
    }

    @Test("active: presence in the notification's thread until after now")
    func active() {
        let present = PolicyState(presence: ["u": ["t1": noon + 30, "t2": noon + 600]])
        #expect(policy("message").decide(user: "u", timeZone: nil, state: present, now: noon) == .skip(.active))
        #expect(policy("message").decide(user: "u", timeZone: nil, state: present, now: noon + 30) == .send)
        #expect(policy("message", threadID: "t3").decide(user: "u", timeZone: nil, state: present, now: noon) == .send)
        #expect(policy("message", threadID: nil).decide(user: "u", timeZone: nil, state: present, now: noon) == .send)
        #expect(policy("message").decide(user: "v", timeZone: nil, state: present, now: noon) == .send)
    }

    @Test("capped: max_per_hour and max_per_day are reached at the boundary, not before")
    func capped() {
        let digest = policy("digest")  // 2 per hour, 5 per day
        func decide(hour: Int, day: Int) -> PolicyDecision {
            let state = PolicyState(
                preferences: ["u": ["digest": true]], sentCounts: ["u": SentCount(lastHour: hour, lastDay: day)])
            return digest.decide(user: "u", timeZone: nil, state: state, now: noon)
        }
        #expect(decide(hour: 0, day: 0) == .send)
        #expect(decide(hour: 1, day: 4) == .send)
        #expect(decide(hour: 2, day: 2) == .skip(.capped))
        #expect(decide(hour: 0, day: 5) == .skip(.capped))
        #expect(decide(hour: 1, day: 6) == .skip(.capped))
        // Nothing sent yet: absent from the counts.
        let none = PolicyState(preferences: ["u": ["digest": true]])
        #expect(digest.decide(user: "u", timeZone: nil, state: none, now: noon) == .send)
        // news caps only the day.
        let news = policy("news")
        let hourly = PolicyState(sentCounts: ["u": SentCount(lastHour: 100, lastDay: 2)])
        #expect(news.decide(user: "u", timeZone: nil, state: hourly, now: noon) == .send)
        let daily = PolicyState(sentCounts: ["u": SentCount(lastHour: 0, lastDay: 3)])
        #expect(news.decide(user: "u", timeZone: nil, state: daily, now: noon) == .skip(.capped))
        // A type without a cap ignores counts.
        #expect(policy("message").cap == nil)
        #expect(policy("message").decide(user: "u", timeZone: nil, state: daily, now: noon) == .send)
        #expect(news.cap == TenantConfiguration.PerUserLimit(maxPerDay: 3))
    }

    @Test("the rules apply in order: opted out, muted, active, capped, quiet hours, send")
    func order() {
        let night = utc("2026-03-10T23:00:00Z")
        let news = policy("news")
        var state = PolicyState(
            preferences: ["u": ["news": false]], mutes: ["u": [MuteRecord(userID: "u", threadID: "t1")]],
            presence: ["u": ["t1": night + 60]], sentCounts: ["u": SentCount(lastHour: 3, lastDay: 3)])
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: night) == .skip(.optedOut))
        state.preferences = [:]
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: night) == .skip(.muted))
        state.mutes = [:]
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: night) == .skip(.active))
        state.presence = [:]
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: night) == .skip(.capped))
        state.sentCounts = [:]
        #expect(
            news.decide(user: "u", timeZone: nil, state: state, now: night)
                == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: noon) == .send)
    }

    @Test("quiet hours 22:00–07:00 wrap past midnight: [start, end), deferred to the next 07:00")
    func quietHoursWrapMidnight() {
        let news = policy("news")
        func decide(_ time: String) -> PolicyDecision {
            news.decide(user: "u", timeZone: nil, state: PolicyState(), now: utc(time))
        }
        #expect(decide("2026-03-10T21:59:59Z") == .send)
        #expect(decide("2026-03-10T22:00:00Z") == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(decide("2026-03-10T23:59:00Z") == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(decide("2026-03-11T00:00:00Z") == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(decide("2026-03-11T03:00:00Z") == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(decide("2026-03-11T06:59:59Z") == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(decide("2026-03-11T07:00:00Z") == .send)
    }

    @Test("quiet hours within one day (13:00–15:30), and an end equal to the start is never quiet")
    func quietHoursSameDay() {
        let daytime = policy("news", tenant: exampleTenant(quietHours: quiet("13:00", "15:30")))
        func decide(_ time: String) -> PolicyDecision {
            daytime.decide(user: "u", timeZone: nil, state: PolicyState(), now: utc(time))
        }
        #expect(decide("2026-03-10T12:59:00Z") == .send)
        #expect(decide("2026-03-10T13:00:00Z") == .deferUntil(utc("2026-03-10T15:30:00Z")))
        #expect(decide("2026-03-10T15:29:59Z") == .deferUntil(utc("2026-03-10T15:30:00Z")))
        #expect(decide("2026-03-10T15:30:00Z") == .send)
        #expect(decide("2026-03-10T23:00:00Z") == .send)
        let empty = policy("news", tenant: exampleTenant(quietHours: quiet("13:00", "13:00")))
        #expect(empty.decide(user: "u", timeZone: nil, state: PolicyState(), now: utc("2026-03-10T13:00:00Z")) == .send)
        let none = policy("news", tenant: exampleTenant(quietHours: nil))
        #expect(none.decide(user: "u", timeZone: nil, state: PolicyState(), now: utc("2026-03-10T23:00:00Z")) == .send)
    }

    @Test("the type's action: pass sends, drop skips with quiet_hours, anything else takes the default (defer)")
    func actions() {
        let night = utc("2026-03-10T23:00:00Z")
        let state = PolicyState()
        #expect(policy("message").decide(user: "u", timeZone: nil, state: state, now: night) == .send)
        #expect(policy("promo").decide(user: "u", timeZone: nil, state: state, now: night) == .skip(.quietHours))
        #expect(
            policy("news").decide(user: "u", timeZone: nil, state: state, now: night)
                == .deferUntil(utc("2026-03-11T07:00:00Z")))
        var dropping = exampleTenant()
        dropping.quietHours?.defaultAction = .drop
        #expect(
            policy("news", tenant: dropping).decide(user: "u", timeZone: nil, state: state, now: night)
                == .skip(.quietHours))
        // Outside quiet hours a dropping type is sent.
        #expect(policy("promo").decide(user: "u", timeZone: nil, state: state, now: noon) == .send)
    }

    @Test("time-sensitive and critical notifications pass quiet hours: the send's level, else the type's")
    func interruptionLevels() {
        let night = utc("2026-03-10T23:00:00Z")
        let state = PolicyState()
        #expect(policy("reminder").decide(user: "u", timeZone: nil, state: state, now: night) == .send)
        #expect(
            policy("news", interruptionLevel: .critical).decide(user: "u", timeZone: nil, state: state, now: night)
                == .send)
        #expect(
            policy("promo", interruptionLevel: .timeSensitive).decide(
                user: "u", timeZone: nil, state: state, now: night)
                == .send)
        // The send's own passive level overrides the type's time-sensitive one.
        #expect(
            policy("reminder", interruptionLevel: .passive).decide(user: "u", timeZone: nil, state: state, now: night)
                == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(
            policy("news", interruptionLevel: .active).decide(user: "u", timeZone: nil, state: state, now: night)
                == .deferUntil(utc("2026-03-11T07:00:00Z")))
        // Passing quiet hours does not pass the other rules.
        let muted = PolicyState(mutes: ["u": [MuteRecord(userID: "u", threadID: "t1")]])
        #expect(policy("reminder").decide(user: "u", timeZone: nil, state: muted, now: night) == .skip(.muted))
    }

    @Test("the device's time zone, else the tenant's, else UTC; unknown names fall back the same way")
    func timeZones() {
        // 2026-03-10T23:00Z: 19:00 in New York (EDT since March 8), 00:00 in Paris, 23:00 in UTC.
        let now = utc("2026-03-10T23:00:00Z")
        let paris = exampleTenant(quietHours: quiet("22:00", "07:00", timeZone: "Europe/Paris"))
        let news = policy("news", tenant: paris)
        let state = PolicyState()
        #expect(news.decide(user: "u", timeZone: "America/New_York", state: state, now: now) == .send)
        #expect(
            news.decide(user: "u", timeZone: "Asia/Tokyo", state: state, now: utc("2026-03-10T14:00:00Z"))
                == .deferUntil(utc("2026-03-10T22:00:00Z")))
        let parisMorning = PolicyDecision.deferUntil(utc("2026-03-11T06:00:00Z"))
        #expect(news.decide(user: "u", timeZone: nil, state: state, now: now) == parisMorning)
        #expect(news.decide(user: "u", timeZone: "", state: state, now: now) == parisMorning)
        #expect(news.decide(user: "u", timeZone: "Mars/Olympus_Mons", state: state, now: now) == parisMorning)
        // Neither the device's nor the tenant's zone is known: UTC.
        let nowhere = policy(
            "news", tenant: exampleTenant(quietHours: quiet("22:00", "07:00", timeZone: "Nowhere/Else")))
        #expect(
            nowhere.decide(user: "u", timeZone: "Not/A_Zone", state: state, now: now)
                == .deferUntil(utc("2026-03-11T07:00:00Z")))
        #expect(nowhere.decide(user: "u", timeZone: "America/New_York", state: state, now: now) == .send)
    }

    @Test("DST in Europe/Zurich (last Sunday of March, 02:00 → 03:00): local wall-clock times, not a fixed offset")
    func daylightSavingSpring() {
        let state = PolicyState()
        // 22:00–07:00: at 23:00 CET on Saturday the 28th the next 07:00 is CEST (05:00Z), not 06:00Z.
        let night = policy("news")
        #expect(
            night.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-28T22:00:00Z"))
                == .deferUntil(utc("2026-03-29T05:00:00Z")))
        // 06:30 CEST (04:30Z) is still quiet, 07:00 CEST (05:00Z) is not.
        #expect(
            night.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-29T04:30:00Z"))
                == .deferUntil(utc("2026-03-29T05:00:00Z")))
        #expect(
            night.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-29T05:00:00Z")) == .send)
        // An end inside the skipped hour (02:30) ends at the first instant after the gap, 03:00 CEST = 01:00Z.
        let gap = policy("news", tenant: exampleTenant(quietHours: quiet("23:00", "02:30")))
        #expect(
            gap.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-28T23:30:00Z"))
                == .deferUntil(utc("2026-03-29T01:00:00Z")))
        #expect(
            gap.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-29T01:00:00Z")) == .send)
        // 03:00–04:00: 01:00Z on the 29th is 03:00 CEST (quiet); with the winter offset it would be 02:00.
        let early = policy("news", tenant: exampleTenant(quietHours: quiet("03:00", "04:00")))
        #expect(
            early.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-29T01:00:00Z"))
                == .deferUntil(utc("2026-03-29T02:00:00Z")))
        #expect(
            early.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-03-29T00:59:00Z")) == .send)
    }

    @Test("DST in Europe/Zurich (last Sunday of October, 03:00 → 02:00): the end after the repeated hour")
    func daylightSavingAutumn() {
        let state = PolicyState()
        // 22:00 CEST on Saturday the 24th (20:00Z): the next 07:00 is CET, 06:00Z.
        #expect(
            policy("news").decide(
                user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-10-24T20:00:00Z"))
                == .deferUntil(utc("2026-10-25T06:00:00Z")))
        // Quiet hours ending at 02:30, a time that happens twice: the first one (CEST, 00:30Z) ends them.
        let repeated = policy("news", tenant: exampleTenant(quietHours: quiet("23:00", "02:30")))
        #expect(
            repeated.decide(user: "u", timeZone: "Europe/Zurich", state: state, now: utc("2026-10-24T22:00:00Z"))
                == .deferUntil(utc("2026-10-25T00:30:00Z")))
    }

    @Test("decisions for a page of 10,000 devices are cheap (no queries, a calendar per device)")
    func manyDecisions() {
        let news = policy("news")
        let zones = ["Europe/Zurich", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "bad", ""]
        let state = PolicyState(sentCounts: ["u7": SentCount(lastHour: 0, lastDay: 3)])
        var tally: [PolicyDecision: Int] = [:]
        for index in 0..<10_000 {
            let decision = news.decide(
                user: "u\(index % 10)", timeZone: zones[index % zones.count], state: state, now: noon)
            tally[decision, default: 0] += 1
        }
        #expect(tally[.skip(.capped)] == 1_000)
        #expect(tally.values.reduce(0, +) == 10_000)
    }
}

extension RelayServerSuites {
    /// `RecipientPolicy.load` against an embedded PostgreSQL: serialized with the other relay suites.
    @Suite("Recipient policy: loading a page of users from the store")
    struct RecipientPolicyLoadTests {
        @Test("load reads preferences, mutes, presence and counts for a page; decide applies them per user")
        func loadAndDecide() async throws {
            let folder = "/tmp/relayserver-tests-\(UUID().uuidString.prefix(13))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let postgres = EmbeddedPostgres(dataFolder: folder + "/pg", logger: quietLogger)
            try await postgres.start()
            do {
                let endpoint = try #require(await postgres.endpoint)
                try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) { store in
                    try await store.migrate()
                    let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
                    _ = try await store.syncTenants(tenants)
                    try await Self.check(store: store, circl: try #require(tenants.first { $0.id == "circl" }))
                }
                try await postgres.stop()
            } catch {
                try? await postgres.stop()
                throw error
            }
        }

        private static func check(store: RelayStore, circl: TenantConfiguration) async throws {
            let now = utc("2026-03-10T12:00:00Z")
            try await store.setPreferences(tenant: "circl", user: "u1", ["announcement": false])
            try await store.setMute(tenant: "circl", user: "u2", threadID: nil, scope: "circle-1")
            try await store.setPresence(tenant: "circl", user: "u3", threadID: "circle-1-channel-2", until: now + 60)
            // announcement: at most 20 a day; u4 had 20 in the last hours.
            let sent = (0..<20).map { index in
                DeliveryRecord(
                    tenantID: "circl", jobID: "job-\(index)", userID: "u4", token: String(repeating: "ab", count: 32),
                    outcome: .delivered, sentAt: now - TimeInterval(600 * (index + 1)), notificationType: "announcement"
                )
            }
            try await store.recordDeliveries(sent)
            let policy = RecipientPolicy(
                tenant: circl,
                notification: PolicyNotification(
                    type: "announcement", typeConfiguration: try #require(circl.notificationTypes["announcement"]),
                    threadID: "circle-1-channel-2", scope: "circle-1"))
            let users = ["u1", "u2", "u3", "u4", "u5"]
            let counts = CapCountCache()
            let state = try await policy.load(users: users, store: store, counts: counts, now: now)
            #expect(state.sentCounts["u4"] == SentCount(lastHour: 5, lastDay: 20))
            let decisions = users.map { policy.decide(user: $0, timeZone: nil, state: state, now: now) }
            #expect(decisions == [.skip(.optedOut), .skip(.muted), .skip(.active), .skip(.capped), .send])
            // A page's counts are remembered (a read of a few users' are not); the next page of the same users
            // counts only u4, at its cap, again.
            #expect(counts.known(tenant: "circl", notificationType: "announcement", users: users) == nil)
            let page = users + (1...RelayStore.boundedCountUsers).map { "other\($0)" }
            let first = try await policy.load(users: page, store: store, counts: counts, now: now)
            #expect(first.sentCounts == state.sentCounts)
            let known = try #require(counts.known(tenant: "circl", notificationType: "announcement", users: users))
            #expect(known.rows == [0, 0, 0, 20, 0] && known.epoch.openJobs == 0)
            let again = try await policy.load(users: page, store: store, counts: counts, now: now)
            #expect(again.sentCounts == state.sentCounts)
            #expect(users.map { policy.decide(user: $0, timeZone: nil, state: again, now: now) } == decisions)
            // circl's quiet hours (23:00–07:00, announcement deferred) in Zurich at 23:30 local.
            let night = utc("2026-03-10T22:30:00Z")
            #expect(
                policy.decide(user: "u5", timeZone: "Europe/Zurich", state: state, now: night)
                    == .deferUntil(utc("2026-03-11T06:00:00Z")))
            #expect(
                try await policy.load(users: [], store: store, counts: CapCountCache(), now: now).preferences.isEmpty)
        }
    }
}

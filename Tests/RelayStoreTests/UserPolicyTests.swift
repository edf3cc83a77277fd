import Foundation
import RelayStore
import Testing

@Suite("Preferences, mutes and presence")
struct UserPolicyTests {
    @Test("preferences are stored per type in one statement, merged with earlier ones")
    func preferences() async throws {
        try await withTenantStore { store in
            #expect(try await store.preferences(tenant: "circl", user: "u1") == [:])
            try await store.setPreferences(tenant: "circl", user: "u1", ["announcement": false, "message": true])
            #expect(
                try await store.preferences(tenant: "circl", user: "u1") == ["announcement": false, "message": true])

            try await store.setPreferences(tenant: "circl", user: "u1", ["message": false, "event_reminder": true])
            #expect(
                try await store.preferences(tenant: "circl", user: "u1")
                    == ["announcement": false, "message": false, "event_reminder": true])
            try await store.setPreferences(tenant: "circl", user: "u1", [:])
            #expect(try await store.preferences(tenant: "circl", user: "u1").count == 3)
            // Rows written by one statement share its transaction id.
            #expect(
                try await column("SELECT count(DISTINCT xmin::text)::text FROM preferences", in: store) == ["2"])

            try await store.setPreferences(tenant: "circl", user: "u2", ["message": false])
            let both = try await store.preferences(tenant: "circl", users: ["u1", "u2", "u3"])
            #expect(both.keys.sorted() == ["u1", "u2"])
            #expect(both["u2"] == ["message": false])
            #expect(try await store.preferences(tenant: "circl", users: []) == [:])
        }
    }

    @Test("preferences for an unknown tenant, an empty user or an empty type are refused")
    func preferenceValidation() async throws {
        try await withTenantStore { store in
            do {
                try await store.setPreferences(tenant: "nobody", user: "u1", ["message": false])
                Issue.record("an unknown tenant was accepted")
            } catch let error as RelayStoreError where error.code == .unknownTenant {
                #expect(error.detail == "nobody")
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.setPreferences(tenant: "circl", user: "", ["message": false])
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.setPreferences(tenant: "circl", user: "u1", ["": false, "message": true])
            }
            #expect(try await store.preferences(tenant: "circl", user: "u1") == [:])
        }
    }

    @Test("mutes of threads and scopes, until a time or forever; only those in force are listed")
    func mutes() async throws {
        try await withTenantStore { store in
            let forever = try await store.setMute(tenant: "circl", user: "u1", threadID: "circle-1", scope: nil)
            #expect(forever == MuteRecord(userID: "u1", threadID: "circle-1"))
            let scoped = try await store.setMute(
                tenant: "circl", user: "u1", threadID: "", scope: "announcements", until: instant(3_600))
            #expect(scoped == MuteRecord(userID: "u1", scope: "announcements", until: instant(3_600)))
            try await store.setMute(tenant: "circl", user: "u1", threadID: "circle-2", scope: nil, until: instant(-60))

            #expect(
                try await store.mutes(tenant: "circl", user: "u1", now: instant(0)) == [
                    MuteRecord(userID: "u1", threadID: "circle-1"),
                    MuteRecord(userID: "u1", scope: "announcements", until: instant(3_600)),
                ])
            #expect(
                try await store.mutes(tenant: "circl", user: "u1", now: instant(3_600)) == [
                    MuteRecord(userID: "u1", threadID: "circle-1")
                ])
            #expect(try await store.mutes(tenant: "circl", user: "u1", now: instant(-120)).count == 3)

            // Setting it again replaces its end: the expired thread mute comes back for good.
            try await store.setMute(tenant: "circl", user: "u1", threadID: "circle-2", scope: nil, until: nil)
            #expect(try await store.mutes(tenant: "circl", user: "u1", now: instant(0)).count == 3)

            #expect(try await store.clearMute(tenant: "circl", user: "u1", threadID: "circle-1", scope: nil) == 1)
            #expect(try await store.clearMute(tenant: "circl", user: "u1", threadID: "circle-1", scope: nil) == 0)
            #expect(try await store.clearMute(tenant: "circl", user: "u1", threadID: nil, scope: "circle-2") == 0)
            #expect(
                try await store.mutes(tenant: "circl", user: "u1", now: instant(0)).map { $0.threadID ?? $0.scope }
                    == ["circle-2", "announcements"])

            try await store.setMute(tenant: "circl", user: "u2", threadID: nil, scope: "announcements")
            let many = try await store.mutes(tenant: "circl", users: ["u1", "u2", "u3"], now: instant(0))
            #expect(many.map(\.userID) == ["u1", "u1", "u2"])
            #expect(try await store.mutes(tenant: "circl", users: [], now: instant(0)).isEmpty)
        }
    }

    @Test("a mute names exactly one of a thread and a scope")
    func muteValidation() async throws {
        try await withTenantStore { store in
            for (thread, scope) in [("t", "s"), (nil, nil), ("", ""), ("", nil)] as [(String?, String?)] {
                do {
                    try await store.setMute(tenant: "circl", user: "u1", threadID: thread, scope: scope)
                    Issue.record("a mute with thread \(String(describing: thread)), scope \(String(describing: scope))")
                } catch let error as RelayStoreError where error.code == .invalidArgument {
                    #expect(error.detail.contains("thread"))
                }
                await #expect(throws: RelayStoreError.self) {
                    try await store.clearMute(tenant: "circl", user: "u1", threadID: thread, scope: scope)
                }
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.setMute(tenant: "circl", user: "", threadID: "t", scope: nil)
            }
            do {
                try await store.setMute(tenant: "nobody", user: "u1", threadID: "t", scope: nil)
                Issue.record("an unknown tenant was accepted")
            } catch let error as RelayStoreError where error.code == .unknownTenant {
                #expect(error.detail == "nobody")
            }
            #expect(try await store.mutes(tenant: "circl", user: "u1").isEmpty)
        }
    }

    @Test("presence in a thread lasts until its end; setting it again moves the end; nil clears it")
    func presence() async throws {
        try await withTenantStore { store in
            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-1", until: instant(60))
            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-2", until: instant(30))
            #expect(
                try await store.activeThreads(tenant: "circl", user: "u1", now: instant(0))
                    == ["circle-1": instant(60), "circle-2": instant(30)])
            #expect(
                try await store.activeThreads(tenant: "circl", user: "u1", now: instant(30)) == [
                    "circle-1": instant(60)
                ])

            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-2", until: instant(90))
            #expect(
                try await store.activeThreads(tenant: "circl", user: "u1", now: instant(60)) == [
                    "circle-2": instant(90)
                ])

            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-2", until: nil)
            try await store.setPresence(tenant: "circl", user: "u1", threadID: "never-there", until: nil)
            #expect(
                try await store.activeThreads(tenant: "circl", user: "u1", now: instant(0)) == ["circle-1": instant(60)]
            )

            try await store.setPresence(tenant: "circl", user: "u2", threadID: "circle-1", until: instant(10))
            let many = try await store.activeThreads(tenant: "circl", users: ["u1", "u2", "u3"], now: instant(0))
            #expect(many == ["u1": ["circle-1": instant(60)], "u2": ["circle-1": instant(10)]])

            await #expect(throws: RelayStoreError.self) {
                try await store.setPresence(tenant: "circl", user: "u1", threadID: "", until: instant(10))
            }
            do {
                try await store.setPresence(tenant: "nobody", user: "u1", threadID: "t", until: instant(10))
                Issue.record("an unknown tenant was accepted")
            } catch let error as RelayStoreError where error.code == .unknownTenant {
                #expect(error.detail == "nobody")
            }
        }
    }

    @Test("a tenant can neither read nor change another tenant's preferences, mutes or presence")
    func tenantIsolation() async throws {
        try await withTenantStore { store in
            try await store.setPreferences(tenant: "circl", user: "u1", ["message": false])
            try await store.setMute(tenant: "circl", user: "u1", threadID: "circle-1", scope: nil)
            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-1", until: instant(60))

            #expect(try await store.preferences(tenant: "anky", user: "u1") == [:])
            #expect(try await store.preferences(tenant: "anky", users: ["u1"]) == [:])
            #expect(try await store.mutes(tenant: "anky", user: "u1", now: instant(0)).isEmpty)
            #expect(try await store.mutes(tenant: "anky", users: ["u1"], now: instant(0)).isEmpty)
            #expect(try await store.activeThreads(tenant: "anky", user: "u1", now: instant(0)).isEmpty)
            #expect(try await store.activeThreads(tenant: "anky", users: ["u1"], now: instant(0)).isEmpty)

            // Writing the same keys in another tenant makes that tenant's own rows; circl's stay as they were.
            try await store.setPreferences(tenant: "anky", user: "u1", ["message": true])
            #expect(try await store.clearMute(tenant: "anky", user: "u1", threadID: "circle-1", scope: nil) == 0)
            try await store.setMute(tenant: "anky", user: "u1", threadID: "circle-1", scope: nil, until: instant(1))
            try await store.setPresence(tenant: "anky", user: "u1", threadID: "circle-1", until: nil)

            #expect(try await store.preferences(tenant: "circl", user: "u1") == ["message": false])
            #expect(try await store.preferences(tenant: "anky", user: "u1") == ["message": true])
            #expect(
                try await store.mutes(tenant: "circl", user: "u1", now: instant(0)) == [
                    MuteRecord(userID: "u1", threadID: "circle-1")
                ])
            #expect(
                try await store.activeThreads(tenant: "circl", user: "u1", now: instant(0)) == ["circle-1": instant(60)]
            )
        }
    }

    @Test("a page's policy lookups in one statement: each only when asked for, only the users asked about, in force")
    func userPolicyInOneStatement() async throws {
        try await withTenantStore { store in
            try await store.setPreferences(tenant: "circl", user: "u1", ["message": false])
            try await store.setPreferences(tenant: "circl", user: "u9", ["message": false])
            try await store.setMute(tenant: "circl", user: "u1", threadID: nil, scope: "circle-1")
            try await store.setMute(tenant: "circl", user: "u2", threadID: "circle-2", scope: nil, until: instant(-60))
            try await store.setMute(tenant: "circl", user: "u2", threadID: "circle-3", scope: nil, until: instant(60))
            try await store.setPresence(tenant: "circl", user: "u2", threadID: "circle-1", until: instant(60))
            try await store.setPresence(tenant: "circl", user: "u1", threadID: "circle-4", until: instant(-1))
            let users = ["u1", "u2", "u3"]

            let all = try await store.userPolicy(
                tenant: "circl", users: users, reading: .init(preferences: true, mutes: true, presence: true),
                now: instant(0))
            #expect(all.preferences == ["u1": ["message": false]])
            #expect(
                Set(all.mutes) == [
                    MuteRecord(userID: "u1", scope: "circle-1"),
                    MuteRecord(userID: "u2", threadID: "circle-3", until: instant(60)),
                ])
            #expect(all.activeThreads == ["u2": ["circle-1": instant(60)]])
            #expect(all.sentCounts.isEmpty)

            let mutesOnly = try await store.userPolicy(
                tenant: "circl", users: users, reading: .init(preferences: false, mutes: true, presence: false),
                now: instant(0))
            #expect(mutesOnly.preferences.isEmpty && mutesOnly.activeThreads.isEmpty && mutesOnly.mutes.count == 2)
            #expect(
                try await store.userPolicy(
                    tenant: "circl", users: users, reading: .init(preferences: false, mutes: false, presence: false),
                    now: instant(0)) == UserPolicyRows())
            #expect(
                try await store.userPolicy(
                    tenant: "anky", users: users, reading: .init(preferences: true, mutes: true, presence: true),
                    now: instant(0)) == UserPolicyRows())
        }
    }
}

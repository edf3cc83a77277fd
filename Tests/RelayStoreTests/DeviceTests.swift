import Foundation
import NIOCore
import RelayStore
import Testing

/// Runs `body` with a migrated store holding the tenants of `Tenants/`, its calls bounded by `callDeadline` (the
/// store's default when `nil`).
func withTenantStore(
    callDeadline: TimeAmount? = nil, _ body: @escaping @Sendable (RelayStore) async throws -> Void
) async throws {
    let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
    try await withMigratedStore(callDeadline: callDeadline) { store in
        try await store.syncTenants(tenants)
        try await body(store)
    }
}

/// A device token of 64 hex digits made from `seed`.
func deviceToken(_ seed: Int) -> String {
    String(repeating: String(format: "%08x", seed), count: 8)
}

/// A fixed instant, `seconds` after 2026-03-10 12:00:00 UTC (whole seconds, so it survives PostgreSQL's microseconds).
func instant(_ seconds: Int = 0) -> Date {
    Date(timeIntervalSince1970: 1_773_144_000 + TimeInterval(seconds))
}

@Suite("Device registry")
struct DeviceTests {
    @Test(
        "a value PostgreSQL refuses for its data (a NUL in text) is a rejected statement, not an unavailable database")
    func refusedDataIsNotUnavailability() async throws {
        try await withTenantStore { store in
            do {
                _ = try await store.registerDevice(
                    tenant: "anky", registration: DeviceRegistration(userID: "a\u{0}b", token: deviceToken(1)),
                    at: instant(0))
                Issue.record("a user id with a NUL was stored")
            } catch let error as RelayStoreError {
                guard error.code == .statementRejected else {
                    Issue.record("expected statementRejected, got \(error)")
                    return
                }
                #expect(error.detail.contains("22021"))
            } catch {
                Issue.record("expected a RelayStoreError, got \(error)")
            }
        }
    }

    @Test("anky (one_per_user_platform): re-registering on launch replaces the token, logout removes it")
    func ankyOnePerUserPlatform() async throws {
        try await withTenantStore { store in
            let first = try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u1", token: deviceToken(1)), at: instant(0))
            #expect(first.status == .created)

            let relaunch = try await store.registerDevice(
                tenant: "anky",
                registration: DeviceRegistration(userID: "u1", token: deviceToken(2), appVersion: "1.1"),
                at: instant(60))
            #expect(relaunch.status == .updated)
            #expect(relaunch.replacedToken == deviceToken(1))
            let devices = try await store.devices(tenant: "anky", user: "u1")
            #expect(devices.map(\.token) == [deviceToken(2)])
            #expect(devices.first?.appVersion == "1.1")
            #expect(devices.first?.registeredAt == instant(60))

            // Another user on the same platform has their own row.
            try await store.registerDevice(
                tenant: "anky", registration: DeviceRegistration(userID: "u2", token: deviceToken(3)), at: instant(0))

            #expect(try await store.unregisterDevices(tenant: "anky", user: "u1", platform: "ios") == 1)
            #expect(try await store.devices(tenant: "anky", user: "u1").isEmpty)
            #expect(try await store.devices(tenant: "anky", user: "u2").count == 1)
        }
    }

    @Test("familyportal (per_user_token_platform_environment): two environments are two rows, re-register upserts")
    func familyportalPerEnvironment() async throws {
        try await withTenantStore { store in
            let token = deviceToken(10)
            for environment in [TenantConfiguration.Environment.development, .production] {
                let result = try await store.registerDevice(
                    tenant: "familyportal",
                    registration: DeviceRegistration(
                        userID: "mom", token: token, environment: environment, topics: ["chat"]),
                    at: instant(0))
                #expect(result.status == .created)
            }
            let again = try await store.registerDevice(
                tenant: "familyportal",
                registration: DeviceRegistration(
                    userID: "mom", token: token.uppercased(), environment: .production, locale: "fr_FR",
                    timeZone: "Europe/Paris", topics: ["photos", "chat", "chat"]),
                at: instant(30))
            #expect(again.status == .updated)
            #expect(again.device.topics == ["chat", "photos"])

            let devices = try await store.devices(tenant: "familyportal", user: "mom")
            #expect(devices.count == 2)
            #expect(Set(devices.map(\.environment)) == [.development, .production])
            let production = try #require(devices.first { $0.environment == .production })
            #expect(production.locale == "fr_FR")
            #expect(production.timeZone == "Europe/Paris")
            #expect(production.token == token)

            // The same token for another user is another row under this policy.
            try await store.registerDevice(
                tenant: "familyportal", registration: DeviceRegistration(userID: "dad", token: token), at: instant(40))
            #expect(try await store.devices(tenant: "familyportal", token: token).count == 3)

            #expect(try await store.unregisterDevice(tenant: "familyportal", token: token) == 3)
            #expect(try await store.devices(tenant: "familyportal", user: "mom").isEmpty)
        }
    }

    @Test("circl (token_moves_to_last_user): a token registered by A then by B belongs to B only")
    func circlTokenMoves() async throws {
        try await withTenantStore { store in
            let token = deviceToken(20)
            let byA = try await store.registerDevice(
                tenant: "circl",
                registration: DeviceRegistration(userID: "A", token: token, deviceID: "phone-1"), at: instant(0))
            #expect(byA.status == .created)
            let byB = try await store.registerDevice(
                tenant: "circl",
                registration: DeviceRegistration(userID: "B", token: token, deviceID: "phone-1"), at: instant(10))
            #expect(byB.status == .updated)
            #expect(byB.previousUserID == "A")
            #expect(try await store.devices(tenant: "circl", user: "A").isEmpty)
            #expect(try await store.devices(tenant: "circl", user: "B").map(\.token) == [token])
            #expect(try await store.devices(tenant: "circl", token: token).count == 1)
        }
    }

    @Test("concurrent registrations of one circl token by 20 users leave exactly one row")
    func concurrentRegistrations() async throws {
        // The twenty transactions wait on one row in turn. In CI, with dozens of test clusters starting at once, the
        // last of them once waited longer than the store's default 15 s: the deadline is not what this test is about.
        try await withTenantStore(callDeadline: .seconds(60)) { store in
            let token = deviceToken(21)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for user in 0..<20 {
                    group.addTask {
                        try await store.registerDevice(
                            tenant: "circl", registration: DeviceRegistration(userID: "user\(user)", token: token),
                            at: instant(user))
                    }
                }
                try await group.waitForAll()
            }
            let devices = try await store.devices(tenant: "circl", token: token)
            #expect(devices.count == 1)
            // Registrations carry their own times, so the latest one wins whatever order they arrived in.
            #expect(devices.first?.userID == "user19")
        }
    }

    @Test("APNs invalidation: an older registration does not bring the token back, a newer one does")
    func invalidationTimestamp() async throws {
        try await withTenantStore { store in
            let token = deviceToken(30)
            let registration = DeviceRegistration(userID: "A", token: token)
            try await store.registerDevice(tenant: "circl", registration: registration, at: instant(0))

            // A verdict older than the registration concerns an earlier life of the token: ignored.
            #expect(try await store.deactivateDevice(tenant: "circl", token: token, appleTimestamp: instant(-5)) == 0)
            #expect(try await store.devices(tenant: "circl", token: token).first?.active == true)

            #expect(try await store.deactivateDevice(tenant: "circl", token: token, appleTimestamp: instant(100)) == 1)
            var device = try #require(try await store.devices(tenant: "circl", token: token).first)
            #expect(!device.active)
            #expect(device.invalidatedAt == instant(100))

            let older = try await store.registerDevice(tenant: "circl", registration: registration, at: instant(50))
            #expect(older.status == .notReactivatedAfterInvalidation)
            #expect(!older.applied)
            device = try #require(try await store.devices(tenant: "circl", token: token).first)
            #expect(!device.active)
            #expect(device.registeredAt == instant(0))

            let newer = try await store.registerDevice(tenant: "circl", registration: registration, at: instant(150))
            #expect(newer.status == .reactivated)
            device = try #require(try await store.devices(tenant: "circl", token: token).first)
            #expect(device.active)
            #expect(device.invalidatedAt == nil)
            #expect(device.registeredAt == instant(150))

            // A registration that arrives late (older than the stored one) changes nothing.
            let late = try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "B", token: token), at: instant(120))
            #expect(late.status == .ignoredOutdated)
            #expect(try await store.devices(tenant: "circl", token: token).first?.userID == "A")
        }
    }

    @Test("bad tokens, unknown topics and unknown tenants are refused")
    func validation() async throws {
        try await withTenantStore { store in
            await #expect(throws: RelayStoreError.self) {
                try await store.registerDevice(
                    tenant: "anky", registration: DeviceRegistration(userID: "u", token: "not-hex"), at: instant())
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.registerDevice(
                    tenant: "familyportal",
                    registration: DeviceRegistration(userID: "u", token: deviceToken(1), topics: ["bogus"]),
                    at: instant())
            }
            do {
                try await store.registerDevice(
                    tenant: "nobody", registration: DeviceRegistration(userID: "u", token: deviceToken(1)),
                    at: instant())
                Issue.record("an unknown tenant was accepted")
            } catch let error as RelayStoreError where error.code == .unknownTenant {
                #expect(error.detail == "nobody")
            }
            #expect(try await store.devices(tenant: "familyportal", user: "u").isEmpty)
        }
    }

    @Test("a tenant can neither read nor change another tenant's devices")
    func tenantIsolation() async throws {
        try await withTenantStore { store in
            let token = deviceToken(40)
            try await store.registerDevice(
                tenant: "familyportal", registration: DeviceRegistration(userID: "u1", token: token), at: instant())

            #expect(try await store.devices(tenant: "anky", user: "u1").isEmpty)
            #expect(try await store.devices(tenant: "anky", token: token).isEmpty)
            #expect(try await store.deactivateDevice(tenant: "anky", token: token, appleTimestamp: instant(10)) == 0)
            #expect(try await store.unregisterDevice(tenant: "anky", token: token) == 0)
            #expect(try await store.unregisterDevices(tenant: "anky", user: "u1", platform: "ios") == 0)

            // The same user id and token registered in circl make a separate row; familyportal's is untouched.
            try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "u1", token: token), at: instant(20))
            #expect(try await store.unregisterDevice(tenant: "circl", token: token) == 1)
            let kept = try await store.devices(tenant: "familyportal", user: "u1")
            #expect(kept.count == 1)
            #expect(kept.first?.active == true)
            #expect(kept.first?.tenantID == "familyportal")
        }
    }
}

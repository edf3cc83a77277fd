import Foundation
import LoadTest
import RelayStore
import Testing

@Suite("Synthetic devices for the load test")
struct SyntheticDeviceTests {
    @Test("bulk devices have the slot a registration would give them, under every token policy")
    func bulkDevicesShareTheRegistrationSlot() async throws {
        try await withTenantStore { store in
            // circl: token_moves_to_last_user; familyportal: one per user and platform; anky: per user, token,
            // platform and environment.
            for (index, tenant) in ["circl", "familyportal", "anky"].enumerated() {
                let prefix = String(format: "%08x", index + 1)
                let written = try await store.insertSyntheticDevices(
                    tenant: tenant, policy: try #require(try await policy(of: tenant, store: store)), range: 0..<50,
                    userPrefix: "lt-u", tokenPrefix: prefix, topics: ["loadtest"]
                )
                #expect(written == 50)
                #expect(try await store.activeDevices(tenant: tenant, topic: "loadtest", limit: 100).count == 50)
                let token = RelayStore.syntheticToken(prefix: prefix, index: 7)
                #expect(token.count == 64)
                let again = try await store.registerDevice(
                    tenant: tenant, registration: DeviceRegistration(userID: "lt-u7", token: token), at: Date()
                )
                #expect(again.status == .updated, "\(tenant): \(again)")
                let devices = try await store.activeDevices(tenant: tenant, users: ["lt-u7"])
                #expect(devices.map(\.token) == [token])
            }
            await #expect(throws: RelayStoreError.self) {
                try await store.insertSyntheticDevices(
                    tenant: "circl", policy: .tokenMovesToLastUser, range: 0..<1, userPrefix: "x\"",
                    tokenPrefix: "00000009",
                    topics: []
                )
            }
        }
    }

    @Test("bulk FCM devices have Google's token length, the fcm provider and the slot an FCM registration gives them")
    func bulkFCMDevices() async throws {
        try await withTenantStore { store in
            // dispo: one per user and platform, a Firebase project.
            let written = try await store.insertSyntheticDevices(
                tenant: "dispo", policy: .onePerUserPlatform, range: 0..<30, userPrefix: "lt-u",
                tokenPrefix: "0000000b",
                topics: ["loadtest-fcm"], provider: .fcm)
            #expect(written == 30)
            let devices = try await store.activeDevices(tenant: "dispo", topic: "loadtest-fcm", limit: 100)
            #expect(devices.count == 30)
            #expect(devices.allSatisfy { $0.destination.provider.rawValue == "fcm" })
            #expect(devices.allSatisfy { $0.token.utf8.count == RelayStore.syntheticFCMTokenLength })
            let token = try #require(devices.first { $0.userID == "lt-u7" }?.token)
            #expect(token.hasPrefix("lt0000000b-7:APA91b"))
            // The same user's APNs device is another row (another platform).
            _ = try await store.insertSyntheticDevices(
                tenant: "dispo", policy: .onePerUserPlatform, range: 0..<30, userPrefix: "lt-u",
                tokenPrefix: "0000000b",
                topics: ["loadtest-fcm"])
            #expect(try await store.activeDevices(tenant: "dispo", topic: "loadtest-fcm", limit: 100).count == 60)
            let again = try await store.registerDevice(
                tenant: "dispo",
                registration: DeviceRegistration(userID: "lt-u7", token: token, provider: .fcm, platform: "android"),
                at: Date())
            #expect(again.status == .updated, "\(again)")
            let records = try await store.activeDevices(tenant: "dispo", users: ["lt-u7"])
            #expect(Set(records.map(\.platform)) == ["android", "ios"])
        }
    }

    @Test("settling after a bulk load vacuums and analyzes the devices and the token-user pairs their trigger wrote")
    func settleVacuumsDevicesAndTokenUsers() async throws {
        try await withTenantStore { store in
            _ = try await store.insertSyntheticDevices(
                tenant: "circl", policy: .tokenMovesToLastUser, range: 0..<200, userPrefix: "lt-u",
                tokenPrefix: "0000000a", topics: ["loadtest"]
            )
            let settled = """
                SELECT relname FROM pg_stat_user_tables
                WHERE relname IN ('devices', 'token_users') AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL
                ORDER BY relname
                """
            #expect(try await column(settled, in: store).isEmpty)
            try await store.settleDevices()
            #expect(try await column(settled, in: store) == ["devices", "token_users"])
        }
    }

    private func policy(of tenant: String, store: RelayStore) async throws -> TenantConfiguration.TokenPolicy? {
        try await store.listTenants().first { $0.id == tenant }?.configuration.tokenPolicy
    }
}

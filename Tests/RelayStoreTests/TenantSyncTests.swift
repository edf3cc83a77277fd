import EmbeddedPostgres
import Foundation
import NIOCore
import RelayStore
import Testing

/// Runs `body` with a migrated store on a fresh embedded server, its calls bounded by `callDeadline` (the
/// store's default when `nil`).
func withMigratedStore(
    callDeadline: TimeAmount? = nil, _ body: @escaping @Sendable (RelayStore) async throws -> Void
) async throws {
    try await withEmbeddedPostgres { _, endpoint async throws in
        var configuration = RelayStore.Configuration(embedded: endpoint)
        if let callDeadline { configuration.callDeadline = callDeadline }
        try await RelayStore.withStore(configuration: configuration, logger: quietLogger) {
            store async throws in
            try await store.migrate()
            try await body(store)
        }
    }
}

@Suite("Tenant sync")
struct TenantSyncTests {
    @Test("sync creates 5, then reports 5 unchanged, then 1 updated after an edit")
    func idempotentSync() async throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        try await withMigratedStore { store in
            let first = try await store.syncTenants(tenants)
            #expect(first == TenantSyncReport(created: ["anky", "argus", "circl", "dispo", "familyportal"]))

            let second = try await store.syncTenants(tenants)
            #expect(second == TenantSyncReport(unchanged: ["anky", "argus", "circl", "dispo", "familyportal"]))

            var edited = tenants
            let index = try #require(edited.firstIndex { $0.id == "argus" })
            edited[index].notificationTypes["doorbell"]?.expiration = 60
            let third = try await store.syncTenants(edited)
            #expect(
                third == TenantSyncReport(updated: ["argus"], unchanged: ["anky", "circl", "dispo", "familyportal"]))
            #expect(try await store.tenant(id: "argus")?.configuration == edited[index])
            #expect(try await store.syncTenants(edited).unchanged.count == 5)

            let listed = try await store.listTenants()
            #expect(listed.map(\.id) == ["anky", "argus", "circl", "dispo", "familyportal"])
            let allEnabled = listed.allSatisfy { $0.enabled }
            #expect(allEnabled)
            #expect(listed.first { $0.id == "familyportal" }?.displayName == "Family Portal")
        }
    }

    @Test("tenants missing from the folder are reported and kept")
    func notInFolder() async throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        try await withMigratedStore { store in
            try await store.syncTenants(tenants)
            let report = try await store.syncTenants(tenants.filter { $0.id != "anky" })
            #expect(report.notInFolder == ["anky"])
            #expect(report.unchanged == ["argus", "circl", "dispo", "familyportal"])
            #expect(try await store.tenant(id: "anky") != nil)
        }
    }

    @Test("a folder with one bad file is never synced: the database stays empty")
    func badFolderAppliesNothing() async throws {
        let folder = try writeTenantFolder([
            "good.yaml": minimalTenant,
            "bad.yaml": minimalTenant.replacingOccurrences(of: "\"07:00\"", with: "\"25:00\""),
        ])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await withMigratedStore { store in
            var synced = false
            do {
                let configurations = try TenantConfiguration.loadFolder(folder)
                try await store.syncTenants(configurations)
                synced = true
            } catch let error as TenantFileError {
                #expect(error.file == folder + "/bad.yaml")
                #expect(error.line == 11)
                #expect(error.key == "quiet_hours.end")
            }
            #expect(!synced)
            #expect(try await store.listTenants().isEmpty)
        }
    }

    @Test("disable and enable; sync leaves the flag alone")
    func disableEnable() async throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        try await withMigratedStore { store in
            try await store.syncTenants(tenants)
            try await store.setTenantEnabled(id: "circl", enabled: false)
            #expect(try await store.tenant(id: "circl")?.enabled == false)
            #expect(try await store.syncTenants(tenants).unchanged.count == 5)
            #expect(try await store.tenant(id: "circl")?.enabled == false)
            try await store.setTenantEnabled(id: "circl", enabled: true)
            #expect(try await store.tenant(id: "circl")?.enabled == true)
        }
    }

    @Test("unknown ids and duplicate configurations are typed errors")
    func unknownIDs() async throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        try await withMigratedStore { store in
            let nobody = try await store.tenant(id: "nobody")
            #expect(nobody == nil)
            await #expect {
                try await store.setTenantEnabled(id: "nobody", enabled: false)
            } throws: { error in
                guard let error = error as? RelayStoreError, error.code == .unknownTenant, error.detail == "nobody"
                else {
                    return false
                }
                return true
            }
            await #expect {
                try await store.syncTenants(tenants + [tenants[0]])
            } throws: { error in
                guard let error = error as? RelayStoreError, error.code == .duplicateTenant, error.detail == "anky"
                else {
                    return false
                }
                return true
            }
            let stored = try await store.listTenants()
            #expect(stored.isEmpty)
        }
    }
}

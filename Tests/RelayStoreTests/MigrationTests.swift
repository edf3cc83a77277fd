import EmbeddedPostgres
import Foundation
import PostgresNIO
import RelayStore
import Testing

@Suite("RelayStore migrations")
struct MigrationTests {
    @Test("migrate applies every migration, then nothing when run again")
    func idempotent() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                #expect(try await store.appliedMigrations() == [])
                let versions = Migration.all.map(\.version)
                #expect(try await store.migrate() == versions)
                #expect(try await store.migrate() == [])
                #expect(try await store.appliedMigrations() == versions)
            }
            // A new store (a new process, in effect) finds the schema up to date too.
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                #expect(try await store.migrate() == [])
            }
        }
    }

    @Test("two stores migrating at once both succeed and each migration is applied exactly once")
    func concurrent() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            let configuration = RelayStore.Configuration(embedded: endpoint)
            try await RelayStore.withStore(configuration: configuration, logger: quietLogger) { first async throws in
                try await RelayStore.withStore(configuration: configuration, logger: quietLogger) {
                    second async throws in
                    async let a = first.migrate()
                    async let b = second.migrate()
                    let results = try await [a, b]
                    #expect(results.flatMap { $0 }.sorted() == Migration.all.map(\.version))
                    #expect(results.contains([]))
                    #expect(
                        try await column("SELECT count(*)::text FROM schema_migrations", in: first)
                            == ["\(Migration.all.count)"]
                    )
                }
            }
        }
    }

    @Test("after migrate, tenants has its columns")
    func tenantsTable() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                try await store.migrate()
                var columns: [String: (type: String, nullable: String, defaultValue: String?)] = [:]
                let rows = try await store.client.query(
                    """
                    SELECT column_name::text, data_type::text, is_nullable::text, column_default::text
                    FROM information_schema.columns
                    WHERE table_schema = 'public' AND table_name = 'tenants'
                    """
                )
                for try await (name, type, nullable, defaultValue) in rows.decode(
                    (String, String, String, String?).self)
                {
                    columns[name] = (type, nullable, defaultValue)
                }
                #expect(
                    Set(columns.keys) == ["id", "display_name", "enabled", "config", "created_at", "updated_at"]
                )
                #expect(columns["id"]?.type == "text")
                #expect(columns["id"]?.nullable == "NO")
                #expect(columns["display_name"]?.type == "text")
                #expect(columns["enabled"]?.type == "boolean")
                #expect(columns["enabled"]?.nullable == "NO")
                #expect(columns["enabled"]?.defaultValue == "true")
                #expect(columns["config"]?.type == "jsonb")
                #expect(columns["config"]?.nullable == "NO")
                for stamp in ["created_at", "updated_at"] {
                    #expect(columns[stamp]?.type == "timestamp with time zone")
                    #expect(columns[stamp]?.nullable == "NO")
                    #expect(columns[stamp]?.defaultValue == "now()")
                }
                #expect(
                    try await column(
                        "SELECT kcu.column_name::text FROM information_schema.table_constraints tc "
                            + "JOIN information_schema.key_column_usage kcu USING (constraint_schema, constraint_name) "
                            + "WHERE tc.table_name = 'tenants' AND tc.constraint_type = 'PRIMARY KEY'",
                        in: store
                    ) == ["id"]
                )
            }
        }
    }

    @Test("a failing migration is a typed error and leaves nothing behind")
    func failingMigration() async throws {
        let broken = [
            Migration(version: 1, name: "fine", statements: ["CREATE TABLE fine (id int)"]),
            Migration(version: 2, name: "broken", statements: ["CREATE TABLE half (id int)", "SELEKT 1"]),
        ]
        try await withEmbeddedPostgres { _, endpoint async throws in
            let configuration = RelayStore.Configuration(embedded: endpoint)
            try await RelayStore.withStore(configuration: configuration, migrations: broken, logger: quietLogger) {
                store async throws in
                let error = await #expect(throws: RelayStoreError.self) { try await store.migrate() }
                guard let error, error.code == .migrationFailed else {
                    Issue.record("expected migrationFailed, got \(String(describing: error))")
                    return
                }
                #expect(error.description.contains("migration 2 (broken)"))
                #expect(error.detail.contains("SELEKT"))
                #expect(try await store.appliedMigrations() == [1])
                #expect(try await column("SELECT coalesce(to_regclass('half')::text, 'none')", in: store) == ["none"])
                // The lock was released: migrating again fails the same way instead of hanging.
                await #expect(throws: RelayStoreError.self) { try await store.migrate() }
            }
        }
    }
}

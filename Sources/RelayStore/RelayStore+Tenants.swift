import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// Applies tenant configurations in one transaction: inserts new tenants, replaces changed ones,
    /// leaves identical ones alone, and reports tenants stored but not given as ``TenantSyncReport/notInFolder``
    /// without deleting them. Running it twice with the same configurations changes nothing the second time.
    ///
    /// Configurations are compared as `jsonb` values, so key order and formatting never count as changes.
    /// Concurrent syncs are serialized by a table lock. The `enabled` flag is never touched.
    @discardableResult
    package func syncTenants(_ configurations: [TenantConfiguration]) async throws(RelayStoreError) -> TenantSyncReport
    {
        var seen = Set<String>()
        var documents: [(id: String, displayName: String, json: String)] = []
        for configuration in configurations.sorted(by: { $0.id < $1.id }) {
            guard seen.insert(configuration.id).inserted else {
                throw .duplicateTenant(configuration.id)
            }
            documents.append((configuration.id, configuration.displayName, try encode(configuration)))
        }
        let logger = self.logger
        do {
            return try await database.withConnection { [seen, documents] connection in
                try await connection.withTransaction(logger: logger) { transaction in
                    try await transaction.query("LOCK TABLE tenants IN SHARE ROW EXCLUSIVE MODE", logger: logger)
                    var existing = Set<String>()
                    for try await id in try await transaction.query("SELECT id FROM tenants", logger: logger)
                        .decode(String.self)
                    {
                        existing.insert(id)
                    }
                    var report = TenantSyncReport()
                    for document in documents {
                        if !existing.contains(document.id) {
                            try await transaction.query(
                                """
                                INSERT INTO tenants (id, display_name, config)
                                VALUES (\(document.id), \(document.displayName), \(document.json)::jsonb)
                                """,
                                logger: logger
                            )
                            report.created.append(document.id)
                            continue
                        }
                        var changed = false
                        for try await _ in try await transaction.query(
                            """
                            UPDATE tenants
                            SET display_name = \(document.displayName), config = \(document.json)::jsonb,
                                updated_at = now()
                            WHERE id = \(document.id)
                              AND (config IS DISTINCT FROM \(document.json)::jsonb
                                   OR display_name IS DISTINCT FROM \(document.displayName))
                            RETURNING id
                            """,
                            logger: logger
                        ).decode(String.self) {
                            changed = true
                        }
                        if changed {
                            report.updated.append(document.id)
                        } else {
                            report.unchanged.append(document.id)
                        }
                    }
                    report.notInFolder = existing.subtracting(seen).sorted()
                    return report
                }
            }
        } catch let error as RelayStoreError {
            throw error
        } catch {
            throw .databaseUnavailable(describePostgresError(error))
        }
    }

    /// Every stored tenant, by id.
    package func listTenants() async throws(RelayStoreError) -> [TenantRecord] {
        try await tenantRows(where: nil)
    }

    /// The stored tenant `id`, or `nil` when there is none.
    package func tenant(id: String) async throws(RelayStoreError) -> TenantRecord? {
        try await tenantRows(where: id).first
    }

    /// Turns tenant `id` on or off; throws ``RelayStoreError/unknownTenant(_:)`` when there is none.
    package func setTenantEnabled(id: String, enabled: Bool) async throws(RelayStoreError) {
        var found = false
        do {
            for try await _ in try await database.query(
                """
                UPDATE tenants
                SET enabled = \(enabled), updated_at = CASE WHEN enabled = \(enabled) THEN updated_at ELSE now() END
                WHERE id = \(id)
                RETURNING id
                """,
                logger: logger
            ).decode(String.self) {
                found = true
            }
        } catch {
            throw .databaseUnavailable(describePostgresError(error))
        }
        guard found else { throw .unknownTenant(id) }
    }

    private func encode(_ configuration: TenantConfiguration) throws(RelayStoreError) -> String {
        do {
            return String(decoding: try configuration.jsonData(), as: UTF8.self)
        } catch {
            throw .invalidTenantConfiguration(id: configuration.id, reason: "\(error)")
        }
    }

    private func tenantRows(where id: String?) async throws(RelayStoreError) -> [TenantRecord] {
        var rows: [(String, String?, Bool, String, Date, Date)] = []
        do {
            let query: PostgresQuery =
                if let id {
                    """
                    SELECT id, display_name, enabled, config::text, created_at, updated_at
                    FROM tenants WHERE id = \(id)
                    """
                } else {
                    "SELECT id, display_name, enabled, config::text, created_at, updated_at FROM tenants ORDER BY id"
                }
            for try await row in try await database.query(query, logger: logger).decode(
                (String, String?, Bool, String, Date, Date).self)
            {
                rows.append(row)
            }
        } catch {
            throw .databaseUnavailable(describePostgresError(error))
        }
        var records: [TenantRecord] = []
        for (id, displayName, enabled, json, createdAt, updatedAt) in rows {
            let configuration: TenantConfiguration
            do {
                configuration = try JSONDecoder().decode(TenantConfiguration.self, from: Data(json.utf8))
            } catch {
                throw .invalidTenantConfiguration(id: id, reason: "\(error)")
            }
            records.append(
                TenantRecord(
                    id: id, displayName: displayName ?? configuration.displayName, enabled: enabled,
                    configuration: configuration, createdAt: createdAt, updatedAt: updatedAt))
        }
        return records
    }
}

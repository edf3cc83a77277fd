import Foundation
import PostgresNIO

extension RelayStore {
    /// How long a relay's heartbeat counts it as live: a few missed beats (``heartbeat(node:)`` every 2 s).
    package static let nodeLiveness: Duration = .seconds(15)

    /// Rows of relays whose heartbeat is older than this are deleted.
    static let nodeForgetAfter: Duration = .seconds(3_600)

    /// Records that relay `node` is alive now, forgets relays silent for an hour, and returns how many
    /// relays (this one included) have beaten within ``nodeLiveness`` and, per tenant, the pages whose
    /// lease is held now: by `node` (its fan-out worker's lease owner name) and by every relay.
    package func heartbeat(node: String) async throws(RelayStoreError) -> NodeHeartbeat {
        return try await mappingErrors {
            try await database.query(
                """
                INSERT INTO relay_nodes (id) VALUES (\(node))
                ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
                """,
                logger: logger
            )
            try await database.query(
                "DELETE FROM relay_nodes WHERE heartbeat_at < now() - \(interval: Self.nodeForgetAfter)",
                logger: logger
            )
            var beat = NodeHeartbeat(liveRelays: 1, leasedPages: [:])
            for try await (count, ) in try await database.query(
                """
                SELECT count(*)::int8 FROM relay_nodes
                WHERE heartbeat_at >= now() - \(interval: Self.nodeLiveness)
                """,
                logger: logger
            ).decode(Int64.self) {
                beat.liveRelays = max(1, Int(count))
            }
            for try await (tenant, mine, all) in try await database.query(
                """
                SELECT tenant_id, count(*) FILTER (WHERE lease_owner = \(node))::int8, count(*)::int8
                FROM job_pages WHERE state = 'leased' AND lease_until >= now()
                GROUP BY tenant_id
                """,
                logger: logger
            ).decode((String, Int64, Int64).self) {
                beat.leasedPages[tenant] = LeasedPages(mine: Int(mine), all: Int(all))
            }
            return beat
        }
    }

    /// Removes relay `node`'s row: it stops, and no longer takes a share of the tenants' rates.
    package func removeNode(_ node: String) async throws(RelayStoreError) {
        try await mappingErrors {
            try await database.query("DELETE FROM relay_nodes WHERE id = \(node)", logger: logger)
        }
    }
}

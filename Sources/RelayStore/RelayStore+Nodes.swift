import Foundation
import PostgresNIO

extension RelayStore {
    /// How long a relay's heartbeat counts it as live: a few missed beats (``heartbeat(node:)`` every 5 s).
    public static let nodeLiveness: Duration = .seconds(15)

    /// Rows of relays whose heartbeat is older than this are deleted.
    static let nodeForgetAfter: Duration = .seconds(3_600)

    /// Records that relay `node` is alive now, forgets relays silent for an hour, and returns how many
    /// relays (this one included) have beaten within ``nodeLiveness``.
    public func heartbeat(node: String) async throws(RelayStoreError) -> Int {
        let live = Double(Self.nodeLiveness.components.seconds)
        let forget = Double(Self.nodeForgetAfter.components.seconds)
        do {
            try await database.query(
                """
                INSERT INTO relay_nodes (id) VALUES (\(node))
                ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
                """,
                logger: logger
            )
            try await database.query(
                "DELETE FROM relay_nodes WHERE heartbeat_at < now() - \(forget)::float8 * interval '1 second'",
                logger: logger
            )
            for try await (count, ) in try await database.query(
                """
                SELECT count(*)::int8 FROM relay_nodes
                WHERE heartbeat_at >= now() - \(live)::float8 * interval '1 second'
                """,
                logger: logger
            ).decode(Int64.self) {
                return max(1, Int(count))
            }
            return 1
        } catch {
            throw relayStoreFailure(error)
        }
    }

    /// Removes relay `node`'s row: it stops, and no longer takes a share of the tenants' rates.
    public func removeNode(_ node: String) async throws(RelayStoreError) {
        do {
            try await database.query("DELETE FROM relay_nodes WHERE id = \(node)", logger: logger)
        } catch {
            throw relayStoreFailure(error)
        }
    }
}

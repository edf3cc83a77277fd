import Foundation
import PostgresNIO

extension RelayStore {
    /// How long a relay's heartbeat counts it as live: a few missed beats (``heartbeat(node:)`` every 2 s).
    public static let nodeLiveness: Duration = .seconds(15)

    /// Rows of relays whose heartbeat is older than this are deleted.
    static let nodeForgetAfter: Duration = .seconds(3_600)

    /// Records that relay `node` is alive now, forgets relays silent for an hour, and returns how many
    /// relays (this one included) have beaten within ``nodeLiveness`` and, per tenant, the pages whose
    /// lease is held now: by `node` (its fan-out worker's lease owner name) and by every relay.
    public func heartbeat(node: String) async throws(RelayStoreError) -> NodeHeartbeat {
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
            var beat = NodeHeartbeat(liveRelays: 1, leasedPages: [:])
            for try await (count, ) in try await database.query(
                """
                SELECT count(*)::int8 FROM relay_nodes
                WHERE heartbeat_at >= now() - \(live)::float8 * interval '1 second'
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
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Removes relay `node`'s row: it stops, and no longer takes a share of the tenants' rates.
    public func removeNode(_ node: String) async throws(RelayStoreError) {
        do {
            try await database.query("DELETE FROM relay_nodes WHERE id = \(node)", logger: logger)
        } catch {
            throw relayStoreError(from: error)
        }
    }
}

/// What one relay's heartbeat saw of the relays sharing its database.
public struct NodeHeartbeat: Sendable, Hashable {
    /// Relays that have beaten within ``RelayStore/nodeLiveness``, this one included (at least 1).
    public var liveRelays: Int
    /// Per tenant with pages being sent: the pages leased now.
    public var leasedPages: [String: LeasedPages]

    /// A heartbeat's findings.
    public init(liveRelays: Int, leasedPages: [String: LeasedPages]) {
        self.liveRelays = liveRelays
        self.leasedPages = leasedPages
    }
}

/// A tenant's pages whose lease is held now: by the relay that asked, and by every relay.
public struct LeasedPages: Sendable, Hashable {
    /// Pages leased by the relay that asked.
    public var mine: Int
    /// Pages leased by any relay.
    public var all: Int

    /// Counts of leased pages.
    public init(mine: Int, all: Int) {
        self.mine = mine
        self.all = all
    }
}

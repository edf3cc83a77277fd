import Foundation
import PostgresNIO
import Testing

@testable import RelayStore

/// The scan nodes of `query`'s plan as PostgreSQL ran it: (node type, index name, rows read).
func scans(of query: PostgresQuery, in store: RelayStore) async throws -> [(String, String, Int)] {
    let explain = PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, FORMAT JSON) " + query.sql, binds: query.binds)
    let text = try #require(try await store.database.rows(explain, logger: store.logger).first?.decode(String.self))
    let plan = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [[String: Any]]
    var found: [(String, String, Int)] = []
    func walk(_ node: [String: Any]) {
        let type = node["Node Type"] as? String ?? ""
        // A bitmap index scan's rows are read again by its heap scan: the heap scan counts them.
        if type.contains("Scan"), type != "Bitmap Index Scan" {
            let read = (node["Actual Rows"] as? Int ?? 0) + (node["Rows Removed by Filter"] as? Int ?? 0)
            found.append((type, node["Index Name"] as? String ?? "", read))
        }
        for child in node["Plans"] as? [[String: Any]] ?? [] { walk(child) }
    }
    walk(plan[0]["Plan"] as! [String: Any])
    return found
}

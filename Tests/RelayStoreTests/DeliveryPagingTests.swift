import Foundation
import PostgresNIO
import Testing

@testable import RelayStore

@Suite("Delivery paging")
struct DeliveryPagingTests {
    /// 10,000 delivery rows of one job of `tenant`, in runs of 100 sent at the same instant (ties the keyset must
    /// order), the newest `base`.
    private func rows(_ tenant: String, job: String, base: Date) -> [DeliveryRecord] {
        (0..<10_000).map { index in
            DeliveryRecord(
                tenantID: tenant, jobID: job, userID: "user\(index)", token: deviceToken(index), outcome: .delivered,
                attempt: 1, sentAt: base.addingTimeInterval(-Double(index / 100)))
        }
    }

    /// Every page of `read` from the first to the one without a next key.
    private func allPages(
        limit: Int, _ read: (DeliveryKey?) async throws -> [DeliveryRecord]
    ) async throws -> (rows: [DeliveryRecord], pages: Int) {
        var all: [DeliveryRecord] = []
        var key: DeliveryKey?
        var pages = 0
        while true {
            let page = try await read(key)
            pages += 1
            all += page.prefix(limit)
            guard page.count > limit, let last = page.prefix(limit).last else { return (all, pages) }
            key = DeliveryKey(after: last)
        }
    }

    /// The names of the partitions' indexes of the partitioned index `index`.
    private func partitionIndexes(of index: String, in store: RelayStore) async throws -> Set<String> {
        let query: PostgresQuery = """
            SELECT c.relname::text FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname = \(index)
            """
        return Set(try await store.database.rows(query, logger: store.logger).map { try $0.decode(String.self) })
    }

    @Test("a 10,000-device job is paged completely by its cursor; its plan reads that job's rows only")
    func jobPagedCompletely() async throws {
        try await withTenantStore { store in
            let base = Date().addingTimeInterval(-60)
            let job = UUID().uuidString.lowercased()
            try await store.recordDeliveries(rows("circl", job: job, base: base))
            try await store.recordDeliveries(rows("familyportal", job: UUID().uuidString.lowercased(), base: base))
            let (all, pages) = try await allPages(limit: 1_000) { key in
                try await store.deliveries(tenant: "circl", job: job, limit: 1_001, after: key)
            }
            #expect(pages == 10)
            #expect(all.count == 10_000 && Set(all.map(\.token)).count == 10_000)
            #expect(zip(all, all.dropFirst()).allSatisfy { $0.sentAt >= $1.sentAt })
            let key = DeliveryKey(after: all[4_999])
            let plan = try await scans(
                of: RelayStore.jobDeliveries(tenant: "circl", job: job, limit: 1_001, after: key), in: store)
            #expect(!plan.isEmpty && plan.allSatisfy { $0.0.contains("Index") || $0.0.contains("Bitmap") })
            #expect(plan.map(\.2).reduce(0, +) <= 10_000, "read \(plan)")
        }
    }

    @Test("a tenant's time range is paged completely; its plan reads that tenant's rows from the key down")
    func timeRangePagedByTenantIndex() async throws {
        try await withTenantStore { store in
            let base = Date().addingTimeInterval(-60)
            try await store.recordDeliveries(rows("circl", job: UUID().uuidString.lowercased(), base: base))
            try await store.recordDeliveries(rows("familyportal", job: UUID().uuidString.lowercased(), base: base))
            let (from, to) = (base.addingTimeInterval(-3_600), base.addingTimeInterval(1))
            let (all, pages) = try await allPages(limit: 1_000) { key in
                try await store.deliveries(tenant: "familyportal", from: from, to: to, limit: 1_001, after: key)
            }
            #expect(pages == 10 && all.count == 10_000)
            #expect(all.allSatisfy { $0.tenantID == "familyportal" } && Set(all.map(\.token)).count == 10_000)
            // Both with and without statistics (a fresh day partition, then as autovacuum would have it), the page
            // of 100 after row 5,000 starts at its key: two scans (the page's oldest time, then the page) each read
            // about a page plus two runs of 100 ties, never the 5,000 rows below the key nor circl's 10,000.
            let tenantTime = try await partitionIndexes(of: "deliveries_tenant_time", in: store)
            for analyzed in [false, true] {
                if analyzed { try await store.database.query("ANALYZE deliveries", logger: store.logger) }
                let query = RelayStore.timeRangeDeliveries(
                    tenant: "familyportal", from: from, to: to, limit: 101, after: DeliveryKey(after: all[4_999]))
                let plan = try await scans(of: query, in: store)
                #expect(!plan.isEmpty && plan.allSatisfy { tenantTime.contains($0.1) }, "plan \(plan)")
                #expect(plan.count == 2 && plan.map(\.2).reduce(0, +) <= 600, "read \(plan)")
            }
        }
    }
}

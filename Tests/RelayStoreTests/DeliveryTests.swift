import Foundation
import RelayStore
import Testing

/// `count` delivery records for `tenant`, spread over the hours after `instant()` (which is 12:00 UTC), so
/// they land in that day's and the next day's partitions.
func makeDeliveries(tenant: String, count: Int, job: String = "job-1") -> [DeliveryRecord] {
    (0..<count).map { index in
        let sent = instant(index * 10)
        let dead = index % 1_000 == 999
        return DeliveryRecord(
            tenantID: tenant, jobID: index.isMultiple(of: 2) ? job : job + "-b", userID: "user\(index % 100)",
            token: deviceToken(index), providerMessageID: UUID().uuidString, outcome: dead ? .tokenDead : .delivered,
            reason: dead ? "Unregistered" : nil, attempt: 1, sentAt: sent, answeredAt: sent.addingTimeInterval(1),
            latencyMilliseconds: 1_000)
    }
}

@Suite("Deliveries")
struct DeliveryTests {
    @Test("10,000 deliveries in batches of 1,000 take exactly 10 statements")
    func batchedWrites() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2)
            let records = makeDeliveries(tenant: "circl", count: 10_000)
            // A token's deliveries are found through the users its device rows held.
            try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "user99", token: deviceToken(999)),
                at: instant())
            let report = try await store.recordDeliveries(records, batchSize: 1_000)
            #expect(report == DeliveryWriteReport(rows: 10_000, statements: 10))

            #expect(try await column("SELECT count(*)::text FROM deliveries", in: store) == ["10000"])
            // Rows written by one statement share its transaction id: the server saw exactly 10 writes.
            #expect(try await column("SELECT count(DISTINCT xmin::text)::text FROM deliveries", in: store) == ["10"])

            let byJob = try await store.deliveries(tenant: "circl", job: "job-1", limit: 20_000)
            #expect(byJob.count == 5_000)
            #expect(byJob.first?.sentAt == instant(9_998 * 10))
            let byUser = try await store.deliveries(tenant: "circl", user: "user99", limit: 5)
            #expect(byUser.count == 5)
            #expect(byUser.allSatisfy { $0.userID == "user99" })
            let byToken = try await store.deliveries(tenant: "circl", token: deviceToken(999).uppercased())
            #expect(byToken.count == 1)
            let dead = try #require(byToken.first)
            #expect(dead == records[999])
            let inRange = try await store.deliveries(tenant: "circl", from: instant(0), to: instant(100), limit: 100)
            #expect(inRange.map(\.sentAt) == (0..<10).reversed().map { instant($0 * 10) })
        }
    }

    @Test("fields with tabs, newlines, carriage returns and backslashes, and microsecond times, read back as written")
    func specialCharactersRoundTrip() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2)
            let sent = instant(7).addingTimeInterval(0.123_456)
            let record = DeliveryRecord(
                tenantID: "circl", jobID: "job\t1\\x", userID: "user\nwith\rbreaks\\", token: deviceToken(1),
                providerMessageID: "\\N", outcome: .retryLater,
                reason: "tab\there, newline\nthere\\, and \\t literally",
                attempt: 3, sentAt: sent, answeredAt: sent.addingTimeInterval(0.000_001), latencyMilliseconds: 0
            )
            #expect(try await store.recordDeliveries([record]) == DeliveryWriteReport(rows: 1, statements: 1))
            let stored = try await store.deliveries(tenant: "circl", job: "job\t1\\x")
            #expect(stored == [record])
            #expect(
                try await column(
                    "SELECT to_char(sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM deliveries", in: store)
                    == ["2026-03-10 12:00:07.123456"]
            )
        }
    }

    @Test("columns the same in every row are sent once and read back as written, absent values as absent")
    func uniformColumnsRoundTrip() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2)
            // Every optional field absent in every row (each sent once), then the same fields present in
            // some rows only (sent as arrays).
            let absent = (0..<3).map { index in
                DeliveryRecord(
                    tenantID: "circl", jobID: "uniform", token: deviceToken(index), outcome: .skipped,
                    attempt: 0, sentAt: instant(5))
            }
            let mixed = (0..<3).map { index in
                DeliveryRecord(
                    tenantID: "circl", jobID: "mixed", userID: index == 0 ? nil : "user\(index)",
                    token: deviceToken(10 + index), providerMessageID: index == 1 ? UUID().uuidString : nil,
                    outcome: index == 2 ? .tokenDead : .delivered, reason: index == 2 ? "Unregistered" : nil,
                    attempt: index + 1, sentAt: instant(index), answeredAt: index == 0 ? nil : instant(index + 1),
                    latencyMilliseconds: index == 0 ? nil : index * 10)
            }
            #expect(try await store.recordDeliveries(absent) == DeliveryWriteReport(rows: 3, statements: 1))
            #expect(try await store.recordDeliveries(mixed) == DeliveryWriteReport(rows: 3, statements: 1))
            let uniform = try await store.deliveries(tenant: "circl", job: "uniform")
            #expect(uniform.sorted { $0.token < $1.token } == absent)
            let stored = try await store.deliveries(tenant: "circl", job: "mixed")
            #expect(stored.sorted { $0.token < $1.token } == mixed)
        }
    }

    @Test("a row outside every partition gets its day's partition and the batch is written again")
    func missingPartition() async throws {
        try await withTenantStore { store in
            let records = makeDeliveries(tenant: "anky", count: 3)
            let report = try await store.recordDeliveries(records)
            #expect(report == DeliveryWriteReport(rows: 3, statements: 3, createdPartitions: ["deliveries_p20260310"]))
            #expect(try await store.deliveries(tenant: "anky", job: "job-1").count == 2)
            #expect(try await store.recordDeliveries([]) == DeliveryWriteReport())
        }
    }

    @Test("daily partitions are created once and dropped by retention")
    func partitionsAndRetention() async throws {
        try await withTenantStore { store in
            let created = try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2, daysBehind: 1)
            #expect(
                created == [
                    "deliveries_p20260309", "deliveries_p20260310", "deliveries_p20260311", "deliveries_p20260312",
                ])
            #expect(try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2, daysBehind: 1).isEmpty)
            #expect(try await store.deliveryPartitions() == created)

            let day: Int = 86_400
            let records = (-1...2).map { offset in
                DeliveryRecord(
                    tenantID: "argus", jobID: "job", token: deviceToken(offset + 10), outcome: .delivered,
                    sentAt: instant(offset * day))
            }
            #expect(try await store.recordDeliveries(records).statements == 1)

            // 2026-03-11 00:00 UTC: the 9th and 10th are wholly older, the 11th is not.
            let cutoff = instant(12 * 3_600)
            let dropped = try await store.dropDeliveryPartitions(olderThan: cutoff)
            #expect(dropped == ["deliveries_p20260309", "deliveries_p20260310"])
            #expect(try await store.deliveryPartitions() == ["deliveries_p20260311", "deliveries_p20260312"])
            #expect(try await store.dropDeliveryPartitions(olderThan: cutoff).isEmpty)
            let left = try await store.deliveries(tenant: "argus", from: instant(-2 * day), to: instant(3 * day))
            #expect(left.map(\.sentAt) == [instant(2 * day), instant(day)])
        }
    }

    @Test("a tenant cannot read another tenant's deliveries")
    func tenantIsolation() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 2)
            try await store.recordDeliveries(
                makeDeliveries(tenant: "circl", count: 10) + makeDeliveries(tenant: "anky", count: 4))
            // The token is user7's in both tenants; only circl has deliveries to it.
            for tenant in ["circl", "anky"] {
                try await store.registerDevice(
                    tenant: tenant, registration: DeviceRegistration(userID: "user7", token: deviceToken(7)),
                    at: instant())
            }
            #expect(try await store.deliveries(tenant: "anky", job: "job-1").count == 2)
            #expect(try await store.deliveries(tenant: "anky", user: "user5").isEmpty)
            #expect(try await store.deliveries(tenant: "anky", token: deviceToken(7)).isEmpty)
            #expect(try await store.deliveries(tenant: "circl", token: deviceToken(7)).count == 1)
            let anky = try await store.deliveries(tenant: "anky", from: instant(-1), to: instant(1_000))
            #expect(anky.count == 4)
            #expect(anky.allSatisfy { $0.tenantID == "anky" })
            #expect(try await store.deliveries(tenant: "familyportal", from: instant(-1), to: instant(1_000)).isEmpty)
        }
    }

    @Test("a token's deliveries are found after it moved to another user and after it was unregistered")
    func tokenLookupThroughItsUsers() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 1)
            let token = deviceToken(42)
            func delivery(to user: String, at seconds: Int) -> DeliveryRecord {
                DeliveryRecord(
                    tenantID: "circl", jobID: "job-\(user)", userID: user, token: token, outcome: .delivered,
                    attempt: 1, sentAt: instant(seconds))
            }
            // circl: a token moves to the last user who registers it.
            try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "alice", token: token), at: instant(0))
            try await store.recordDeliveries([delivery(to: "alice", at: 10)])
            let moved = try await store.registerDevice(
                tenant: "circl", registration: DeviceRegistration(userID: "bob", token: token), at: instant(20))
            #expect(moved.previousUserID == "alice")
            // A row of a pair no device held (only a direct call writes one) is not found by the token.
            try await store.recordDeliveries([delivery(to: "bob", at: 30), delivery(to: "carol", at: 40)])
            #expect(try await store.deliveries(tenant: "circl", token: token).map(\.userID) == ["bob", "alice"])

            #expect(try await store.unregisterDevice(tenant: "circl", token: token) == 1)
            let found = try await store.deliveries(tenant: "circl", token: token.uppercased(), limit: 1)
            #expect(found.map(\.sentAt) == [instant(30)])
            #expect(try await store.deliveries(tenant: "circl", token: token).count == 2)
            #expect(try await store.deliveries(tenant: "anky", token: token).isEmpty)
        }
    }

    @Test("records for an unknown tenant are refused as a whole")
    func unknownTenant() async throws {
        try await withTenantStore { store in
            try await store.ensureDeliveryPartitions(around: instant(), daysAhead: 1)
            let records = makeDeliveries(tenant: "circl", count: 2) + makeDeliveries(tenant: "nobody", count: 1)
            await #expect(throws: RelayStoreError.self) {
                try await store.recordDeliveries(records)
            }
            #expect(try await store.deliveries(tenant: "circl", job: "job-1").isEmpty)
        }
    }
}

public import APNs
public import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The outcome class of one delivery attempt, as stored in `deliveries.outcome`.
public enum DeliveryOutcome: String, Sendable, Hashable, CaseIterable {
    /// APNs accepted the notification (200).
    case delivered
    /// APNs declared the token dead (410 Unregistered, or BadDeviceToken).
    case tokenDead = "token_dead"
    /// A transient failure (429, 5xx, timeout): another attempt follows or the job gave up.
    case retryLater = "retry_later"
    /// The tenant's configuration is wrong (bad topic, key or certificate).
    case configurationFault = "configuration_fault"
    /// Not sent at all (preferences, mutes, quiet hours, inactive token).
    case skipped
}

extension DeliveryOutcome {
    /// The delivery outcome recorded for an engine outcome class.
    public init(_ outcome: APNsOutcomeClass) {
        switch outcome {
        case .delivered: self = .delivered
        case .tokenDead: self = .tokenDead
        case .retryLater: self = .retryLater
        case .configurationFault: self = .configurationFault
        }
    }
}

/// One delivery attempt: a row of the `deliveries` table.
///
/// Empty strings in ``userID``, ``apnsID`` and ``reason`` are stored as `NULL`, and a negative
/// ``latencyMilliseconds`` as no latency.
public struct DeliveryRecord: Sendable, Hashable {
    /// The tenant the notification was sent for.
    public var tenantID: String
    /// The job (one backend request, possibly a fan-out) the attempt belongs to.
    public var jobID: String
    /// The user the device belongs to, when known.
    public var userID: String?
    /// The device token, hex; stored lower-cased.
    public var token: String
    /// The `apns-id` of the request.
    public var apnsID: String?
    /// The attempt's outcome class.
    public var outcome: DeliveryOutcome
    /// APNs' reason (`Unregistered`, `TopicDisallowed`) or the relay's reason for skipping.
    public var reason: String?
    /// The attempt's number, from 1 (0 for a notification skipped before any attempt).
    public var attempt: Int
    /// When the request was sent; the table is partitioned by this (UTC days).
    public var sentAt: Date
    /// When APNs answered, if it did.
    public var answeredAt: Date?
    /// The time from sending to APNs' answer, in milliseconds.
    public var latencyMilliseconds: Int?
    /// The notification type of the job (counted by per-user frequency caps).
    public var notificationType: String?

    /// Creates a record.
    public init(
        tenantID: String,
        jobID: String,
        userID: String? = nil,
        token: String,
        apnsID: String? = nil,
        outcome: DeliveryOutcome,
        reason: String? = nil,
        attempt: Int = 1,
        sentAt: Date,
        answeredAt: Date? = nil,
        latencyMilliseconds: Int? = nil,
        notificationType: String? = nil
    ) {
        self.tenantID = tenantID
        self.jobID = jobID
        self.userID = userID
        self.token = token
        self.apnsID = apnsID
        self.outcome = outcome
        self.reason = reason
        self.attempt = attempt
        self.sentAt = sentAt
        self.answeredAt = answeredAt
        self.latencyMilliseconds = latencyMilliseconds
        self.notificationType = notificationType
    }
}

/// What ``RelayStore/recordDeliveries(_:batchSize:)`` did.
public struct DeliveryWriteReport: Sendable, Hashable {
    /// The rows written.
    public var rows: Int
    /// The SQL statements (round trips) it ran: one per batch, plus two for a batch that needed a new partition.
    public var statements: Int
    /// The partitions it had to create because a row fell outside every existing one.
    public var createdPartitions: [String]

    /// Creates a report.
    public init(rows: Int = 0, statements: Int = 0, createdPartitions: [String] = []) {
        self.rows = rows
        self.statements = statements
        self.createdPartitions = createdPartitions
    }
}

extension RelayStore {
    /// Writes delivery attempts, `batchSize` rows per statement: each batch is one
    /// `INSERT … SELECT … FROM UNNEST($1::text[], …)`, never a round trip per row.
    ///
    /// A batch with a row outside every daily partition creates the missing days' partitions
    /// (``ensureDeliveryPartitions(around:daysAhead:daysBehind:)``) and is written again. Each batch is atomic.
    @discardableResult
    public func recordDeliveries(
        _ records: [DeliveryRecord],
        batchSize: Int = 5_000
    ) async throws(RelayStoreError) -> DeliveryWriteReport {
        guard batchSize > 0 else { throw .invalidDeliveries(reason: "the batch size must be positive") }
        try await checkTenants(of: records)
        var report = DeliveryWriteReport()
        var start = records.startIndex
        while start < records.endIndex {
            let end = min(start + batchSize, records.endIndex)
            let batch = records[start..<end]
            let rows = try Self.copyRows(batch)
            do {
                report.statements += 1
                try await insert(rows)
            } catch let error as PSQLError where Self.isMissingPartition(error) {
                report.statements += 1
                report.createdPartitions += try await ensurePartitions(for: batch.map(\.sentAt))
                report.statements += 1
                do {
                    try await insert(rows)
                } catch {
                    throw relayStoreFailure(error)
                }
            } catch {
                throw relayStoreFailure(error)
            }
            report.rows += end - start
            start = end
        }
        return report
    }

    /// Creates the daily (UTC) partitions of `deliveries` from `daysBehind` days before `around`'s day to
    /// `daysAhead` days after it, in one statement, and returns the names of those it created
    /// (`deliveries_pYYYYMMDD`); existing ones are left alone. Safe to run from several processes at once.
    @discardableResult
    public func ensureDeliveryPartitions(
        around: Date,
        daysAhead: Int = 7,
        daysBehind: Int = 1
    ) async throws(RelayStoreError) -> [String] {
        guard daysAhead >= 0, daysBehind >= 0 else {
            throw .invalidDeliveries(reason: "daysAhead and daysBehind must not be negative")
        }
        do {
            var created: [String] = []
            for try await name in try await database.query(
                """
                SELECT pushrelay_ensure_delivery_partition(
                    (\(around)::timestamptz AT TIME ZONE 'UTC')::date + day_offset)
                FROM generate_series(-\(daysBehind)::int, \(daysAhead)::int) AS day_offset
                ORDER BY day_offset
                """,
                logger: logger
            ).decode(String?.self) {
                if let name { created.append(name) }
            }
            return created
        } catch {
            throw relayStoreFailure(error)
        }
    }

    /// Drops the daily partitions of `deliveries` whose whole day lies before `olderThan` (the retention
    /// cut-off) and returns their names, oldest first.
    @discardableResult
    public func dropDeliveryPartitions(olderThan: Date) async throws(RelayStoreError) -> [String] {
        do {
            var dropped: [String] = []
            for try await name in try await database.query(
                "SELECT pushrelay_drop_delivery_partitions(\(olderThan))",
                logger: logger
            ).decode(String.self) {
                dropped.append(name)
            }
            return dropped
        } catch {
            throw relayStoreFailure(error)
        }
    }

    /// The names of the partitions of `deliveries`, oldest first.
    public func deliveryPartitions() async throws(RelayStoreError) -> [String] {
        do {
            var names: [String] = []
            for try await name in try await database.query(
                """
                SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'deliveries'::regclass ORDER BY c.relname
                """,
                logger: logger
            ).decode(String.self) {
                names.append(name)
            }
            return names
        } catch {
            throw relayStoreFailure(error)
        }
    }

    /// The attempts of job `job` in `tenant`, the latest first, at most `limit`.
    public func deliveries(tenant: String, job: String, limit: Int = 1_000) async throws(RelayStoreError)
        -> [DeliveryRecord]
    {
        try await deliveryRows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
            WHERE tenant_id = \(tenant) AND job_id = \(job)
            ORDER BY sent_at DESC, attempt DESC LIMIT \(limit)
            """
        )
    }

    /// The attempts to `user`'s devices in `tenant`, the latest first, at most `limit`.
    public func deliveries(tenant: String, user: String, limit: Int = 1_000) async throws(RelayStoreError)
        -> [DeliveryRecord]
    {
        try await deliveryRows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
            WHERE tenant_id = \(tenant) AND user_id = \(user)
            ORDER BY sent_at DESC, attempt DESC LIMIT \(limit)
            """
        )
    }

    /// The attempts to device `token` in `tenant`, the latest first, at most `limit`.
    public func deliveries(tenant: String, token: String, limit: Int = 1_000) async throws(RelayStoreError)
        -> [DeliveryRecord]
    {
        let token = token.lowercased()
        return try await deliveryRows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
            WHERE tenant_id = \(tenant) AND token = \(token)
            ORDER BY sent_at DESC, attempt DESC LIMIT \(limit)
            """
        )
    }

    /// The attempts in `tenant` sent from `from` (included) to `to` (excluded), the latest first, at most `limit`.
    public func deliveries(tenant: String, from: Date, to: Date, limit: Int = 1_000) async throws(RelayStoreError)
        -> [DeliveryRecord]
    {
        try await deliveryRows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
            WHERE tenant_id = \(tenant) AND sent_at >= \(from) AND sent_at < \(to)
            ORDER BY sent_at DESC, attempt DESC LIMIT \(limit)
            """
        )
    }

    // MARK: - Helpers

    static let deliveryColumns = """
        tenant_id, job_id, user_id, token, apns_id, outcome, reason, attempt::int8, sent_at, answered_at, \
        latency_ms::int8
        """

    /// Refuses records of a tenant that does not exist (the table has no foreign key: checking it per row
    /// cost more than the insert). A tenant found once is not looked up again.
    private func checkTenants(of records: [DeliveryRecord]) async throws(RelayStoreError) {
        let unchecked = Set(records.map(\.tenantID)).filter { !knownTenants.contains($0) }
        guard !unchecked.isEmpty else { return }
        var found: Set<String> = []
        do {
            for try await id in try await database.query(
                "SELECT id FROM tenants WHERE id = ANY(\(Array(unchecked))::text[])", logger: logger
            ).decode(String.self) {
                found.insert(id)
            }
        } catch {
            throw relayStoreFailure(error)
        }
        knownTenants.insert(found)
        if let missing = unchecked.subtracting(found).sorted().first { throw .unknownTenant(missing) }
    }

    /// Writes rows made by ``copyRows(_:)`` with `COPY … FROM STDIN` (text format): one round trip, and far
    /// less work for the server than an INSERT of the same rows.
    private func insert(_ rows: ByteBuffer) async throws {
        try await database.withConnection { connection in
            try await connection.copyFrom(table: "deliveries", columns: Self.copiedColumns, logger: logger) { writer in
                try await writer.write(rows)
            }
        }
    }

    /// The `COPY` text rows of `records`, in the order of ``copiedColumns``; a record with an empty tenant or
    /// job id, or an attempt out of range, refuses the whole batch.
    private static func copyRows(_ records: ArraySlice<DeliveryRecord>) throws(RelayStoreError) -> ByteBuffer {
        var rows = ByteBuffer()
        rows.reserveCapacity(records.count * 320)
        for record in records {
            guard !record.tenantID.isEmpty, !record.jobID.isEmpty else {
                throw .invalidDeliveries(reason: "a record has an empty tenant or job id")
            }
            guard record.attempt >= 0, record.attempt <= Int(Int32.max) else {
                throw .invalidDeliveries(reason: "attempt \(record.attempt) is out of range")
            }
            rows.writeCopyField(record.tenantID)
            rows.writeCopyField(record.jobID)
            rows.writeCopyField(record.userID.flatMap { $0.isEmpty ? nil : $0 })
            rows.writeCopyField(record.token.lowercased())
            rows.writeCopyField(record.apnsID.flatMap { $0.isEmpty ? nil : $0 })
            rows.writeCopyField(record.outcome.rawValue)
            rows.writeCopyField(record.reason.flatMap { $0.isEmpty ? nil : $0 })
            rows.writeCopyField(String(record.attempt))
            rows.writeCopyTimestamp(record.sentAt)
            if let answeredAt = record.answeredAt {
                rows.writeCopyTimestamp(answeredAt)
            } else {
                rows.writeCopyField(nil)
            }
            let latency = record.latencyMilliseconds.map { min($0, Int(Int32.max)) }
            rows.writeCopyField(latency.flatMap { $0 >= 0 ? String($0) : nil })
            rows.writeCopyField(record.notificationType.flatMap { $0.isEmpty ? nil : $0 }, last: true)
        }
        return rows
    }

    private static let copiedColumns = [
        "tenant_id", "job_id", "user_id", "token", "apns_id", "outcome", "reason", "attempt", "sent_at", "answered_at",
        "latency_ms", "notification_type",
    ]

    private func ensurePartitions(for dates: [Date]) async throws(RelayStoreError) -> [String] {
        do {
            var created: [String] = []
            for try await name in try await database.query(
                """
                SELECT pushrelay_ensure_delivery_partition(day)
                FROM (SELECT DISTINCT (s AT TIME ZONE 'UTC')::date AS day FROM UNNEST(\(dates)::timestamptz[]) AS s) days
                ORDER BY day
                """,
                logger: logger
            ).decode(String?.self) {
                if let name { created.append(name) }
            }
            return created
        } catch {
            throw relayStoreFailure(error)
        }
    }

    private static func isMissingPartition(_ error: PSQLError) -> Bool {
        error.serverInfo?[.sqlState] == "23514" && (error.serverInfo?[.message] ?? "").contains("no partition")
    }

    private func deliveryRows(_ query: PostgresQuery) async throws(RelayStoreError) -> [DeliveryRecord] {
        do {
            var records: [DeliveryRecord] = []
            for try await row in try await database.query(query, logger: logger).decode(
                (String, String, String?, String, String?, String, String?, Int, Date, Date?, Int?).self)
            {
                guard let outcome = DeliveryOutcome(rawValue: row.5) else {
                    throw RelayStoreError.databaseUnavailable("delivery row with unknown outcome \(row.5)")
                }
                records.append(
                    DeliveryRecord(
                        tenantID: row.0, jobID: row.1, userID: row.2, token: row.3, apnsID: row.4, outcome: outcome,
                        reason: row.6, attempt: row.7, sentAt: row.8, answeredAt: row.9, latencyMilliseconds: row.10))
            }
            return records
        } catch {
            throw relayStoreFailure(error)
        }
    }
}

/// Tenant ids known to exist, shared by the copies of one ``RelayStore``.
final class KnownTenants: Sendable {
    private let ids = Mutex<Set<String>>([])

    /// Whether `id` was found before.
    func contains(_ id: String) -> Bool { ids.withLock { $0.contains(id) } }

    /// Remembers `found`.
    func insert(_ found: Set<String>) { ids.withLock { $0.formUnion(found) } }
}

extension ByteBuffer {
    /// Writes one field of a `COPY` text row: `\N` for `nil`, else the value with backslash, tab, newline and
    /// carriage return escaped; then a tab, or a newline after the row's last field.
    fileprivate mutating func writeCopyField(_ value: String?, last: Bool = false) {
        if var value {
            // Runs without a byte to escape are written whole: most fields have none.
            value.withUTF8 { bytes in
                var start = 0
                for index in bytes.indices {
                    let escape: StaticString
                    switch bytes[index] {
                    case UInt8(ascii: "\\"): escape = "\\\\"
                    case UInt8(ascii: "\t"): escape = "\\t"
                    case UInt8(ascii: "\n"): escape = "\\n"
                    case UInt8(ascii: "\r"): escape = "\\r"
                    default: continue
                    }
                    writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start..<index])))
                    writeStaticString(escape)
                    start = index + 1
                }
                writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start...])))
            }
        } else {
            writeStaticString("\\N")
        }
        writeInteger(last ? UInt8(ascii: "\n") : UInt8(ascii: "\t"))
    }

    /// Writes a `timestamptz` field in UTC with microseconds: `2026-11-21 09:30:00.123456+00`, then a tab.
    fileprivate mutating func writeCopyTimestamp(_ date: Date) {
        let microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        var seconds = time_t(microseconds.floorDiv(1_000_000))
        let fraction = Int(microseconds - Int64(seconds) * 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let text: StaticString = "0000-00-00 00:00:00.000000+00\t"
        writeWithUnsafeMutableBytes(minimumWritableBytes: text.utf8CodeUnitCount) { buffer in
            let out = buffer.bindMemory(to: UInt8.self)
            text.withUTF8Buffer { template in _ = out.initialize(from: template) }
            // Writes `value` as `count` digits ending just before `end`.
            func digits(_ value: Int, _ count: Int, endingAt end: Int) {
                var value = value
                for position in stride(from: end - 1, through: end - count, by: -1) {
                    out[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            digits(Int(parts.tm_year) + 1900, 4, endingAt: 4)
            digits(Int(parts.tm_mon) + 1, 2, endingAt: 7)
            digits(Int(parts.tm_mday), 2, endingAt: 10)
            digits(Int(parts.tm_hour), 2, endingAt: 13)
            digits(Int(parts.tm_min), 2, endingAt: 16)
            digits(Int(parts.tm_sec), 2, endingAt: 19)
            digits(fraction, 6, endingAt: 26)
            return text.utf8CodeUnitCount
        }
    }
}

extension Int64 {
    /// Division rounding toward negative infinity.
    fileprivate func floorDiv(_ divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

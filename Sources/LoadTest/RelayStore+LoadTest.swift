package import Foundation
import PostgresNIO
package import PushRelayProtocol
package import RelayStore

/// What `pushrelay loadtest` needs of the database beyond the relay's own queries: synthetic devices made in
/// bulk, and read-only figures about the deliveries a run recorded.
extension RelayStore {
    /// Most rows one ``insertSyntheticDevices(tenant:policy:range:userPrefix:tokenPrefix:topics:provider:)``
    /// statement writes.
    package static let syntheticDeviceBatch = 100_000

    /// The device token of synthetic device `index` under `tokenPrefix` (8 hex digits): the prefix and the
    /// index in hex, 64 hex digits in all; the same token the bulk insert writes.
    package static func syntheticToken(prefix: String, index: Int) -> String {
        let hex = String(index, radix: 16)
        return prefix + String(repeating: "0", count: max(0, 56 - hex.count)) + hex
    }

    /// The length of a synthetic FCM registration token (what the bulk insert writes for `.fcm`): about that of
    /// Google's (an instance id, a colon, `APA91b` and some 140 characters).
    package static let syntheticFCMTokenLength = 152

    /// Registers the synthetic devices `range` of `tenant` in one statement (INSERT … SELECT over
    /// `generate_series`, no round trip per device): device `i` belongs to user `userPrefix` + `i`, has the
    /// production environment, no time zone, and subscribes to `topics`. An APNs device (platform `ios`) has
    /// ``syntheticToken(prefix:index:)``; an FCM device (platform `android`, provider `fcm`) has an opaque token
    /// of Google's shape and length, `lt<prefix>-<i>:APA91b…` padded to ``syntheticFCMTokenLength`` bytes, so
    /// that the relay reads, renders and records FCM tokens of their real size.
    /// Its slot is the one ``registerDevice(tenant:policy:registration:)`` would give it under `policy`, so a
    /// later registration of the same device updates its row. Returns the rows written.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` for a prefix that is not 8 hex digits, a user prefix
    ///   that JSON would escape, a range larger than ``syntheticDeviceBatch``, or a provider other than APNs and
    ///   FCM.
    @discardableResult
    package func insertSyntheticDevices(
        tenant: String,
        policy: TenantConfiguration.TokenPolicy,
        range: Range<Int>,
        userPrefix: String,
        tokenPrefix: String,
        topics: [String],
        provider: PushProvider = .apns
    ) async throws(RelayStoreError) -> Int {
        guard tokenPrefix.count == 8, tokenPrefix.allSatisfy(\.isHexDigit), tokenPrefix == tokenPrefix.lowercased()
        else {
            throw .invalidArgument("the token prefix must be 8 lower-case hex digits, not \(tokenPrefix)")
        }
        guard userPrefix.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" })
        else {
            throw .invalidArgument("the user prefix must be printable ASCII without quotes or backslashes")
        }
        guard range.count <= Self.syntheticDeviceBatch, range.lowerBound >= 0 else {
            throw .invalidArgument("at most \(Self.syntheticDeviceBatch) devices per statement, from index 0")
        }
        guard provider == .apns || provider == .fcm else {
            throw .invalidArgument("synthetic devices are APNs or FCM devices, not \(provider)")
        }
        guard !range.isEmpty else { return 0 }
        let platform = provider == .apns ? "ios" : "android"
        // Both forms are ASCII without quotes: the slot below needs no escapes.
        let token =
            provider == .apns
            ? "'\(tokenPrefix)' || lpad(to_hex(i), 56, '0')"
            : "rpad('lt\(tokenPrefix)-' || i || ':APA91b', \(Self.syntheticFCMTokenLength), "
                + "'bk3RNwTe3H0-xBq9tLvZ_fHZt4QmQd2kP7sYc1uWJrLoE8gA6vMnS5hK0iXyU')"
        // The slot is the JSON array `slot(policy:registration:token:)` encodes (no spaces, no escapes needed).
        let slot =
            switch policy {
            case .tokenMovesToLastUser: #"'["token","' || token || '"]'"#
            case .onePerUserPlatform: #"'["user_platform","' || user_id || '","\#(platform)"]'"#
            case .perUserTokenPlatformEnvironment:
                #"'["user_token_platform_environment","' || user_id || '","' || token || '","\#(platform)","production"]'"#
            }
        return try await countRows(
            """
            INSERT INTO devices (
                tenant_id, slot, user_id, token, platform, environment, topics, registered_at, provider
            )
            SELECT \(tenant), \(unescaped: slot), user_id, token, \(platform), 'production', \(topics)::text[], now(),
                   \(provider.rawValue)
            FROM (
                SELECT \(userPrefix) || i AS user_id, \(unescaped: token) AS token
                FROM generate_series(\(range.lowerBound)::int8, \(range.upperBound - 1)::int8) AS i
            ) AS synthetic
            RETURNING 1::int8
            """
        )
    }

    /// Settles the devices table after a bulk insert, as an operator would after a bulk load: vacuums it (so the
    /// fan-outs' reads do not set the new rows' hint bits), refreshes the planner's statistics (so topic
    /// fan-outs read it by token order), then checkpoints, so that the load's write-ahead log does not make a
    /// checkpoint during the measured sends. `token_users`, which the devices' trigger filled as they went in,
    /// is vacuumed too: else autovacuum takes it up within the minute, during whichever measured phase is
    /// running then (seen: 5.3 s of writes over its 1.1 million rows, under the 10,000 fan-outs).
    /// Needs a superuser (the load test's own cluster).
    package func settleDevices() async throws(RelayStoreError) {
        try await mappingErrors {
            try await client.query("VACUUM (ANALYZE) devices, token_users", logger: logger)
            try await client.query("CHECKPOINT", logger: logger)
        }
    }

    /// The rows job `jobID` inserted besides its delivery rows: its own and its pages'. Counted in the tables
    /// rather than read from `pg_stat_database`, whose counts a busy server process publishes only when idle and at
    /// most once a second, else 10 s later: a connection the relay holds for its statements kept a fan-out's rows
    /// out of the counts read after it. The load test adds the delivery rows it counted per job.
    package func jobAndPageRows(jobID: String) async throws(RelayStoreError) -> Int {
        guard let uuid = UUID(uuidString: jobID) else { return 0 }
        return try await mappingErrors {
            for try await rows in try await client.query(
                """
                SELECT (SELECT count(*) FROM jobs WHERE id = \(uuid))
                     + (SELECT count(*) FROM job_pages WHERE job_id = \(uuid))
                """,
                logger: logger
            ).decode(Int.self) {
                return rows
            }
            return 0
        }
    }

    /// A fan-out's progress as its pages say: devices planned into pages so far, and devices whose page is
    /// done (sent, failed or skipped, and recorded).
    package func jobPageProgress(jobID: String) async throws(RelayStoreError) -> (planned: Int, recorded: Int) {
        guard let uuid = UUID(uuidString: jobID) else { return (0, 0) }
        return try await mappingErrors {
            for try await (planned, recorded) in try await client.query(
                """
                SELECT coalesce(sum(
                           coalesce(range_devices, cardinality(tokens)) + CASE WHEN page = 0 THEN skipped ELSE 0 END
                       ), 0)::int8,
                       coalesce(sum(CASE WHEN state = 'done' THEN devices + skipped ELSE 0 END), 0)::int8
                FROM job_pages WHERE job_id = \(uuid)
                """,
                logger: logger
            ).decode((Int, Int).self) {
                return (planned, recorded)
            }
            return (0, 0)
        }
    }

    /// One second of answered deliveries: how many APNs answered in it, and their latency percentiles.
    package struct AnsweredSecond: Sendable, Hashable {
        /// The second (Unix time).
        package var second: Int64
        /// Deliveries APNs answered in that second.
        package var answered: Int
        /// Median send-to-answer latency, in milliseconds.
        package var p50Milliseconds: Double
        /// 99th percentile of the same.
        package var p99Milliseconds: Double
    }

    /// Deliveries sent since `since` and answered by APNs, second by second.
    package func answeredSeconds(since: Date) async throws(RelayStoreError) -> [AnsweredSecond] {
        return try await mappingErrors {
            var seconds: [AnsweredSecond] = []
            for try await (second, answered, p50, p99) in try await client.query(
                """
                SELECT floor(extract(epoch FROM answered_at))::int8 AS second, count(*)::int8,
                       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms), 0)::float8,
                       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms), 0)::float8
                FROM deliveries
                WHERE sent_at >= \(since) AND answered_at IS NOT NULL AND outcome <> 'skipped'
                GROUP BY 1 ORDER BY 1
                """,
                logger: logger
            ).decode((Int64, Int, Double, Double).self) {
                seconds.append(
                    AnsweredSecond(second: second, answered: answered, p50Milliseconds: p50, p99Milliseconds: p99))
            }
            return seconds
        }
    }

    /// Delivery rows sent since `since`, by job id.
    package func deliveryRowsByJob(since: Date) async throws(RelayStoreError) -> [String: Int] {
        return try await mappingErrors {
            var rows: [String: Int] = [:]
            for try await (job, count) in try await client.query(
                "SELECT job_id, count(*)::int8 FROM deliveries WHERE sent_at >= \(since) GROUP BY job_id",
                logger: logger
            ).decode((String, Int).self) {
                rows[job] = count
            }
            return rows
        }
    }

    /// When job `jobID`'s first delivery row was sent and its last APNs answer came, from its delivery rows;
    /// `nil` each when it has no such row.
    package func deliveryTimespan(jobID: String) async throws(RelayStoreError) -> (
        firstSent: Date?, lastAnswered: Date?
    ) {
        return try await mappingErrors {
            for try await (first, last) in try await client.query(
                "SELECT min(sent_at), max(answered_at) FROM deliveries WHERE job_id = \(jobID)",
                logger: logger
            ).decode((Date?, Date?).self) {
                return (first, last)
            }
            return (nil, nil)
        }
    }

    /// Delivery rows sent since `since`, by outcome and reason (`""` for none).
    package func deliveryOutcomes(since: Date) async throws(RelayStoreError) -> [(
        outcome: String, reason: String, rows: Int
    )] {
        return try await mappingErrors {
            var outcomes: [(outcome: String, reason: String, rows: Int)] = []
            for try await (outcome, reason, count) in try await client.query(
                """
                SELECT outcome, coalesce(reason, ''), count(*)::int8 FROM deliveries WHERE sent_at >= \(since)
                GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
                """,
                logger: logger
            ).decode((String, String, Int).self) {
                outcomes.append((outcome, reason, count))
            }
            return outcomes
        }
    }
}

public import APNs
public import Foundation
import Logging
import PostgresNIO

/// What a device sends when it registers (or re-registers) its APNs token.
public struct DeviceRegistration: Sendable, Hashable {
    /// The tenant's id for the user the device belongs to.
    public var userID: String
    /// The APNs device token in hex; stored lower-cased.
    public var token: String
    /// The device's platform (`ios`).
    public var platform: String
    /// The APNs environment the token was issued for.
    public var environment: TenantConfiguration.Environment
    /// The app's identifier for the device, if it sends one.
    public var deviceID: String?
    /// The app's version.
    public var appVersion: String?
    /// The device's locale (`en_US`).
    public var locale: String?
    /// The device's IANA time zone (`Europe/Paris`).
    public var timeZone: String?
    /// The subscription topics the device subscribes to; each must be one of the tenant's `subscription_topics`.
    public var topics: [String]

    /// Creates a registration.
    public init(
        userID: String,
        token: String,
        platform: String = "ios",
        environment: TenantConfiguration.Environment = .production,
        deviceID: String? = nil,
        appVersion: String? = nil,
        locale: String? = nil,
        timeZone: String? = nil,
        topics: [String] = []
    ) {
        self.userID = userID
        self.token = token
        self.platform = platform
        self.environment = environment
        self.deviceID = deviceID
        self.appVersion = appVersion
        self.locale = locale
        self.timeZone = timeZone
        self.topics = topics
    }
}

/// What a fan-out needs of an active device: whose it is, its token, its environment and its time zone.
public struct DeviceTarget: Sendable, Hashable {
    /// The user who holds the device.
    public var userID: String
    /// The device token, lower-case hex.
    public var token: String
    /// The APNs environment of its build.
    public var environment: TenantConfiguration.Environment
    /// Its IANA time zone, if it sent one.
    public var timeZone: String?

    /// A target with these fields.
    public init(userID: String, token: String, environment: TenantConfiguration.Environment, timeZone: String?) {
        self.userID = userID
        self.token = token
        self.environment = environment
        self.timeZone = timeZone
    }

    /// The target of a stored device.
    public init(_ device: DeviceRecord) {
        self.init(
            userID: device.userID, token: device.token, environment: device.environment, timeZone: device.timeZone)
    }

    /// The columns it is read from, in order.
    static let columns = "user_id, token, environment, time_zone"
}

/// A device as stored in the `devices` table.
public struct DeviceRecord: Sendable, Hashable {
    /// The tenant the device belongs to.
    public var tenantID: String
    /// The user the token belongs to now.
    public var userID: String
    /// The APNs token, lower-case hex.
    public var token: String
    /// The platform (`ios`).
    public var platform: String
    /// The APNs environment of the token.
    public var environment: TenantConfiguration.Environment
    /// The app's identifier for the device.
    public var deviceID: String?
    /// The app's version at the last registration.
    public var appVersion: String?
    /// The locale at the last registration.
    public var locale: String?
    /// The time zone at the last registration.
    public var timeZone: String?
    /// The subscription topics.
    public var topics: [String]
    /// Whether pushes go to this token; `false` after APNs declared it dead.
    public var active: Bool
    /// The time of the registration that wrote this row (the device's, as given to ``RelayStore/registerDevice(tenant:registration:at:)``).
    public var registeredAt: Date
    /// Apple's timestamp from the verdict that deactivated the token, or `nil` while it is alive.
    public var invalidatedAt: Date?
    /// When the row was first inserted.
    public var createdAt: Date
    /// When the row last changed.
    public var updatedAt: Date
}

/// What ``RelayStore/registerDevice(tenant:registration:at:)`` did.
public struct DeviceRegistrationResult: Sendable, Hashable {
    /// How the registration was applied.
    public enum Status: String, Sendable, Hashable {
        /// A new row was inserted.
        case created
        /// The existing row (same slot under the token policy) was overwritten and is active.
        case updated
        /// The existing row was inactive (APNs had declared the token dead) and the registration,
        /// newer than Apple's timestamp, brought it back.
        case reactivated
        /// The token was declared dead by APNs at a time at or after this registration's time, so the device
        /// stays inactive: the registration was ignored, or, when the slot held no row or another token, its row
        /// was written inactive with Apple's timestamp. No push goes to the token.
        case notReactivatedAfterInvalidation = "not_reactivated_after_invalidation"
        /// The stored registration is newer than this one (registrations arriving out of order), so this one
        /// was ignored.
        case ignoredOutdated = "ignored_outdated"
    }

    /// How the registration was applied.
    public var status: Status
    /// The user the token belonged to before, when it moved to another user (`token_moves_to_last_user`).
    public var previousUserID: String?
    /// The token the row held before, when the registration replaced it (`one_per_user_platform`).
    public var replacedToken: String?
    /// The row as stored after the call.
    public var device: DeviceRecord

    /// Whether the registration left an active device (created, updated or reactivated).
    public var applied: Bool {
        status == .created || status == .updated || status == .reactivated
    }
}

extension RelayStore {
    /// Registers a device under the tenant's token policy (read from `tenants.config`), in one transaction.
    ///
    /// - `one_per_user_platform` (anky): one row per (user, platform); the token is replaced on every register.
    /// - `per_user_token_platform_environment` (familyportal): one row per (user, token, platform, environment).
    /// - `token_moves_to_last_user` (circl): one row per token; it moves to whoever registers it last.
    ///
    /// A registration older than the stored one is ignored (``DeviceRegistrationResult/Status/ignoredOutdated``).
    /// A registration of a token APNs declared dead does not bring it back unless `at` is newer than Apple's
    /// timestamp (``DeviceRegistrationResult/Status/notReactivatedAfterInvalidation``); a newer one reactivates it.
    /// Apple's timestamps are remembered per token in `dead_tokens`, so this holds even after the token's row was
    /// deleted (unregistered) or replaced (another token in its slot): an older registration then writes the
    /// device inactive.
    /// The upsert is `INSERT … ON CONFLICT`, so concurrent registrations of one slot never make two rows.
    ///
    /// - Parameters:
    ///   - tenant: The tenant's id; throws ``RelayStoreError/unknownTenant(_:)`` when there is none.
    ///   - registration: What the device sent.
    ///   - at: When the device registered (compared with stored registrations and Apple's timestamps).
    @discardableResult
    public func registerDevice(
        tenant: String,
        registration: DeviceRegistration,
        at: Date
    ) async throws(RelayStoreError) -> DeviceRegistrationResult {
        let token = try Self.normalizedToken(registration.token)
        guard !registration.userID.isEmpty else { throw .invalidDeviceRegistration(reason: "the user id is empty") }
        guard !registration.platform.isEmpty else {
            throw .invalidDeviceRegistration(reason: "the platform is empty")
        }
        let environment = registration.environment.rawValue
        let logger = self.logger
        do {
            return try await database.withTransaction(logger: logger) { transaction in
                var tenantRow: (String, [String])?
                for try await row in try await transaction.query(
                    """
                    SELECT config->>'token_policy',
                           ARRAY(SELECT jsonb_array_elements_text(COALESCE(config->'subscription_topics', '[]')))
                    FROM tenants WHERE id = \(tenant)
                    """,
                    logger: logger
                ).decode((String, [String]).self) {
                    tenantRow = row
                }
                guard let (policyName, allowedTopics) = tenantRow else { throw RelayStoreError.unknownTenant(tenant) }
                guard let policy = TenantConfiguration.TokenPolicy(rawValue: policyName) else {
                    throw RelayStoreError.invalidTenantConfiguration(
                        id: tenant, reason: "unknown token_policy \"\(policyName)\"")
                }
                let unknownTopics = registration.topics.filter { !allowedTopics.contains($0) }
                guard unknownTopics.isEmpty else {
                    throw RelayStoreError.invalidDeviceRegistration(
                        reason: "unknown subscription topic(s) \(unknownTopics.joined(separator: ", ")) for tenant "
                            + "\(tenant) (it has: \(allowedTopics.isEmpty ? "none" : allowedTopics.joined(separator: ", ")))"
                    )
                }
                let topics = Array(Set(registration.topics)).sorted()
                let slot = Self.slot(policy: policy, registration: registration, token: token)

                let previous = try await Self.deviceRows(
                    transaction.query(
                        "SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE tenant_id = \(tenant) AND slot = \(slot) FOR UPDATE",
                        logger: logger
                    )
                ).first

                var deadSince: Date?
                for try await invalidatedAt in try await transaction.query(
                    "SELECT invalidated_at FROM dead_tokens WHERE tenant_id = \(tenant) AND token = \(token)",
                    logger: logger
                ).decode(Date.self) {
                    deadSince = invalidatedAt
                }
                // Apple declared the token dead at or after this registration: it is written inactive.
                let deadAt = deadSince.flatMap { at <= $0 ? $0 : nil }
                let active = deadAt == nil

                var written: DeviceRecord?
                var inserted = false
                for try await row in try await transaction.query(
                    """
                    INSERT INTO devices AS d (
                        tenant_id, slot, user_id, token, platform, environment, device_id, app_version, locale,
                        time_zone, topics, active, registered_at, invalidated_at
                    )
                    VALUES (
                        \(tenant), \(slot), \(registration.userID), \(token), \(registration.platform), \(environment),
                        \(registration.deviceID), \(registration.appVersion), \(registration.locale),
                        \(registration.timeZone), \(topics), \(active), \(at), \(deadAt)::timestamptz
                    )
                    ON CONFLICT (tenant_id, slot) DO UPDATE SET
                        user_id = EXCLUDED.user_id, token = EXCLUDED.token, platform = EXCLUDED.platform,
                        environment = EXCLUDED.environment, device_id = EXCLUDED.device_id,
                        app_version = EXCLUDED.app_version, locale = EXCLUDED.locale, time_zone = EXCLUDED.time_zone,
                        topics = EXCLUDED.topics, active = EXCLUDED.active, registered_at = EXCLUDED.registered_at,
                        invalidated_at = EXCLUDED.invalidated_at, updated_at = now()
                    WHERE d.registered_at <= EXCLUDED.registered_at
                      AND NOT (d.token = EXCLUDED.token AND d.invalidated_at IS NOT NULL
                               AND EXCLUDED.registered_at <= d.invalidated_at)
                    RETURNING \(unescaped: Self.deviceColumns), (xmax = 0)
                    """,
                    logger: logger
                ).decode(WrittenDeviceColumns.self) {
                    written = try Self.device(
                        from: (
                            row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10, row.11,
                            row.12, row.13, row.14
                        ))
                    inserted = row.15
                }

                guard let written else {
                    // The upsert's condition refused it: report why, from the row as it is now.
                    let current = try await Self.deviceRows(
                        transaction.query(
                            "SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE tenant_id = \(tenant) AND slot = \(slot)",
                            logger: logger
                        )
                    )
                    guard let current = current.first else {
                        throw RelayStoreError.databaseUnavailable("device row vanished during registration")
                    }
                    let status: DeviceRegistrationResult.Status =
                        at < current.registeredAt ? .ignoredOutdated : .notReactivatedAfterInvalidation
                    return DeviceRegistrationResult(status: status, device: current)
                }
                let previousRow = inserted ? nil : previous
                let status: DeviceRegistrationResult.Status
                if !written.active {
                    status = .notReactivatedAfterInvalidation
                } else if inserted {
                    status = .created
                } else {
                    status = previousRow?.active == false ? .reactivated : .updated
                }
                return DeviceRegistrationResult(
                    status: status,
                    previousUserID: previousRow.flatMap { $0.userID != written.userID ? $0.userID : nil },
                    replacedToken: previousRow.flatMap { $0.token != written.token ? $0.token : nil },
                    device: written
                )
            }
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Marks every device of `tenant` with `token` inactive after an APNs verdict (410 Unregistered, or a
    /// `BadDeviceToken`), recording Apple's timestamp as `invalidated_at`; returns how many rows it changed.
    ///
    /// Rows registered after `appleTimestamp` are left alone: the device registered the token again after APNs
    /// stopped accepting it. A later registration older than `appleTimestamp` does not reactivate the token, even
    /// once its row is gone: the same statement remembers the latest timestamp per token in `dead_tokens`
    /// (kept for the retention period, see ``maintain(retentionDays:now:)``).
    @discardableResult
    public func deactivateDevice(
        tenant: String,
        token: String,
        appleTimestamp: Date
    ) async throws(RelayStoreError) -> Int {
        let token = try Self.normalizedToken(token)
        return try await countRows(
            """
            WITH remembered AS (
                INSERT INTO dead_tokens AS t (tenant_id, token, invalidated_at)
                SELECT id, \(token), \(appleTimestamp) FROM tenants WHERE id = \(tenant)
                ON CONFLICT (tenant_id, token)
                DO UPDATE SET invalidated_at = GREATEST(t.invalidated_at, EXCLUDED.invalidated_at)
            )
            UPDATE devices
            SET active = false, invalidated_at = GREATEST(invalidated_at, \(appleTimestamp)), updated_at = now()
            WHERE tenant_id = \(tenant) AND token = \(token) AND registered_at <= \(appleTimestamp)
            RETURNING 1::int8
            """
        )
    }

    /// Deletes every device of `tenant` with `token` (the app unregistered it); returns how many rows it deleted.
    @discardableResult
    public func unregisterDevice(tenant: String, token: String) async throws(RelayStoreError) -> Int {
        let token = try Self.normalizedToken(token)
        return try await countRows(
            "DELETE FROM devices WHERE tenant_id = \(tenant) AND token = \(token) RETURNING 1::int8"
        )
    }

    /// Deletes every device of `user` on `platform` in `tenant` (a logout); returns how many rows it deleted.
    @discardableResult
    public func unregisterDevices(tenant: String, user: String, platform: String) async throws(RelayStoreError) -> Int {
        try await countRows(
            """
            DELETE FROM devices
            WHERE tenant_id = \(tenant) AND user_id = \(user) AND platform = \(platform)
            RETURNING 1::int8
            """
        )
    }

    /// The devices of `user` in `tenant`, active or not, the most recently registered first.
    public func devices(tenant: String, user: String) async throws(RelayStoreError) -> [DeviceRecord] {
        do {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND user_id = \(user)
                    ORDER BY registered_at DESC, token
                    """,
                    logger: logger
                )
            )
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// The devices of `tenant` holding `token` (several only under `per_user_token_platform_environment`).
    public func devices(tenant: String, token: String) async throws(RelayStoreError) -> [DeviceRecord] {
        let token = try Self.normalizedToken(token)
        do {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND token = \(token)
                    ORDER BY registered_at DESC, user_id
                    """,
                    logger: logger
                )
            )
        } catch {
            throw relayStoreError(from: error)
        }
    }

    // MARK: - Fan-out

    /// The active devices of `users` in `tenant`, in one query (`user_id = ANY(…)`): by user, then the most
    /// recently registered first. Users without an active device have no rows. Only devices subscribed to every
    /// topic of `subscribedTo` are read.
    public func activeDevices(
        tenant: String,
        users: [String],
        subscribedTo topics: [String] = []
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        guard !users.isEmpty else { return [] }
        do {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND user_id = ANY(\(users)::text[]) AND active
                      AND topics @> \(topics)::text[]
                    ORDER BY user_id, registered_at DESC, token
                    """,
                    logger: logger
                )
            )
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// `tokens` as stored (trimmed, lower-case hex), each once.
    static func normalizedTokens(_ tokens: [String]) -> [String] {
        Array(Set(tokens.map { $0.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() }))
    }

    /// The active devices of `tenant` holding one of `tokens` (hex, either case), in one query, by token.
    ///
    /// Strings that are not tokens match nothing. Only devices subscribed to every topic of `subscribedTo` are read.
    public func activeDevices(
        tenant: String,
        tokens: [String],
        subscribedTo topics: [String] = []
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        let normalized = Self.normalizedTokens(tokens)
        guard !normalized.isEmpty else { return [] }
        do {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND token = ANY(\(normalized)::text[]) AND active
                      AND topics @> \(topics)::text[]
                    ORDER BY token, user_id, registered_at DESC
                    """,
                    logger: logger
                )
            )
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// One page of the active devices of `tenant` subscribed to `topic`, in token order: those whose token
    /// comes after `after` (`nil` for the first page), about `limit` of them.
    ///
    /// Page on with the last row's token as `after` until a page has fewer than `limit` rows. A page never
    /// splits the rows of one token (several users or environments may hold it), so it can have a few more
    /// than `limit` rows.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` when `limit` is not positive.
    public func activeDevices(
        tenant: String,
        topic: String,
        after: String? = nil,
        limit: Int
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        guard limit > 0 else { throw .invalidArgument("the page size \(limit) is not positive") }
        let after = after?.lowercased() ?? ""
        return try await deviceTargets(
            """
            WITH page AS (
                SELECT token FROM devices
                WHERE tenant_id = \(tenant) AND active AND topics @> ARRAY[\(topic)]::text[]
                  AND token > \(after)
                ORDER BY token LIMIT \(limit)
            )
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND topics @> ARRAY[\(topic)]::text[]
              AND token > \(after) AND token <= (SELECT max(token) FROM page)
            ORDER BY token, user_id, environment
            """
        )
    }

    /// The active devices of `tenant` holding one of `tokens`, which are as stored (lower-case hex: a fan-out
    /// page's tokens), in one query, by token.
    public func deviceTargets(tenant: String, storedTokens tokens: [String]) async throws(RelayStoreError)
        -> [DeviceTarget]
    {
        guard !tokens.isEmpty else { return [] }
        return try await deviceTargets(
            """
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND token = ANY(\(tokens)::text[]) AND active
            ORDER BY token, user_id, registered_at DESC
            """,
            preparedAs: StoredTokenDevices.self
        )
    }

    /// The active devices of `tenant` subscribed to `topic` whose token lies from `first` through `last` (as
    /// stored), by token: a topic fan-out page read again by one range scan instead of a lookup per token
    /// (a quarter of the database's time for a page of 1,000 tokens).
    public func activeDevices(
        tenant: String,
        topic: String,
        storedTokensFrom first: String,
        through last: String
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        try await deviceTargets(
            """
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND topics @> ARRAY[\(topic)]::text[]
              AND token >= \(first) AND token <= \(last)
            ORDER BY token, user_id, registered_at DESC
            """
        )
    }

    /// The devices of a topic range page as registered now (the active devices subscribed to the range's topic
    /// whose token comes after its `after` and is at most its `last`), less those of `excludedUsers`, by token.
    public func activeDevices(
        tenant: String,
        in range: TopicRange,
        excludedUsers: [String]
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        try await deviceTargets(
            """
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND topics @> ARRAY[\(range.topic)]::text[]
              AND token > \(range.after) AND token <= \(range.last) AND user_id <> ALL(\(excludedUsers)::text[])
            ORDER BY token, user_id, registered_at DESC
            """
        )
    }

    /// The targets `query` selects (``DeviceTarget/columns``), read as one row of four arrays: a row per device
    /// cost the relay more to decode than the arrays' elements (a fan-out reads each device twice: 1.9 → 1.4 CPU
    /// seconds per 100,000 notifications). The arrays keep the order of `query`'s `ORDER BY`: PostgreSQL feeds
    /// a plain aggregate over a sorted subquery in the subquery's order.
    private func deviceTargets(_ query: PostgresQuery) async throws(RelayStoreError) -> [DeviceTarget] {
        do {
            return try Self.targets(in: try await database.query(Self.asArrays(query), logger: logger).collect())
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// ``deviceTargets(_:)`` of a statement prepared as `name`.
    private func deviceTargets<Name: PreparedStatementName>(
        _ query: PostgresQuery, preparedAs name: Name.Type
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        do {
            return try Self.targets(
                in: try await database.query(Self.asArrays(query), preparedAs: name, logger: logger))
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// `query`'s rows (``DeviceTarget/columns``) as one row of four arrays.
    private static func asArrays(_ query: PostgresQuery) -> PostgresQuery {
        PostgresQuery(
            unsafeSQL: """
                SELECT coalesce(array_agg(user_id), '{}'), coalesce(array_agg(token), '{}'),
                       coalesce(array_agg(environment), '{}'), coalesce(array_agg(coalesce(time_zone, '')), '{}')
                FROM (\(query.sql)) selected
                """,
            binds: query.binds
        )
    }

    /// The targets in the arrays of ``asArrays(_:)``.
    private static func targets(in rows: [PostgresRow]) throws -> [DeviceTarget] {
        var targets: [DeviceTarget] = []
        for row in rows {
            let (users, tokens, environments, timeZones) = try row.decode(([String], [String], [String], [String]).self)
            targets += try Self.targets(users: users, tokens: tokens, environments: environments, timeZones: timeZones)
        }
        return targets
    }

    /// The targets of four arrays side by side (``DeviceTarget/columns``, an empty time zone for none).
    static func targets(
        users: [String], tokens: [String], environments: [String], timeZones: [String]
    ) throws(RelayStoreError) -> [DeviceTarget] {
        guard users.count == tokens.count, users.count == environments.count, users.count == timeZones.count else {
            throw .databaseUnavailable("device arrays of different lengths")
        }
        var targets: [DeviceTarget] = []
        targets.reserveCapacity(users.count)
        for index in users.indices {
            guard let environment = TenantConfiguration.Environment(rawValue: environments[index]) else {
                throw .databaseUnavailable("device row with unknown environment \(environments[index])")
            }
            targets.append(
                DeviceTarget(
                    userID: users[index], token: tokens[index], environment: environment,
                    timeZone: timeZones[index].isEmpty ? nil : timeZones[index]))
        }
        return targets
    }

    /// Apple's latest invalidation timestamp for `token` in `tenant`, remembered by
    /// ``deactivateDevice(tenant:token:appleTimestamp:)`` even after the token's rows are gone; `nil` if none.
    public func deadTokenTimestamp(tenant: String, token: String) async throws(RelayStoreError) -> Date? {
        let token = try Self.normalizedToken(token)
        do {
            for try await invalidatedAt in try await database.query(
                "SELECT invalidated_at FROM dead_tokens WHERE tenant_id = \(tenant) AND token = \(token)",
                logger: logger
            ).decode(Date.self) {
                return invalidatedAt
            }
            return nil
        } catch {
            throw relayStoreError(from: error)
        }
    }

    // MARK: - Helpers

    typealias DeviceColumns = (
        String, String, String, String, String, String?, String?, String?, String?, [String], Bool, Date, Date?,
        Date, Date
    )
    typealias WrittenDeviceColumns = (
        String, String, String, String, String, String?, String?, String?, String?, [String], Bool, Date, Date?,
        Date, Date, Bool
    )

    static let deviceColumns = """
        tenant_id, user_id, token, platform, environment, device_id, app_version, locale, time_zone, topics, \
        active, registered_at, invalidated_at, created_at, updated_at
        """

    /// A token as stored: trimmed, lower-cased, non-empty hex of even length.
    static func normalizedToken(_ token: String) throws(RelayStoreError) -> String {
        let normalized = token.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let isHex = normalized.unicodeScalars.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) }
        guard !normalized.isEmpty, isHex, normalized.count.isMultiple(of: 2), normalized.count <= 400 else {
            throw .invalidDeviceRegistration(reason: "the token \"\(token)\" is not a device token in hex")
        }
        return normalized
    }

    /// The unique key of the row a registration writes under `policy`: a JSON array, so no separator can be
    /// forged by a user id.
    static func slot(policy: TenantConfiguration.TokenPolicy, registration: DeviceRegistration, token: String) -> String
    {
        let parts: [String] =
            switch policy {
            case .onePerUserPlatform: ["user_platform", registration.userID, registration.platform]
            case .perUserTokenPlatformEnvironment:
                [
                    "user_token_platform_environment", registration.userID, token, registration.platform,
                    registration.environment.rawValue,
                ]
            case .tokenMovesToLastUser: ["token", token]
            }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(parts), as: UTF8.self)) ?? parts.joined(separator: "\u{1F}")
    }

    static func device(from columns: DeviceColumns) throws(RelayStoreError) -> DeviceRecord {
        guard let environment = TenantConfiguration.Environment(rawValue: columns.4) else {
            throw .databaseUnavailable("device row with unknown environment \(columns.4)")
        }
        return DeviceRecord(
            tenantID: columns.0, userID: columns.1, token: columns.2, platform: columns.3, environment: environment,
            deviceID: columns.5, appVersion: columns.6, locale: columns.7, timeZone: columns.8, topics: columns.9,
            active: columns.10, registeredAt: columns.11, invalidatedAt: columns.12, createdAt: columns.13,
            updatedAt: columns.14)
    }

    static func deviceRows(_ rows: PostgresRowSequence) async throws -> [DeviceRecord] {
        var devices: [DeviceRecord] = []
        for try await columns in rows.decode(DeviceColumns.self) {
            devices.append(try device(from: columns))
        }
        return devices
    }

    /// Runs a statement that returns one row per affected row and counts them.
    func countRows(_ query: PostgresQuery) async throws(RelayStoreError) -> Int {
        do {
            var count = 0
            for try await _ in try await database.query(query, logger: logger).decode(Int.self) {
                count += 1
            }
            return count
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// ``countRows(_:)`` of a hot path's statement, prepared as `name`.
    func countRows<Name: PreparedStatementName>(_ query: PostgresQuery, preparedAs name: Name.Type)
        async throws(RelayStoreError) -> Int
    {
        do {
            return try await database.query(query, preparedAs: name, logger: logger).count
        } catch {
            throw relayStoreError(from: error)
        }
    }
}

/// The fan-out's device read by token, prepared (``PreparedStatementName``). The reads by topic are planned
/// at each call: a plan made for any topic read every device of a popular one through the topic index (44 ms a
/// page instead of 2), and the best plan for a rare topic is another one.
private enum StoredTokenDevices: PreparedStatementName {}

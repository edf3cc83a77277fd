import APNs
public import Foundation
import Logging
import PostgresNIO

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
        return try await mappingErrors {
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

    /// The devices of `user` in `tenant`, active or not, the most recently registered first (then by token,
    /// descending), at most `limit`, after `key` (the page before's last device) when given.
    public func devices(
        tenant: String, user: String, limit: Int = 1_000, after key: DeviceKey? = nil
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        let micros = key?.registeredAtMicroseconds ?? 0
        return try await mappingErrors {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND user_id = \(user)
                      AND (\(key == nil) OR (registered_at, token)
                        < ('epoch'::timestamptz + \(micros)::int8 * interval '1 microsecond', \(key?.token ?? "")::text))
                    ORDER BY registered_at DESC, token DESC LIMIT \(limit)
                    """,
                    logger: logger
                )
            )
        }
    }

    /// The devices of `tenant` holding `token` (several only under `per_user_token_platform_environment`).
    public func devices(tenant: String, token: String) async throws(RelayStoreError) -> [DeviceRecord] {
        let token = try Self.normalizedToken(token)
        return try await mappingErrors {
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
        }
    }

    /// Apple's latest invalidation timestamp for `token` in `tenant`, remembered by
    /// ``deactivateDevice(tenant:token:appleTimestamp:)`` even after the token's rows are gone; `nil` if none.
    public func deadTokenTimestamp(tenant: String, token: String) async throws(RelayStoreError) -> Date? {
        let token = try Self.normalizedToken(token)
        return try await mappingErrors {
            for try await invalidatedAt in try await database.query(
                "SELECT invalidated_at FROM dead_tokens WHERE tenant_id = \(tenant) AND token = \(token)",
                logger: logger
            ).decode(Date.self) {
                return invalidatedAt
            }
            return nil
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
            throw .corruptRow("device row with unknown environment \(columns.4)")
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

}

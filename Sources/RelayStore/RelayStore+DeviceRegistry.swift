package import Foundation
import Logging
import PostgresNIO
import PushRelayProtocol

extension RelayStore {
    /// Registers a device under the tenant's token policy (read from `tenants.config`), in one statement.
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
    package func registerDevice(
        tenant: String,
        registration: DeviceRegistration,
        at: Date
    ) async throws(RelayStoreError) -> DeviceRegistrationResult {
        let token: String
        switch registration.provider.storedToken(registration.token) {
        case .success(let stored): token = stored
        case .failure(let refusal): throw .invalidDeviceRegistration(reason: refusal.message)
        }
        guard registration.provider.isWellFormed else {
            throw .invalidDeviceRegistration(reason: "\"\(registration.provider)\" is not a provider name")
        }
        guard !registration.userID.isEmpty else { throw .invalidDeviceRegistration(reason: "the user id is empty") }
        guard !registration.platform.isEmpty else {
            throw .invalidDeviceRegistration(reason: "the platform is empty")
        }
        let topics = Array(Set(registration.topics)).sorted()
        var bindings = PostgresBindings(capacity: 16)
        bindings.append(tenant)  // $1
        for policy in TenantConfiguration.TokenPolicy.allCases {  // $2, $3, $4
            bindings.append(Self.slot(policy: policy, registration: registration, token: token))
        }
        bindings.append(token)  // $5
        bindings.append(registration.userID)  // $6
        bindings.append(registration.platform)  // $7
        bindings.append(registration.environment.rawValue)  // $8
        bindings.append(registration.deviceID)  // $9
        bindings.append(registration.appVersion)  // $10
        bindings.append(registration.locale)  // $11
        bindings.append(registration.timeZone)  // $12
        bindings.append(topics)  // $13
        bindings.append(at)  // $14
        bindings.append(registration.provider.rawValue)  // $15
        let rows = try await mappingErrors {
            try await database.query(
                PostgresQuery(unsafeSQL: Self.registration, binds: bindings), preparedAs: RegisterDevice.self,
                logger: logger)
        }
        var tenantRow: (policy: String?, topics: [String])?
        var previous: DeviceRecord?
        var written: (device: DeviceRecord, inserted: Bool)?
        try await mappingErrors {
            for row in rows {
                let cells = row.makeRandomAccess()
                switch try cells[0].decode(String.self) {
                case "tenant": tenantRow = (try cells[1].decode(String?.self), try cells[2].decode([String].self))
                case "previous": previous = try Self.device(in: cells, from: 4)
                default: written = (try Self.device(in: cells, from: 4), try cells[3].decode(Bool.self))
                }
            }
        }
        guard let tenantRow else { throw .unknownTenant(tenant) }
        guard let policyName = tenantRow.policy, TenantConfiguration.TokenPolicy(rawValue: policyName) != nil else {
            throw .invalidTenantConfiguration(id: tenant, reason: "unknown token_policy \"\(tenantRow.policy ?? "")\"")
        }
        let unknownTopics = topics.filter { !tenantRow.topics.contains($0) }
        guard unknownTopics.isEmpty else {
            let allowed = tenantRow.topics.isEmpty ? "none" : tenantRow.topics.joined(separator: ", ")
            throw .invalidDeviceRegistration(
                reason: "unknown subscription topic(s) \(unknownTopics.joined(separator: ", ")) for tenant "
                    + "\(tenant) (it has: \(allowed))")
        }
        guard let written else {
            // The upsert's condition refused it: report why, from the row as it is (locked by the statement, or
            // committed by another registration of the slot since the statement's snapshot).
            let current: DeviceRecord
            if let previous {
                current = previous
            } else {
                current = try await currentDevice(tenant: tenant, registration: registration, token: token)
            }
            let status: DeviceRegistrationResult.Status =
                at < current.registeredAt ? .ignoredOutdated : .notReactivatedAfterInvalidation
            return DeviceRegistrationResult(status: status, device: current)
        }
        let previousRow = written.inserted ? nil : previous
        let status: DeviceRegistrationResult.Status
        if !written.device.active {
            status = .notReactivatedAfterInvalidation
        } else if written.inserted {
            status = .created
        } else {
            status = previousRow?.active == false ? .reactivated : .updated
        }
        return DeviceRegistrationResult(
            status: status,
            previousUserID: previousRow.flatMap { $0.userID != written.device.userID ? $0.userID : nil },
            replacedToken: previousRow.flatMap { $0.token != written.device.token ? $0.token : nil },
            device: written.device
        )
    }

    /// The statement of ``registerDevice(tenant:registration:at:)``: the tenant's policy picks the slot among the
    /// three given (`$2`…`$4`, in ``TenantConfiguration/TokenPolicy``'s order); the slot's row is locked, then
    /// upserted unless it is newer or the token's death is (`dead_tokens`), and unless a topic is not the
    /// tenant's. Rows: `tenant` (its policy and topics), `previous` (the slot's row before) and `written` (the row
    /// written and whether it was inserted), each with the device columns from the fifth on.
    ///
    /// The upsert reads `previous` so that the lock is taken before the row changes (a statement's parts run in no
    /// set order otherwise, and a row this statement changed could not be locked by it).
    private static let registration: String = {
        let policies = TenantConfiguration.TokenPolicy.allCases.enumerated().map { index, policy in
            "WHEN '\(policy.rawValue)' THEN $\(index + 2)"
        }
        let noDevice = """
            NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, \
            NULL::text, NULL::text[], NULL::bool, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, \
            NULL::timestamptz, NULL::text
            """
        return """
            WITH tenant AS (
                SELECT config->>'token_policy' AS policy,
                       ARRAY(SELECT jsonb_array_elements_text(COALESCE(config->'subscription_topics', '[]'))) AS topics,
                       CASE config->>'token_policy' \(policies.joined(separator: " ")) END AS slot
                FROM tenants WHERE id = $1
            ), previous AS (
                SELECT d.* FROM devices d JOIN tenant t ON d.slot = t.slot WHERE d.tenant_id = $1 FOR UPDATE OF d
            ), dead AS (
                SELECT max(invalidated_at) AS at FROM dead_tokens
                WHERE tenant_id = $1 AND token = $5 AND invalidated_at >= $14
            ), written AS (
                INSERT INTO devices AS d (
                    tenant_id, slot, user_id, token, platform, environment, device_id, app_version, locale,
                    time_zone, topics, active, registered_at, invalidated_at, provider
                )
                SELECT $1, t.slot, $6, $5, $7, $8, $9, $10, $11, $12, $13, dead.at IS NULL, $14, dead.at, $15
                FROM tenant t CROSS JOIN dead LEFT JOIN previous p ON true
                WHERE t.slot IS NOT NULL AND $13::text[] <@ t.topics
                ON CONFLICT (tenant_id, slot) DO UPDATE SET
                    user_id = EXCLUDED.user_id, token = EXCLUDED.token, platform = EXCLUDED.platform,
                    environment = EXCLUDED.environment, device_id = EXCLUDED.device_id,
                    app_version = EXCLUDED.app_version, locale = EXCLUDED.locale, time_zone = EXCLUDED.time_zone,
                    topics = EXCLUDED.topics, active = EXCLUDED.active, registered_at = EXCLUDED.registered_at,
                    invalidated_at = EXCLUDED.invalidated_at, provider = EXCLUDED.provider, updated_at = now()
                WHERE d.registered_at <= EXCLUDED.registered_at
                  AND NOT (d.token = EXCLUDED.token AND d.invalidated_at IS NOT NULL
                           AND EXCLUDED.registered_at <= d.invalidated_at)
                RETURNING \(deviceColumns), (xmax = 0) AS inserted
            )
            SELECT 'tenant', policy, topics, NULL::bool, \(noDevice) FROM tenant
            UNION ALL
            SELECT 'previous', NULL, NULL, NULL, \(deviceColumns) FROM previous
            UNION ALL
            SELECT 'written', NULL, NULL, inserted, \(deviceColumns) FROM written
            """
    }()

    /// The row in the slot of `registration` as committed now, for a registration the upsert refused although
    /// the statement's snapshot had no row in the slot (another registration of it committed meanwhile).
    private func currentDevice(
        tenant: String, registration: DeviceRegistration, token: String
    ) async throws(RelayStoreError) -> DeviceRecord {
        let slots = TenantConfiguration.TokenPolicy.allCases.map {
            Self.slot(policy: $0, registration: registration, token: token)
        }
        let found = try await mappingErrors {
            try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND slot = ANY(\(slots))
                    ORDER BY registered_at DESC LIMIT 1
                    """,
                    logger: logger))
        }
        guard let current = found.first else {
            throw .databaseUnavailable("device row vanished during registration")
        }
        return current
    }

    /// Marks every device of `tenant` with `token` inactive after an APNs verdict (410 Unregistered, or a
    /// `BadDeviceToken`), recording Apple's timestamp as `invalidated_at`; returns how many rows it changed.
    ///
    /// Rows registered after `appleTimestamp` are left alone: the device registered the token again after APNs
    /// stopped accepting it. A later registration older than `appleTimestamp` does not reactivate the token, even
    /// once its row is gone: the same statement remembers the latest timestamp per token in `dead_tokens`
    /// (kept for the retention period, see ``maintain(retentionDays:now:)``).
    @discardableResult
    package func deactivateDevice(
        tenant: String,
        token: String,
        appleTimestamp: Date
    ) async throws(RelayStoreError) -> Int {
        let token = PushProvider.canonicalForm(of: token)
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
    package func unregisterDevice(tenant: String, token: String) async throws(RelayStoreError) -> Int {
        let forms = PushProvider.storedForms(of: token)
        return try await countRows(
            "DELETE FROM devices WHERE tenant_id = \(tenant) AND token = ANY(\(forms)::text[]) RETURNING 1::int8"
        )
    }

    /// Deletes every device of `user` on `platform` in `tenant` (a logout); returns how many rows it deleted.
    @discardableResult
    package func unregisterDevices(tenant: String, user: String, platform: String) async throws(RelayStoreError) -> Int
    {
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
    package func devices(
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
    package func devices(tenant: String, token: String) async throws(RelayStoreError) -> [DeviceRecord] {
        let forms = PushProvider.storedForms(of: token)
        return try await mappingErrors {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND token = ANY(\(forms)::text[])
                    ORDER BY registered_at DESC, user_id
                    """,
                    logger: logger
                )
            )
        }
    }

    /// Apple's latest invalidation timestamp for `token` in `tenant`, remembered by
    /// ``deactivateDevice(tenant:token:appleTimestamp:)`` even after the token's rows are gone; `nil` if none.
    package func deadTokenTimestamp(tenant: String, token: String) async throws(RelayStoreError) -> Date? {
        let token = PushProvider.canonicalForm(of: token)
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
        Date, Date, String
    )

    static let deviceColumns = """
        tenant_id, user_id, token, platform, environment, device_id, app_version, locale, time_zone, topics, \
        active, registered_at, invalidated_at, created_at, updated_at, provider
        """

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
            tenantID: columns.0, userID: columns.1, token: columns.2, provider: PushProvider(rawValue: columns.15),
            platform: columns.3, environment: environment, deviceID: columns.5, appVersion: columns.6,
            locale: columns.7, timeZone: columns.8, topics: columns.9, active: columns.10, registeredAt: columns.11,
            invalidatedAt: columns.12, createdAt: columns.13, updatedAt: columns.14)
    }

    /// The device in `row`'s columns from `first` on, in ``deviceColumns``' order.
    static func device(in row: PostgresRandomAccessRow, from first: Int) throws -> DeviceRecord {
        func cell<Value: PostgresDecodable>(_ offset: Int) throws -> Value {
            try row[first + offset].decode(Value.self)
        }
        return try device(
            from: (
                cell(0), cell(1), cell(2), cell(3), cell(4), cell(5), cell(6), cell(7), cell(8), cell(9), cell(10),
                cell(11), cell(12), cell(13), cell(14), cell(15)
            ))
    }

    static func deviceRows(_ rows: PostgresRowSequence) async throws -> [DeviceRecord] {
        var devices: [DeviceRecord] = []
        for try await columns in rows.decode(DeviceColumns.self) {
            devices.append(try device(from: columns))
        }
        return devices
    }

}

/// The registration of a device, prepared (``PreparedStatementName``).
private enum RegisterDevice: PreparedStatementName {}

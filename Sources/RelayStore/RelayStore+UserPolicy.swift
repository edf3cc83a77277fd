package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    // MARK: - Preferences

    /// Stores `user`'s settings per notification type (`true`: wanted, `false`: opted out) in one
    /// `INSERT … SELECT FROM UNNEST … ON CONFLICT` statement.
    ///
    /// Types not in `settings` keep what they had; an empty `settings` changes nothing. Whether each type exists in
    /// the tenant's configuration, and whether it may be turned off, is for the caller to check.
    ///
    /// - Throws: ``RelayStoreError/unknownTenant(_:)``; ``RelayStoreError/invalidArgument(_:)`` for an empty user
    ///   id or notification type.
    package func setPreferences(tenant: String, user: String, _ settings: [String: Bool]) async throws(RelayStoreError)
    {
        guard !user.isEmpty else { throw .invalidArgument("the user id is empty") }
        guard !settings.isEmpty else { return }
        guard !settings.keys.contains("") else { throw .invalidArgument("a notification type is empty") }
        let types = settings.keys.sorted()
        let enabled = types.map { settings[$0] ?? true }
        do {
            try await database.query(
                """
                INSERT INTO preferences (tenant_id, user_id, notification_type, enabled)
                SELECT \(tenant), \(user), t, e FROM UNNEST(\(types)::text[], \(enabled)::bool[]) AS x (t, e)
                ON CONFLICT (tenant_id, user_id, notification_type)
                DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = now()
                """,
                logger: logger
            )
        } catch let error as PSQLError where Self.isForeignKeyViolation(error) {
            throw .unknownTenant(tenant)
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// `user`'s stored settings per notification type; types never set are absent (their default applies).
    package func preferences(tenant: String, user: String) async throws(RelayStoreError) -> [String: Bool] {
        try await preferences(tenant: tenant, users: [user])[user] ?? [:]
    }

    /// The stored settings of each of `users` that has any, per notification type, in one query (for a fan-out).
    package func preferences(tenant: String, users: [String]) async throws(RelayStoreError) -> [String: [String: Bool]]
    {
        guard !users.isEmpty else { return [:] }
        return try await mappingErrors {
            var settings: [String: [String: Bool]] = [:]
            for row in try await database.query(
                """
                SELECT user_id, notification_type, enabled FROM preferences
                WHERE tenant_id = \(tenant) AND user_id = ANY(\(users)::text[])
                """,
                preparedAs: UsersPreferences.self, logger: logger
            ) {
                let (user, type, enabled) = try row.decode((String, String, Bool).self)
                settings[user, default: [:]][type] = enabled
            }
            return settings
        }
    }

    // MARK: - Mutes

    /// Mutes a thread or a scope for `user`, until `until` or, with `nil`, until cleared; setting it again
    /// replaces its end. Returns the mute as stored.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` unless exactly one of `threadID` and `scope` is given
    ///   (an empty string counts as none) and the user id is not empty; ``RelayStoreError/unknownTenant(_:)``.
    @discardableResult
    package func setMute(
        tenant: String,
        user: String,
        threadID: String?,
        scope: String?,
        until: Date? = nil
    ) async throws(RelayStoreError) -> MuteRecord {
        let (kind, value) = try Self.muteTarget(user: user, threadID: threadID, scope: scope)
        do {
            var stored: MuteRecord?
            for try await (kind, value, until) in try await database.query(
                """
                INSERT INTO mutes (tenant_id, user_id, kind, value, until)
                VALUES (\(tenant), \(user), \(kind), \(value), \(until))
                ON CONFLICT (tenant_id, user_id, kind, value) DO UPDATE SET until = EXCLUDED.until, updated_at = now()
                RETURNING kind, value, until
                """,
                logger: logger
            ).decode((String, String, Date?).self) {
                stored = Self.mute(user: user, kind: kind, value: value, until: until)
            }
            guard let stored else { throw RelayStoreError.databaseUnavailable("the mute was not stored") }
            return stored
        } catch let error as PSQLError where Self.isForeignKeyViolation(error) {
            throw .unknownTenant(tenant)
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// Lifts `user`'s mute of a thread or a scope (exactly one of them); returns how many mutes it removed (0 or 1).
    @discardableResult
    package func clearMute(
        tenant: String,
        user: String,
        threadID: String?,
        scope: String?
    ) async throws(RelayStoreError) -> Int {
        let (kind, value) = try Self.muteTarget(user: user, threadID: threadID, scope: scope)
        return try await countRows(
            """
            DELETE FROM mutes WHERE tenant_id = \(tenant) AND user_id = \(user) AND kind = \(kind) AND value = \(value)
            RETURNING 1::int8
            """
        )
    }

    /// `user`'s mutes in force at `now` (no end, or an end after `now`): thread mutes first, each kind by name.
    package func mutes(tenant: String, user: String, now: Date = Date()) async throws(RelayStoreError) -> [MuteRecord] {
        try await mutes(tenant: tenant, users: [user], now: now)
    }

    /// The mutes in force at `now` of every one of `users`, in one query (for a fan-out), by user, then as
    /// ``mutes(tenant:user:now:)`` orders them.
    package func mutes(tenant: String, users: [String], now: Date = Date()) async throws(RelayStoreError)
        -> [MuteRecord]
    {
        guard !users.isEmpty else { return [] }
        return try await mappingErrors {
            var records: [MuteRecord] = []
            for row in try await database.query(
                """
                SELECT user_id, kind, value, until FROM mutes
                WHERE tenant_id = \(tenant) AND user_id = ANY(\(users)::text[])
                  AND (until IS NULL OR until > \(now))
                ORDER BY user_id, kind DESC, value
                """,
                preparedAs: UsersMutes.self, logger: logger
            ) {
                let (user, kind, value, until) = try row.decode((String, String, String, Date?).self)
                records.append(Self.mute(user: user, kind: kind, value: value, until: until))
            }
            return records
        }
    }

    // MARK: - Presence

    /// Records that `user` is active in thread `threadID` until `until` (replacing an earlier time), or with
    /// `nil` that they left it.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` for an empty user or thread id;
    ///   ``RelayStoreError/unknownTenant(_:)``.
    package func setPresence(
        tenant: String,
        user: String,
        threadID: String,
        until: Date?
    ) async throws(RelayStoreError) {
        guard !user.isEmpty else { throw .invalidArgument("the user id is empty") }
        guard !threadID.isEmpty else { throw .invalidArgument("the thread id is empty") }
        do {
            if let until {
                try await database.query(
                    """
                    INSERT INTO presence (tenant_id, user_id, thread_id, until)
                    VALUES (\(tenant), \(user), \(threadID), \(until))
                    ON CONFLICT (tenant_id, user_id, thread_id) DO UPDATE SET until = EXCLUDED.until, updated_at = now()
                    """,
                    logger: logger
                )
            } else {
                try await database.query(
                    """
                    DELETE FROM presence WHERE tenant_id = \(tenant) AND user_id = \(user) AND thread_id = \(threadID)
                    """,
                    logger: logger
                )
            }
        } catch let error as PSQLError where Self.isForeignKeyViolation(error) {
            throw .unknownTenant(tenant)
        } catch {
            throw relayStoreError(from: error)
        }
    }

    /// The threads `user` is active in at `now`, with when each presence ends.
    package func activeThreads(tenant: String, user: String, now: Date = Date()) async throws(RelayStoreError)
        -> [String: Date]
    {
        try await activeThreads(tenant: tenant, users: [user], now: now)[user] ?? [:]
    }

    /// The threads each of `users` is active in at `now`, with when each presence ends, in one query (for a
    /// fan-out); users active nowhere are absent.
    package func activeThreads(tenant: String, users: [String], now: Date = Date()) async throws(RelayStoreError)
        -> [String: [String: Date]]
    {
        guard !users.isEmpty else { return [:] }
        return try await mappingErrors {
            var threads: [String: [String: Date]] = [:]
            for row in try await database.query(
                """
                SELECT user_id, thread_id, until FROM presence
                WHERE tenant_id = \(tenant) AND user_id = ANY(\(users)::text[]) AND until > \(now)
                """,
                preparedAs: UsersActiveThreads.self, logger: logger
            ) {
                let (user, thread, until) = try row.decode((String, String, Date).self)
                threads[user, default: [:]][thread] = until
            }
            return threads
        }
    }

    // MARK: - Helpers

    /// The `(kind, value)` a mute is stored under; exactly one of `threadID` and `scope` may be given.
    private static func muteTarget(
        user: String,
        threadID: String?,
        scope: String?
    ) throws(RelayStoreError) -> (kind: String, value: String) {
        guard !user.isEmpty else { throw .invalidArgument("the user id is empty") }
        switch (threadID.flatMap { $0.isEmpty ? nil : $0 }, scope.flatMap { $0.isEmpty ? nil : $0 }) {
        case (let thread?, nil): return ("thread", thread)
        case (nil, let scope?): return ("scope", scope)
        case (.some, .some): throw .invalidArgument("a mute names a thread or a scope, not both")
        case (nil, nil): throw .invalidArgument("a mute needs a thread id or a scope")
        }
    }

    /// The mute of a `mutes` row: a thread mute when `kind` is `thread`, else a scope mute.
    static func mute(user: String, kind: String, value: String, until: Date?) -> MuteRecord {
        kind == "thread"
            ? MuteRecord(userID: user, threadID: value, until: until)
            : MuteRecord(userID: user, scope: value, until: until)
    }
}

/// The fan-out's policy reads, prepared (``PreparedStatementName``).
private enum UsersPreferences: PreparedStatementName {}
private enum UsersMutes: PreparedStatementName {}
private enum UsersActiveThreads: PreparedStatementName {}

import Foundation
import Logging
import PostgresNIO
import PushRelayProtocol

extension RelayStore {
    /// The active devices of `users` in `tenant`, in one query (`user_id = ANY(…)`): by user, then the most
    /// recently registered first. Users without an active device have no rows. Only devices subscribed to every
    /// topic of `subscribedTo`, or listing no topics (those take every type), are read.
    package func activeDevices(
        tenant: String,
        users: [String],
        subscribedTo topics: [String] = []
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        guard !users.isEmpty else { return [] }
        return try await mappingErrors {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND user_id = ANY(\(users)::text[]) AND active
                      AND (topics @> \(topics)::text[] OR topics = '{}')
                    ORDER BY user_id, registered_at DESC, token
                    """,
                    logger: logger
                )
            )
        }
    }

    /// The active devices of listed `recipients` (users or tokens), as ``activeDevices(tenant:users:subscribedTo:)``
    /// or ``activeDevices(tenant:tokens:subscribedTo:)`` read them.
    package func activeDevices(
        tenant: String,
        listed recipients: ListedRecipients,
        subscribedTo topics: [String] = []
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        switch recipients {
        case .users(let users): try await activeDevices(tenant: tenant, users: users, subscribedTo: topics)
        case .tokens(let tokens): try await activeDevices(tenant: tenant, tokens: tokens, subscribedTo: topics)
        }
    }

    /// Every form `tokens` may be stored in (``PushRelayProtocol/PushProvider/storedForms(of:)``), each once.
    static func storedForms(of tokens: [String]) -> [String] {
        Array(Set(tokens.flatMap(PushProvider.storedForms(of:))))
    }

    /// The active devices of `tenant` holding one of `tokens` (an APNs token in either case, any other exactly), in
    /// one query, by token.
    ///
    /// Strings that are not tokens match nothing. Only devices subscribed to every topic of `subscribedTo`, or listing
    /// no topics, are read.
    package func activeDevices(
        tenant: String,
        tokens: [String],
        subscribedTo topics: [String] = []
    ) async throws(RelayStoreError) -> [DeviceRecord] {
        let normalized = Self.storedForms(of: tokens)
        guard !normalized.isEmpty else { return [] }
        return try await mappingErrors {
            return try await Self.deviceRows(
                database.query(
                    """
                    SELECT \(unescaped: Self.deviceColumns) FROM devices
                    WHERE tenant_id = \(tenant) AND token = ANY(\(normalized)::text[]) AND active
                      AND (topics @> \(topics)::text[] OR topics = '{}')
                    ORDER BY token, user_id, registered_at DESC
                    """,
                    logger: logger
                )
            )
        }
    }

    /// One page of the active devices of `tenant` subscribed to `topic` (or listing no topics), in token order: those whose token
    /// comes after `after` (`nil` for the first page), about `limit` of them.
    ///
    /// Page on with the last row's token as `after` until a page has fewer than `limit` rows. A page never
    /// splits the rows of one token (several users or environments may hold it), so it can have a few more
    /// than `limit` rows.
    ///
    /// - Throws: ``RelayStoreError/invalidArgument(_:)`` when `limit` is not positive.
    package func activeDevices(
        tenant: String,
        topic: String,
        after: String? = nil,
        limit: Int
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        guard limit > 0 else { throw .invalidArgument("the page size \(limit) is not positive") }
        let after = after ?? ""
        return try await deviceTargets(
            """
            WITH page AS (
                SELECT token FROM devices
                WHERE tenant_id = \(tenant) AND active AND (topics @> ARRAY[\(topic)]::text[] OR topics = '{}')
                  AND token > \(after)
                ORDER BY token LIMIT \(limit)
            )
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND (topics @> ARRAY[\(topic)]::text[] OR topics = '{}')
              AND token > \(after) AND token <= (SELECT max(token) FROM page)
            ORDER BY token, user_id, destination
            """
        )
    }

    /// The active devices of `tenant` holding one of `tokens`, which are as stored (a fan-out page's tokens), in
    /// one query, by token.
    package func deviceTargets(tenant: String, storedTokens tokens: [String]) async throws(RelayStoreError)
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
    package func activeDevices(
        tenant: String,
        topic: String,
        storedTokensFrom first: String,
        through last: String
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        try await deviceTargets(
            """
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND (topics @> ARRAY[\(topic)]::text[] OR topics = '{}')
              AND token >= \(first) AND token <= \(last)
            ORDER BY token, user_id, registered_at DESC
            """
        )
    }

    /// The devices of a topic range page as registered now (the active devices subscribed to the range's topic
    /// whose token comes after its `after` and is at most its `last`), less those of `excludedUsers`, by token.
    package func activeDevices(
        tenant: String,
        in range: TopicRange,
        excludedUsers: [String]
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        try await deviceTargets(
            """
            SELECT \(unescaped: DeviceTarget.columns) FROM devices
            WHERE tenant_id = \(tenant) AND active AND (topics @> ARRAY[\(range.topic)]::text[] OR topics = '{}')
              AND token > \(range.after) AND token <= \(range.last) AND user_id <> ALL(\(excludedUsers)::text[])
            ORDER BY token, user_id, registered_at DESC
            """
        )
    }

    /// The targets `query` selects (``DeviceTarget/columns``), read as one row of four arrays: a row per device
    /// costs the relay more to decode than the arrays' elements, and a fan-out reads each device twice. The arrays keep the order of `query`'s `ORDER BY`: PostgreSQL feeds
    /// a plain aggregate over a sorted subquery in the subquery's order.
    private func deviceTargets(_ query: PostgresQuery) async throws(RelayStoreError) -> [DeviceTarget] {
        return try await mappingErrors {
            return try Self.targets(in: try await database.query(Self.asArrays(query), logger: logger).collect())
        }
    }

    /// ``deviceTargets(_:)`` of a statement prepared as `name`.
    private func deviceTargets<Name: PreparedStatementName>(
        _ query: PostgresQuery, preparedAs name: Name.Type
    ) async throws(RelayStoreError) -> [DeviceTarget] {
        return try await mappingErrors {
            return try Self.targets(
                in: try await database.query(Self.asArrays(query), preparedAs: name, logger: logger))
        }
    }

    /// `query`'s rows (``DeviceTarget/columns``) as one row of four arrays.
    private static func asArrays(_ query: PostgresQuery) -> PostgresQuery {
        PostgresQuery(
            unsafeSQL: """
                SELECT coalesce(array_agg(user_id), '{}'), coalesce(array_agg(token), '{}'),
                       coalesce(array_agg(destination), '{}'), coalesce(array_agg(coalesce(time_zone, '')), '{}')
                FROM (\(query.sql)) selected
                """,
            binds: query.binds
        )
    }

    /// The targets in the arrays of ``asArrays(_:)``.
    private static func targets(in rows: [PostgresRow]) throws -> [DeviceTarget] {
        var targets: [DeviceTarget] = []
        for row in rows {
            let (users, tokens, destinations, timeZones) = try row.decode(([String], [String], [String], [String]).self)
            targets += try Self.targets(users: users, tokens: tokens, destinations: destinations, timeZones: timeZones)
        }
        return targets
    }

    /// The targets of four arrays side by side (``DeviceTarget/columns``: the destination by its stored name, an
    /// empty time zone for none).
    static func targets(
        users: [String], tokens: [String], destinations: [String], timeZones: [String]
    ) throws(RelayStoreError) -> [DeviceTarget] {
        guard users.count == tokens.count, users.count == destinations.count, users.count == timeZones.count else {
            throw .corruptRow("device arrays of different lengths")
        }
        var targets: [DeviceTarget] = []
        targets.reserveCapacity(users.count)
        // A page's devices share a destination or two: each name is parsed once.
        var parsed: [String: Destination] = [:]
        for index in users.indices {
            let name = destinations[index]
            guard let destination = parsed[name] ?? Destination(storedName: name) else {
                throw .corruptRow("device row with unknown destination \(name)")
            }
            parsed[name] = destination
            targets.append(
                DeviceTarget(
                    userID: users[index], token: tokens[index], destination: destination,
                    timeZone: timeZones[index].isEmpty ? nil : timeZones[index]))
        }
        return targets
    }

}

/// The fan-out's device read by token, prepared (``PreparedStatementName``). The reads by topic are planned
/// at each call: a plan made for any topic reads every device of a popular one through the topic index, and the
/// best plan for a rare topic is another one.
private enum StoredTokenDevices: PreparedStatementName {}

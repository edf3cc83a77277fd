package import Logging
import NIOPosix
package import PostgresNIO

/// The relay's PostgreSQL store: a connection pool and the schema's migrations.
///
/// The pool only works while ``run()`` runs, as with postgres-nio's `PostgresClient`; use
/// ``withStore(configuration:logger:_:)`` to have that done for the duration of a closure.
package struct RelayStore: Sendable {
    /// The advisory lock key held while migrating (ASCII "pushrela"), shared by every relay process.
    package static let migrationLockKey = 0x7075_7368_7265_6C61

    /// The underlying postgres-nio client: the store's own (and its tests'); other modules use the store's
    /// methods.
    package let client: PostgresClient
    /// The client behind the configuration's call deadline, for every call but migrations, maintenance and
    /// load-test setup.
    let database: DeadlineClient
    /// The migrations this store applies, in order.
    package let migrations: [Migration]
    package let logger: Logger
    /// Tenant ids seen in the tenants table: tenants are never deleted, so delivery writes check each once.
    let knownTenants = KnownTenants()

    /// Creates a store; it connects lazily, once ``run()`` runs.
    ///
    /// - Parameters:
    ///   - configuration: Where the database is.
    ///   - migrations: The schema's migrations; the relay's own by default.
    ///   - logger: Where queries and connection events are logged.
    package init(configuration: Configuration, migrations: [Migration] = Migration.all, logger: Logger) {
        var postgres = Self.pooled(configuration.postgres)
        if let timeout = configuration.statementTimeout {
            let (seconds, attoseconds) = timeout.components
            let milliseconds = seconds * 1_000 + attoseconds / 1_000_000_000_000_000
            postgres.options.additionalStartupParameters.append(("statement_timeout", "\(max(1, milliseconds))"))
        }
        self.client = PostgresClient(configuration: postgres, backgroundLogger: logger)
        self.database = DeadlineClient(
            client: client, deadline: configuration.callDeadline, eventLoop: MultiThreadedEventLoopGroup.singleton.any()
        )
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// The pool's settings for a busy relay. postgres-nio starts a timer task each time a connection goes back
    /// to the pool (a keep-alive, and an idle timeout) and cancels it at the next query; a cancelled sleeping
    /// task keeps its memory until its deadline, so at hundreds of queries per second the default timers (30
    /// and 60 s) held tens of MB. Keep-alive queries are off (the server is local or on the LAN, and a broken
    /// connection fails its next query), and idle connections close after 10 s, which bounds what the timers
    /// hold. No connection is kept as a minimum: with one, postgres-nio 1.33.2 trips a precondition when the
    /// server restarts.
    static func pooled(_ configuration: PostgresClient.Configuration) -> PostgresClient.Configuration {
        var configuration = configuration
        configuration.options.keepAliveBehavior = nil
        configuration.options.connectionIdleTimeout = min(configuration.options.connectionIdleTimeout, .seconds(10))
        return configuration
    }

    /// Runs the connection pool until the calling task is cancelled.
    package func run() async {
        // The pool's shutdown closes every connection; the idle held ones are given back too, so that the tasks
        // holding their leases end.
        await withTaskCancellationHandler {
            await client.run()
        } onCancel: {
            database.held.close()
        }
    }

    /// Creates a store, runs its pool while `body` runs, and shuts the pool down afterwards.
    package static func withStore<Result: Sendable>(
        configuration: Configuration,
        migrations: [Migration] = Migration.all,
        logger: Logger,
        _ body: @Sendable (RelayStore) async throws -> Result
    ) async throws -> Result {
        let store = RelayStore(configuration: configuration, migrations: migrations, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.run() }
            defer { group.cancelAll() }
            return try await body(store)
        }
    }

    /// Applies every migration not yet recorded in `schema_migrations` and returns their versions.
    ///
    /// Runs on one connection under the session-level advisory lock ``migrationLockKey``, so
    /// processes starting at once apply each migration exactly once; each migration runs in its
    /// own transaction. Running it again applies nothing and returns `[]`.
    @discardableResult
    package func migrate() async throws(RelayStoreError) -> [Int] {
        do {
            return try await client.withConnection { connection in
                try await Self.unbounded(connection, logger: logger) {
                    try await withMigrationLock(on: connection) {
                        try await applyPending(on: connection)
                    }
                }
            }
        } catch let error as RelayStoreError {
            throw error
        } catch {
            throw .databaseUnavailable(describePostgresError(error))
        }
    }

    /// Runs `body` on `connection` without the pool's statement timeout (``Configuration/statementTimeout``), which is
    /// set back afterwards: migrations and maintenance may take as long as the data needs.
    static func unbounded<Result>(
        _ connection: PostgresConnection, logger: Logger, _ body: () async throws -> Result
    ) async throws -> Result {
        try await connection.query("SET statement_timeout = 0", logger: logger)
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        try await connection.query("RESET statement_timeout", logger: logger)
        return try result.get()
    }

    /// The versions recorded in `schema_migrations`, in order (empty before the first migration).
    package func appliedMigrations() async throws(RelayStoreError) -> [Int] {
        do {
            let rows = try await client.query(
                "SELECT version::int8 FROM schema_migrations ORDER BY version",
                logger: logger
            )
            var versions: [Int] = []
            for try await version in rows.decode(Int.self) {
                versions.append(version)
            }
            return versions
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            return []
        } catch {
            throw .databaseUnavailable(describePostgresError(error))
        }
    }

    /// Holds the migration lock on `connection` around `body`; if releasing fails, closes the
    /// connection so the pool never hands out a session that still holds the lock.
    private func withMigrationLock<Result>(
        on connection: PostgresConnection,
        _ body: () async throws -> Result
    ) async throws -> Result {
        try await connection.query("SELECT pg_advisory_lock(\(Self.migrationLockKey))", logger: logger)
        let result: Result
        do {
            result = try await body()
        } catch {
            await unlock(connection)
            throw error
        }
        await unlock(connection)
        return result
    }

    private func unlock(_ connection: PostgresConnection) async {
        do {
            try await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLockKey))", logger: logger)
        } catch {
            logger.warning(
                "could not release the migration lock; closing the connection",
                metadata: [
                    "error": "\(describePostgresError(error))"
                ])
            try? await connection.close()
        }
    }

    private func applyPending(on connection: PostgresConnection) async throws -> [Int] {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            logger: logger
        )
        var applied = Set<Int>()
        for try await version in try await connection.query(
            "SELECT version::int8 FROM schema_migrations",
            logger: logger
        ).decode(Int.self) {
            applied.insert(version)
        }

        var newlyApplied: [Int] = []
        for migration in migrations where !applied.contains(migration.version) {
            do {
                try await connection.withTransaction(logger: logger) { transaction in
                    for statement in migration.statements {
                        try await transaction.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await transaction.query(
                        "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                        logger: logger
                    )
                }
            } catch {
                throw RelayStoreError.migrationFailed(
                    version: migration.version,
                    name: migration.name,
                    underlying: describePostgresError(error)
                )
            }
            logger.info(
                "applied migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            newlyApplied.append(migration.version)
        }
        return newlyApplied
    }
}

import ArgumentParser
import EmbeddedPostgres
import Foundation
import Logging
import RelayStore

/// What a command may do to its database before it uses it.
enum DatabaseAccess: Sendable, Equatable {
    /// Create the embedded cluster when there is none and apply pending migrations: `admin migrate`, `serve`,
    /// `demo`, and a command that changes something when given `--create`.
    case create
    /// Use the cluster and schema as they are: a missing cluster, or a schema behind this build, is an error.
    case existing
    /// As ``existing``, for a command that only reads: `--create` is refused, since it would write.
    case reading
}

/// Where the admin commands find their database, and whether they may create it.
struct DatabaseOptions: ParsableArguments {
    @Option(
        help:
            "postgres://user[:password]@host[:port]/database[?host=/socket/folder&sslmode=...]; default: PUSHRELAY_DATABASE_URL."
    )
    var databaseURL: String?

    @Option(help: "Data folder of the embedded PostgreSQL cluster, used when no database URL is given.")
    var dataDir = EmbeddedPostgres.defaultDataFolder

    @Flag(
        help:
            "Create the embedded cluster and apply pending migrations when needed (otherwise only `admin migrate` does)."
    )
    var create = false

    /// Runs `body` with a store of this command's database, used as `access` says (``DatabaseAccess/existing``
    /// becomes ``DatabaseAccess/create`` with `--create`), starting (and afterwards stopping) the embedded
    /// cluster if needed.
    func withStore(access: DatabaseAccess = .existing, _ body: @Sendable (RelayStore) async throws -> Void)
        async throws
    {
        var access = access
        if create {
            guard access != .reading else {
                throw Failure(message: "--create is for the commands that change the database; this one only reads")
            }
            access = .create
        }
        try await Self.withStore(
            databaseURL: databaseURL ?? ProcessInfo.processInfo.environment["PUSHRELAY_DATABASE_URL"],
            dataDir: dataDir, access: access, body
        )
    }

    /// Runs `body` with a store of `databaseURL`, or else of the embedded cluster in `dataDir` (started, and
    /// afterwards stopped, if needed), after a direct login that says at once what is wrong with the settings.
    static func withStore(
        databaseURL: String?,
        dataDir: String,
        access: DatabaseAccess,
        statementTimeout: Duration? = nil,
        _ body: @Sendable (RelayStore) async throws -> Void
    ) async throws {
        var logger = Logger(label: "pushrelay.admin")
        logger.logLevel = .warning
        // postgres-nio warns when a query races the pool's start inside `withStore`; harmless here.
        var storeLogger = logger
        storeLogger.logLevel = .error
        do {
            if let url = databaseURL {
                var configuration = try RelayStore.Configuration(databaseURL: url)
                configuration.statementTimeout = statementTimeout
                try await Self.run(configuration, access: access, logger: storeLogger, body)
                return
            }
            let postgres = EmbeddedPostgres(dataFolder: dataDir, logger: logger)
            if access != .create, !FileManager.default.fileExists(atPath: postgres.dataFolder + "/PG_VERSION") {
                throw Failure(
                    message: "no embedded PostgreSQL cluster in \(postgres.dataFolder) (no PG_VERSION there); "
                        + "`pushrelay admin migrate --data-dir \(dataDir)` creates one, "
                        + "or give --database-url or PUSHRELAY_DATABASE_URL")
            }
            try await postgres.start()
            do {
                guard let endpoint = await postgres.endpoint else {
                    throw EmbeddedPostgresError.startFailed(output: "no endpoint after start")
                }
                var configuration = RelayStore.Configuration(embedded: endpoint)
                configuration.statementTimeout = statementTimeout
                try await Self.run(configuration, access: access, logger: storeLogger, body)
            } catch {
                try? await postgres.stop()
                throw error
            }
            try await postgres.stop()
        } catch let error as RelayStoreError {
            throw Failure(message: error.description)
        } catch let error as EmbeddedPostgresError {
            throw Failure(message: error.description)
        } catch let error as TenantFileError {
            throw Failure(message: error.description)
        }
    }

    private static func run(
        _ configuration: RelayStore.Configuration,
        access: DatabaseAccess,
        logger: Logger,
        _ body: @Sendable (RelayStore) async throws -> Void
    ) async throws {
        try await RelayStore.probe(configuration: configuration, logger: logger)
        try await RelayStore.withStore(configuration: configuration, logger: logger) { store in
            if access == .create {
                try await store.migrate()
            } else {
                try await store.requireMigrated()
            }
            try await body(store)
        }
    }
}

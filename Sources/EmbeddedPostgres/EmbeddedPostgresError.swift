/// Everything that can go wrong while setting up, starting or stopping an ``EmbeddedPostgres`` cluster: a code
/// for a caller to act on and a message, with the output of the PostgreSQL tool that failed, for an operator.
package struct EmbeddedPostgresError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case noPostgreSQLBinaries, dataFolderUnusable, initdbFailed, startFailed, stopFailed, commandFailed
            case databaseNotCreated
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// No PostgreSQL server binaries (`initdb`, `pg_ctl`) were found.
        package static let noPostgreSQLBinaries = Code(.noPostgreSQLBinaries)
        /// The data folder cannot hold a cluster.
        package static let dataFolderUnusable = Code(.dataFolderUnusable)
        /// `initdb` failed.
        package static let initdbFailed = Code(.initdbFailed)
        /// The server did not start or did not become ready.
        package static let startFailed = Code(.startFailed)
        /// `pg_ctl stop` failed.
        package static let stopFailed = Code(.stopFailed)
        /// A helper program could not be launched at all.
        package static let commandFailed = Code(.commandFailed)
        /// The cluster runs but its database could not be created.
        package static let databaseNotCreated = Code(.databaseNotCreated)

        /// The code's name, as in logs.
        package var description: String { base.rawValue }
    }

    /// The kind of failure.
    package let code: Code
    /// A one-line explanation of the failure for an operator, with the tool's output.
    package let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// No PostgreSQL server binaries (`initdb`, `pg_ctl`) were found in the searched folders.
    package static func noPostgreSQLBinaries(searched: [String]) -> Self {
        Self(
            .noPostgreSQLBinaries,
            "no PostgreSQL server binaries (initdb, pg_ctl) found in \(searched.joined(separator: ", ")); "
                + "install PostgreSQL (Debian: apt-get install postgresql) or give a database URL")
    }

    /// The data folder `path` cannot hold a cluster (it cannot be created or owned, or its path is unusable).
    package static func dataFolderUnusable(path: String, reason: String) -> Self {
        Self(.dataFolderUnusable, "PostgreSQL data folder \(path) is unusable: \(reason)")
    }

    /// `initdb` failed; `output` is what it printed.
    package static func initdbFailed(output: String) -> Self {
        Self(.initdbFailed, "initdb failed: \(output)")
    }

    /// The server did not start (or did not become ready); `output` is `pg_ctl`'s output and the server log's
    /// tail.
    package static func startFailed(output: String) -> Self {
        Self(.startFailed, "PostgreSQL did not start: \(output)")
    }

    /// `pg_ctl stop` failed; `output` is what it printed.
    package static func stopFailed(output: String) -> Self {
        Self(.stopFailed, "PostgreSQL did not stop: \(output)")
    }

    /// A helper program `command` could not be launched; `reason` says why.
    package static func commandFailed(command: String, reason: String) -> Self {
        Self(.commandFailed, "could not run \(command): \(reason)")
    }

    /// The database `database` could not be created in the running cluster; `reason` is the server's message.
    package static func databaseNotCreated(database: String, reason: String) -> Self {
        Self(.databaseNotCreated, "cannot create database \(database): \(reason)")
    }
}

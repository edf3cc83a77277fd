import Foundation
package import Logging
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A PostgreSQL cluster of our own in a data folder, run with the system's PostgreSQL binaries.
///
/// `start()` creates the cluster on first use (`initdb`, trust authentication on the local socket
/// only, UTF8), starts it with `pg_ctl` listening only on a unix socket inside the data folder, or
/// reuses it when a server is already running there. `stop()` stops it, but only when this
/// instance started it. `initdb` and `postgres` refuse to run as root: when this process is root,
/// every server-side tool runs as Debian's `postgres` user (or `nobody`) through `runuser`, and the
/// data folder is given to that user.
///
/// Several processes (or handles) may share one data folder, say `pushrelay admin` while `pushrelay serve`
/// runs. Two `flock` locks beside the folder keep them apart: `<folder>.lock`, held exclusively while a
/// handle creates, starts or stops the cluster, so only one runs `initdb` and the others wait and then reuse
/// the server; and `<folder>.users`, held shared by every handle between a successful `start()` and its
/// `stop()`. The handle that started the server stops it only when it can take `<folder>.users` exclusively,
/// that is when no other handle still uses the server; otherwise it leaves it running. The kernel drops
/// both locks when a process dies.
package actor EmbeddedPostgres {
    /// The data folder used when none is given, relative to the working directory.
    package static let defaultDataFolder = ".pushrelay/pg"

    /// How to reach a running embedded server.
    package struct Endpoint: Sendable, Hashable {
        /// The folder holding the server's unix socket.
        package var socketDirectory: String
        /// The port number, which names the socket file.
        package var port: Int
        /// The superuser created by `initdb`.
        package var username: String
        /// The database the relay uses.
        package var database: String

        /// The socket file itself: `<socketDirectory>/.s.PGSQL.<port>`.
        package var socketPath: String { "\(socketDirectory)/.s.PGSQL.\(port)" }
    }

    /// What `start()` did.
    package enum StartOutcome: Sendable, Hashable {
        /// The folder had no cluster: `initdb` made one, then it was started.
        case created
        /// The cluster existed and was stopped; it was started.
        case started
        /// A server was already running on this cluster; it is used as it is.
        case reused
    }

    /// The absolute path of the cluster's data folder.
    package nonisolated let dataFolder: String
    /// The superuser name given to `initdb`.
    package nonisolated let superuser: String
    /// The database created for the relay.
    package nonisolated let database: String

    private let logger: Logger
    private var startedHere = false
    private var currentEndpoint: Endpoint?
    /// The descriptor holding a shared lock on ``usersLockPath`` while this handle uses the server.
    private var usersLock: Int32?

    /// The lock file held exclusively while the cluster is created, started or stopped: beside the data folder,
    /// since `initdb` wants the folder itself empty.
    package nonisolated var setupLockPath: String { dataFolder + ".lock" }
    /// The lock file every handle using the server holds shared.
    package nonisolated var usersLockPath: String { dataFolder + ".users" }
    /// How long `start()` and `stop()` wait for another process creating, starting or stopping the cluster.
    static let lockTimeout: Duration = .seconds(300)

    /// The port the server listens on (its socket's name); the socket lives in the data folder,
    /// so clusters in different folders never conflict.
    static let port = 5432

    /// Creates a handle on the cluster in `dataFolder`; nothing happens until `start()`.
    ///
    /// - Parameters:
    ///   - dataFolder: The cluster's folder, relative to the working directory or absolute.
    ///   - superuser: The superuser name for a new cluster.
    ///   - database: The database to create in it and connect to.
    ///   - logger: Where to log what happens to the cluster.
    package init(
        dataFolder: String = EmbeddedPostgres.defaultDataFolder,
        superuser: String = "pushrelay",
        database: String = "pushrelay",
        logger: Logger = Logger(label: "pushrelay.embedded-postgres")
    ) {
        let absolute =
            dataFolder.hasPrefix("/")
            ? dataFolder : FileManager.default.currentDirectoryPath + "/" + dataFolder
        self.dataFolder = URL(fileURLWithPath: absolute).standardizedFileURL.path
        self.superuser = superuser
        self.database = database
        self.logger = logger
    }

    deinit {
        // A handle dropped without stop(): the process no longer uses the server through it.
        if let usersLock {
            close(usersLock)
        }
    }

    /// How to reach the server, once `start()` has succeeded (until `stop()`).
    package var endpoint: Endpoint? { currentEndpoint }

    /// Whether this instance started the server (and so will stop it).
    package var isStartedHere: Bool { startedHere }

    /// Creates the cluster if needed and starts it, or reuses the server already running on it.
    ///
    /// Returns once the server accepts connections and the relay's database exists. While another process (or
    /// handle) creates, starts or stops the cluster in the same folder, waits for it (up to five minutes).
    @discardableResult
    package func start() async throws(EmbeddedPostgresError) -> StartOutcome {
        if currentEndpoint != nil {
            return .reused
        }
        let binaries = try Self.findBinaries()
        let user = try Self.serverUser()
        try prepareParent(for: user)
        let setupLock = try await Self.lock(setupLockPath, mode: LOCK_EX, dataFolder: dataFolder)
        defer { Self.unlock(setupLock) }
        if currentEndpoint != nil {
            // Another call on this handle started it while this one waited for the lock.
            return .reused
        }
        try prepareFolder(for: user)

        var created = false
        if !FileManager.default.fileExists(atPath: dataFolder + "/PG_VERSION") {
            try await initdb(binaries: binaries, user: user)
            created = true
        }

        let outcome: StartOutcome
        var startedNow = false
        if try await isRunning() {
            outcome = .reused
            logger.info("reusing running PostgreSQL", metadata: ["data": "\(dataFolder)"])
        } else {
            try await startServer(binaries: binaries, user: user)
            startedNow = true
            outcome = created ? .created : .started
            logger.info("started PostgreSQL", metadata: ["data": "\(dataFolder)", "created": "\(created)"])
        }

        do {
            let endpoint = try await readyEndpoint()
            try await ensureDatabase(at: endpoint)
            usersLock = try await Self.lock(usersLockPath, mode: LOCK_SH, dataFolder: dataFolder)
            currentEndpoint = endpoint
            startedHere = startedNow
        } catch {
            if startedNow {
                try? await stopServer(binaries: binaries)
            }
            throw error
        }
        return outcome
    }

    /// Stops the server with `pg_ctl stop -m fast` if this instance started it and no other handle (in this
    /// process or another) still uses it; otherwise leaves it running. Either way this handle is done with it.
    package func stop() async throws(EmbeddedPostgresError) {
        guard startedHere else {
            releaseUsersLock()
            currentEndpoint = nil
            return
        }
        let binaries = try Self.findBinaries()
        let setupLock = try await Self.lock(setupLockPath, mode: LOCK_EX, dataFolder: dataFolder)
        defer { Self.unlock(setupLock) }
        // Only the last user may stop it: the exclusive lock is refused while another handle holds its shared one.
        if let usersLock, flock(usersLock, LOCK_EX | LOCK_NB) != 0 {
            releaseUsersLock()
            startedHere = false
            currentEndpoint = nil
            logger.notice(
                "leaving PostgreSQL running: another process still uses it", metadata: ["data": "\(dataFolder)"])
            return
        }
        try await stopServer(binaries: binaries)
        releaseUsersLock()
        startedHere = false
        currentEndpoint = nil
        logger.info("stopped PostgreSQL", metadata: ["data": "\(dataFolder)"])
    }

    /// Whether a server is running on this cluster (`pg_ctl status`: a live postmaster.pid).
    package func isRunning() async throws(EmbeddedPostgresError) -> Bool {
        guard FileManager.default.fileExists(atPath: dataFolder + "/PG_VERSION") else {
            return false
        }
        let result = try await Subprocess.run(
            try Self.findBinaries() + "/pg_ctl",
            ["status", "-D", dataFolder],
            as: try Self.serverUser()?.name
        )
        return result.status == 0
    }

    /// Runs `pg_ctl stop -m fast`, waiting for the server to exit.
    private func stopServer(binaries: String) async throws(EmbeddedPostgresError) {
        let result = try await Subprocess.run(
            binaries + "/pg_ctl",
            ["stop", "-D", dataFolder, "-m", "fast", "-w", "-t", "120", "-s"],
            as: try Self.serverUser()?.name
        )
        guard result.status == 0 else {
            throw .stopFailed(output: result.output)
        }
    }

    // MARK: - Locks

    /// Opens `path` (creating it) and takes a `flock` of `mode` on it, polling while another descriptor holds a
    /// conflicting one; returns the descriptor, which holds the lock until it is closed.
    private static func lock(_ path: String, mode: Int32, dataFolder: String) async throws(EmbeddedPostgresError)
        -> Int32
    {
        // Read-only is enough for flock, and lets a process of another user share a lock file it cannot write.
        let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw .dataFolderUnusable(path: dataFolder, reason: "cannot open lock file \(path): \(errnoText())")
        }
        let deadline = ContinuousClock.now + lockTimeout
        while flock(descriptor, mode | LOCK_NB) != 0 {
            let error = errno
            guard error == EWOULDBLOCK || error == EINTR else {
                close(descriptor)
                throw .dataFolderUnusable(
                    path: dataFolder, reason: "cannot lock \(path): \(String(cString: strerror(error)))")
            }
            guard ContinuousClock.now < deadline else {
                close(descriptor)
                throw .startFailed(
                    output: "another process has been creating, starting or stopping the cluster in \(dataFolder) "
                        + "for more than \(lockTimeout) (it holds \(path))")
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return descriptor
    }

    /// Releases a lock taken by ``lock(_:mode:dataFolder:)``.
    private static func unlock(_ descriptor: Int32) {
        close(descriptor)
    }

    private func releaseUsersLock() {
        if let usersLock {
            Self.unlock(usersLock)
        }
        usersLock = nil
    }

    private static func errnoText() -> String {
        String(cString: strerror(errno))
    }

    // MARK: - Binaries and users

    /// The folder holding the highest installed PostgreSQL version's binaries.
    ///
    /// Looks in `/usr/lib/postgresql/<version>/bin` (Debian and Ubuntu).
    package static func findBinaries() throws(EmbeddedPostgresError) -> String {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let ordered = versions.compactMap { name -> (version: [Int], name: String)? in
            let parts = name.split(separator: ".").map { Int($0) }
            guard !parts.isEmpty, parts.allSatisfy({ $0 != nil }) else { return nil }
            return (parts.map { $0! }, name)
        }
        .sorted { $0.version.lexicographicallyPrecedes($1.version) }
        for candidate in ordered.reversed() {
            let bin = "\(root)/\(candidate.name)/bin"
            if FileManager.default.isExecutableFile(atPath: bin + "/initdb"),
                FileManager.default.isExecutableFile(atPath: bin + "/pg_ctl")
            {
                return bin
            }
        }
        throw .noPostgreSQLBinaries(searched: [root + "/*/bin"])
    }

    /// An unprivileged account to run the server tools as.
    struct ServerUser {
        var name: String
        var uid: uid_t
        var gid: gid_t
    }

    /// `nil` when this process is not root; otherwise `postgres` if it exists, else `nobody`.
    static func serverUser() throws(EmbeddedPostgresError) -> ServerUser? {
        guard geteuid() == 0 else { return nil }
        for name in ["postgres", "nobody"] {
            if let entry = getpwnam(name) {
                return ServerUser(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
            }
        }
        throw .commandFailed(
            command: "initdb",
            reason: "running as root and neither a postgres nor a nobody user exists to run PostgreSQL as"
        )
    }

    // MARK: - Steps

    /// Checks the data folder's path and creates its parent (for the lock files), giving a parent it created to
    /// `user` when this process is root.
    private func prepareParent(for user: ServerUser?) throws(EmbeddedPostgresError) {
        let files = FileManager.default
        let socketPath = Endpoint(socketDirectory: dataFolder, port: Self.port, username: "", database: "").socketPath
        guard socketPath.utf8.count < 108 else {
            throw .dataFolderUnusable(
                path: dataFolder,
                reason: "its path is too long for a unix socket (\(socketPath.utf8.count) bytes, at most 107)"
            )
        }
        guard !dataFolder.contains(","), !dataFolder.contains("\""), !dataFolder.contains("\n") else {
            throw .dataFolderUnusable(path: dataFolder, reason: "its path contains a comma, quote or newline")
        }
        let parent = (dataFolder as NSString).deletingLastPathComponent
        guard !files.fileExists(atPath: parent) else { return }
        do {
            try files.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } catch {
            throw .dataFolderUnusable(path: dataFolder, reason: "\(error)")
        }
        if let user, chown(parent, user.uid, user.gid) != 0 {
            let reason = String(cString: strerror(errno))
            throw .dataFolderUnusable(path: parent, reason: "cannot give it to user \(user.name): \(reason)")
        }
    }

    /// Creates the data folder (mode 0700) and, as root, gives it to `user`. Runs under the setup lock.
    private func prepareFolder(for user: ServerUser?) throws(EmbeddedPostgresError) {
        let files = FileManager.default
        var createdFolder = false
        do {
            if !files.fileExists(atPath: dataFolder) {
                try files.createDirectory(
                    atPath: dataFolder,
                    withIntermediateDirectories: false,
                    attributes: [.posixPermissions: 0o700]
                )
                createdFolder = true
            }
        } catch {
            throw .dataFolderUnusable(path: dataFolder, reason: "\(error)")
        }
        guard let user else { return }
        // An existing cluster keeps its owner; an empty or new folder is handed over.
        if createdFolder || !files.fileExists(atPath: dataFolder + "/PG_VERSION"),
            chown(dataFolder, user.uid, user.gid) != 0
        {
            let reason = String(cString: strerror(errno))
            throw .dataFolderUnusable(path: dataFolder, reason: "cannot give it to user \(user.name): \(reason)")
        }
    }

    private func initdb(binaries: String, user: ServerUser?) async throws(EmbeddedPostgresError) {
        let result = try await Subprocess.run(
            binaries + "/initdb",
            [
                "-D", dataFolder,
                "-U", superuser,
                "--auth-local=trust",
                "--auth-host=reject",
                "--encoding=UTF8",
                "--no-locale",
                "--no-instructions",
            ],
            as: user?.name
        )
        guard result.status == 0 else {
            throw .initdbFailed(output: result.output)
        }
        logger.info("created PostgreSQL cluster", metadata: ["data": "\(dataFolder)"])
    }

    private func startServer(binaries: String, user: ServerUser?) async throws(EmbeddedPostgresError) {
        // pg_ctl hands -o to a shell: quote the socket folder for it.
        let quotedFolder = "'" + dataFolder.replacingOccurrences(of: "'", with: "'\\''") + "'"
        let options =
            "-c listen_addresses='' -c port=\(Self.port) -c unix_socket_directories=\(quotedFolder)"
        let logFile = dataFolder + "/server.log"
        let result = try await Subprocess.run(
            binaries + "/pg_ctl",
            ["start", "-D", dataFolder, "-l", logFile, "-o", options, "-w", "-t", "120", "-s"],
            as: user?.name
        )
        guard result.status == 0 else {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            let tail = log.split(separator: "\n").suffix(20).joined(separator: "\n")
            throw .startFailed(output: [result.output, tail].filter { !$0.isEmpty }.joined(separator: "\n"))
        }
    }

    /// Reads the socket folder and port from `postmaster.pid`, waiting while the server starts up.
    private func readyEndpoint() async throws(EmbeddedPostgresError) -> Endpoint {
        let pidFile = dataFolder + "/postmaster.pid"
        var lastContents = ""
        for _ in 0..<600 {
            if let contents = try? String(contentsOfFile: pidFile, encoding: .utf8) {
                lastContents = contents
                // Lines: pid, data folder, start time, port, socket folder, listen address, shm key, status.
                let lines = contents.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                if lines.count >= 8, lines[7].trimmingCharacters(in: .whitespaces) == "ready",
                    let port = Int(lines[3].trimmingCharacters(in: .whitespaces))
                {
                    let socketDirectory = lines[4].trimmingCharacters(in: .whitespaces)
                    guard !socketDirectory.isEmpty else {
                        throw .startFailed(output: "the running server at \(dataFolder) has no unix socket")
                    }
                    return Endpoint(
                        socketDirectory: socketDirectory, port: port, username: superuser, database: database)
                }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        throw .startFailed(
            output: "the server at \(dataFolder) did not become ready: postmaster.pid is \(lastContents)")
    }

    /// Creates the relay's database if it does not exist yet.
    private func ensureDatabase(at endpoint: Endpoint) async throws(EmbeddedPostgresError) {
        let configuration = PostgresConnection.Configuration(
            unixSocketPath: endpoint.socketPath,
            username: superuser,
            password: nil,
            database: "postgres"
        )
        do {
            let connection = try await PostgresConnection.connect(
                configuration: configuration,
                id: 1,
                logger: logger
            )
            do {
                let rows = try await connection.query(
                    "SELECT 1 FROM pg_database WHERE datname = \(database)",
                    logger: logger
                )
                var exists = false
                for try await _ in rows {
                    exists = true
                }
                if !exists {
                    let identifier = "\"" + database.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                    do {
                        try await connection.query(
                            PostgresQuery(unsafeSQL: "CREATE DATABASE \(identifier)"),
                            logger: logger
                        )
                    } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P04" {
                        // Another process sharing this cluster created it first.
                    }
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try await connection.close()
        } catch {
            let reason = (error as? PSQLError)?.serverInfo?[.message] ?? String(reflecting: error)
            throw .databaseNotCreated(database: database, reason: reason)
        }
    }
}

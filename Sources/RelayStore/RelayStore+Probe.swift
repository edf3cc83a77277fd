package import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

extension RelayStore {
    /// Connects once, straight to the configuration's PostgreSQL, logs in and closes again, so that a server that
    /// is not there or refuses the login is one sentence within `timeout`, not the pool's minute of retries ending
    /// in a tripped circuit breaker.
    ///
    /// - Throws: ``RelayStoreError/Code/loginRefused`` with PostgreSQL's own message (no such role or database, a
    ///   wrong password); ``RelayStoreError/Code/databaseUnavailable`` when nothing answers there (connection
    ///   refused, no socket file, no answer within `timeout`) or the server cannot take a session now.
    package static func probe(
        configuration: Configuration,
        timeout: Duration = .seconds(4),
        logger: Logger
    ) async throws(RelayStoreError) {
        let place = configuration.place
        let connection = try configuration.directConnection(timeout: timeout)
        let outcome = await withTaskGroup(of: Result<PostgresConnection, any Error>?.self) { group in
            group.addTask {
                do {
                    return .success(
                        try await PostgresConnection.connect(
                            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: connection, id: 0,
                            logger: logger))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // A login that succeeded just as the timeout fired is closed too.
            for await late in group {
                if case .success(let connection)? = late { try? await connection.close() }
            }
            return first
        }
        switch outcome {
        case .success(let connection)?:
            try? await connection.close()
        case .failure(let error)?:
            throw probeError(error, place: place)
        case nil:
            throw .databaseUnavailable("PostgreSQL at \(place) did not answer within \(timeout)")
        }
    }

    /// The store's error for a failed direct login at `place`.
    static func probeError(_ error: any Error, place: String) -> RelayStoreError {
        guard let psql = error as? PSQLError else {
            return .databaseUnavailable("cannot reach PostgreSQL at \(place): \(describePostgresError(error))")
        }
        if let info = psql.serverInfo, let message = info[.message] {
            let state = info[.sqlState] ?? ""
            // Class 28: invalid authorization (no such role, wrong password, no pg_hba.conf entry);
            // 3D000: no such database. Anything else (starting up, too many connections) may pass.
            if state.hasPrefix("28") || state == "3D000" {
                return .loginRefused(place: place, message: message)
            }
            return .databaseUnavailable("PostgreSQL at \(place) refused a session: \(message)")
        }
        switch psql.code {
        case .sslUnsupported:
            return .databaseUnavailable(
                "PostgreSQL at \(place) does not offer TLS, which the URL's sslmode requires")
        case .authMechanismRequiresPassword:
            return .loginRefused(place: place, message: "the server asks for a password and the URL gives none")
        default:
            break
        }
        if isTimeout(psql.underlying) {
            return .databaseUnavailable("PostgreSQL at \(place) did not answer: the connection timed out")
        }
        if let connection = psql.underlying as? NIOConnectionError, connection.connectionErrors.isEmpty {
            return .databaseUnavailable("cannot reach PostgreSQL at \(place): the host name does not resolve")
        }
        if let number = errnoNumber(psql.underlying) {
            let reason = String(cString: strerror(number)).lowercased()
            let hint =
                number == ECONNREFUSED || number == ENOENT
                ? " (is PostgreSQL running, and listening there?)" : ""
            return .databaseUnavailable("cannot reach PostgreSQL at \(place): \(reason)\(hint)")
        }
        return .databaseUnavailable("cannot reach PostgreSQL at \(place): \(describePostgresError(psql))")
    }

    /// Whether a connect failed for want of an answer in time.
    private static func isTimeout(_ error: (any Error)?) -> Bool {
        switch error {
        case let error as ChannelError:
            if case .connectTimeout = error { return true }
            return false
        case let error as NIOConnectionError:
            return error.connectionErrors.contains { isTimeout($0.error) }
        default:
            return false
        }
    }

    /// The system error number behind a failed connect, when there is one.
    private static func errnoNumber(_ error: (any Error)?) -> Int32? {
        switch error {
        case let error as IOError:
            return error.errnoCode
        case let error as NIOConnectionError:
            return error.connectionErrors.lazy.compactMap { errnoNumber($0.error) }.first
        default:
            return nil
        }
    }
}

extension RelayStore.Configuration {
    /// Where the database is, for messages: `host:port` or the socket file; never the password.
    var place: String {
        if let path = postgres.unixSocketPath { return path }
        return "\(postgres.host ?? "?"):\(postgres.port ?? 5432)"
    }

    /// A direct connection's configuration, the same server, login and TLS mode as the pool's.
    func directConnection(timeout: Duration) throws(RelayStoreError) -> PostgresConnection.Configuration {
        var connection: PostgresConnection.Configuration
        if let path = postgres.unixSocketPath {
            connection = .init(
                unixSocketPath: path, username: postgres.username, password: postgres.password,
                database: postgres.database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            do {
                switch probeTLS {
                case .disable:
                    tls = .disable
                case .prefer:
                    var unchecked = TLSConfiguration.makeClientConfiguration()
                    unchecked.certificateVerification = .none
                    tls = .prefer(try NIOSSLContext(configuration: unchecked))
                case .require(let configuration):
                    tls = .require(try NIOSSLContext(configuration: configuration))
                }
            } catch {
                throw .databaseUnavailable("TLS towards PostgreSQL at \(place) cannot be set up: \(error)")
            }
            connection = .init(
                host: postgres.host ?? "localhost", port: postgres.port ?? 5432, username: postgres.username,
                password: postgres.password, database: postgres.database, tls: tls)
        }
        connection.options.connectTimeout = TimeAmount(timeout)
        return connection
    }
}

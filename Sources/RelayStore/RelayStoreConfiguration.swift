package import EmbeddedPostgres
import Foundation
package import NIOCore
import NIOSSL
package import PostgresNIO

extension RelayStore {
    /// Where the store's PostgreSQL is and how to log in.
    package struct Configuration: Sendable {
        /// postgres-nio's client configuration, for settings this type does not cover.
        package var postgres: PostgresClient.Configuration
        /// How long one store call may wait for PostgreSQL (a connection and the first answer) before it
        /// fails with ``RelayStoreError/databaseUnavailable(_:)``; migrations, maintenance and load-test
        /// setup are not bounded by it.
        package var callDeadline: TimeAmount = .seconds(15)
        /// The longest one statement of the pool may run in PostgreSQL before the server cancels it
        /// (`statement_timeout`), so that no request keeps the database busy after its caller gave up; migrations and
        /// maintenance lift it for their own connection. `nil`: the server's own setting.
        package var statementTimeout: Duration?
        /// The TLS mode of ``RelayStore/probe(configuration:timeout:logger:)``'s direct connection, the same as the
        /// pool's: postgres-nio's client configuration does not let its TLS mode be read back.
        var probeTLS = ProbeTLS.prefer

        /// Wraps a ready postgres-nio client configuration.
        package init(postgres: PostgresClient.Configuration) {
            self.postgres = postgres
        }

        /// Connects through a unix socket file (`<folder>/.s.PGSQL.<port>`).
        package init(unixSocketPath: String, username: String, password: String? = nil, database: String?) {
            self.postgres = PostgresClient.Configuration(
                unixSocketPath: unixSocketPath,
                username: username,
                password: password,
                database: database
            )
        }

        /// Connects to a running ``EmbeddedPostgres`` server.
        package init(embedded endpoint: EmbeddedPostgres.Endpoint) {
            self.init(unixSocketPath: endpoint.socketPath, username: endpoint.username, database: endpoint.database)
        }

        /// Parses a database URL: `postgres://user[:password]@host[:port][/database][?options]`.
        ///
        /// The scheme may be `postgres` or `postgresql`; the port defaults to 5432 and the
        /// database to the user's name. Options: `host=/socket/folder` connects through that
        /// folder's unix socket instead of TCP (the URL's host may then be empty);
        /// `sslmode=disable|prefer|require|verify-ca|verify-full` as in libpq (default `prefer`;
        /// only `verify-full` checks the certificate and host name, `verify-ca` the certificate).
        package init(databaseURL: String) throws(RelayStoreError) {
            func invalid(_ reason: String) -> RelayStoreError {
                .invalidDatabaseURL(Self.redacted(databaseURL), reason: reason)
            }
            guard let components = URLComponents(string: databaseURL) else {
                throw invalid("not a URL")
            }
            guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
                throw invalid("the scheme must be postgres:// or postgresql://")
            }
            guard let username = components.user, !username.isEmpty else {
                throw invalid("no user name (postgres://user@host/database)")
            }
            let password = components.password
            let port = components.port ?? 5432
            guard (1...65535).contains(port) else {
                throw invalid("port \(port) is out of range")
            }
            var path = components.path
            if path.hasPrefix("/") {
                path.removeFirst()
            }
            guard !path.contains("/") else {
                throw invalid("the path must be just the database name")
            }
            let database: String? = path.isEmpty ? nil : path

            var socketFolder: String?
            var sslMode = "prefer"
            for item in components.queryItems ?? [] {
                switch item.name {
                case "host":
                    guard let value = item.value, value.hasPrefix("/") else {
                        throw invalid("host= must be an absolute unix socket folder")
                    }
                    socketFolder = value
                case "sslmode":
                    sslMode = item.value ?? ""
                default:
                    throw invalid("unsupported option \(item.name)")
                }
            }

            if let socketFolder {
                self.init(
                    unixSocketPath: "\(socketFolder)/.s.PGSQL.\(port)",
                    username: username,
                    password: password,
                    database: database
                )
                return
            }
            guard let host = components.host, !host.isEmpty else {
                throw invalid("no host (give one, or ?host=/socket/folder)")
            }
            let tls: PostgresClient.Configuration.TLS
            let probeTLS: ProbeTLS
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            switch sslMode {
            case "disable":
                tls = .disable
                probeTLS = .disable
            case "allow", "prefer":
                tlsConfiguration.certificateVerification = .none
                tls = .prefer(tlsConfiguration)
                probeTLS = .prefer
            case "require":
                tlsConfiguration.certificateVerification = .none
                tls = .require(tlsConfiguration)
                probeTLS = .require(tlsConfiguration)
            case "verify-ca":
                tlsConfiguration.certificateVerification = .noHostnameVerification
                tls = .require(tlsConfiguration)
                probeTLS = .require(tlsConfiguration)
            case "verify-full":
                tls = .require(tlsConfiguration)
                probeTLS = .require(tlsConfiguration)
            default:
                throw invalid("unknown sslmode \(sslMode)")
            }
            // URLComponents keeps IPv6 literals in brackets.
            let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            self.init(
                postgres: PostgresClient.Configuration(
                    host: bareHost,
                    port: port,
                    username: username,
                    password: password,
                    database: database,
                    tls: tls
                )
            )
            self.probeTLS = probeTLS
        }

        /// The URL with its password replaced by `***`, safe for error messages and logs.
        static func redacted(_ url: String) -> String {
            guard var components = URLComponents(string: url), components.password != nil else {
                return url
            }
            components.password = "***"
            return components.string ?? "(unprintable URL)"
        }

        /// The TLS modes a database URL's `sslmode` maps to, for a direct connection.
        enum ProbeTLS: Sendable {
            /// No TLS.
            case disable
            /// TLS when the server offers it, the certificate unchecked.
            case prefer
            /// TLS required, checked as `configuration` says.
            case require(TLSConfiguration)
        }
    }
}

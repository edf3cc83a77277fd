import EmbeddedPostgres
import Foundation
import PostgresNIO
import RelayStore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The direct login before the pool starts: PostgreSQL's own reason in one sentence, never the pool's retries.
@Suite("RelayStore probe")
struct ProbeTests {
    /// The error `probe` throws for `configuration`, or `nil` when the login succeeds.
    private func probeError(_ configuration: RelayStore.Configuration, timeout: Duration = .seconds(4)) async
        -> RelayStoreError?
    {
        do {
            try await RelayStore.probe(configuration: configuration, timeout: timeout, logger: quietLogger)
            return nil
        } catch {
            return error
        }
    }

    @Test("a role, a database that do not exist: the server's message, as a refused login")
    func unknownRoleAndDatabase() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            #expect(await probeError(.init(embedded: endpoint)) == nil)
            let role = try #require(
                await probeError(.init(unixSocketPath: endpoint.socketPath, username: "nobody", database: "pushrelay")))
            #expect(role.code == .loginRefused)
            #expect(
                role.description
                    == "PostgreSQL at \(endpoint.socketPath) refused the login: role \"nobody\" does not exist")
            let database = try #require(
                await probeError(
                    .init(unixSocketPath: endpoint.socketPath, username: endpoint.username, database: "nope")))
            #expect(database.code == .loginRefused)
            #expect(database.description.hasSuffix("refused the login: database \"nope\" does not exist"))
        }
    }

    @Test("a wrong password: the server's message")
    func wrongPassword() async throws {
        try await withEmbeddedPostgres { postgres, endpoint async throws in
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                try await store.client.query("CREATE ROLE probe LOGIN PASSWORD 'right'")
                // The probe role logs in with a password on the socket; everyone else as before.
                let hba = postgres.dataFolder + "/pg_hba.conf"
                let rules = try String(contentsOfFile: hba, encoding: .utf8)
                try ("local all probe scram-sha-256\n" + rules).write(toFile: hba, atomically: false, encoding: .utf8)
                try await store.client.query("SELECT pg_reload_conf()")
            }
            let socket = endpoint.socketPath
            #expect(
                await probeError(
                    .init(unixSocketPath: socket, username: "probe", password: "right", database: "pushrelay")) == nil)
            let wrong = try #require(
                await probeError(
                    .init(unixSocketPath: socket, username: "probe", password: "wrong", database: "pushrelay")))
            #expect(wrong.code == .loginRefused)
            #expect(wrong.description.hasSuffix("refused the login: password authentication failed for user \"probe\""))
        }
    }

    @Test("nothing listening: connection refused, a name that does not resolve, no socket file, as unavailable")
    func nothingThere() async throws {
        let port = try closedPort()
        let refused = try #require(
            await probeError(try .init(databaseURL: "postgres://relay@127.0.0.1:\(port)/pushrelay?sslmode=disable")))
        #expect(refused.code == .databaseUnavailable)
        #expect(refused.description.contains("cannot reach PostgreSQL at 127.0.0.1:\(port): connection refused"))
        let unresolved = try #require(
            await probeError(try .init(databaseURL: "postgres://relay@no-such-host.invalid/pushrelay?sslmode=disable")))
        #expect(unresolved.code == .databaseUnavailable)
        #expect(unresolved.description.hasSuffix("no-such-host.invalid:5432: the host name does not resolve"))
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let missing = try #require(
            await probeError(.init(unixSocketPath: folder + "/.s.PGSQL.5432", username: "relay", database: "relay")))
        #expect(missing.code == .databaseUnavailable)
        #expect(missing.description.contains("no such file or directory"))
    }

    @Test("a server that never answers: unavailable once the probe's time is up")
    func silentServer() async throws {
        // A listening socket nobody accepts from: the kernel completes the handshake, no byte ever comes back.
        let (descriptor, port) = try listeningSocket()
        defer { close(descriptor) }
        let silent = try #require(
            await probeError(
                try .init(databaseURL: "postgres://relay@127.0.0.1:\(port)/pushrelay?sslmode=disable"),
                timeout: .milliseconds(300)))
        #expect(silent.code == .databaseUnavailable)
        // The probe's deadline or the connect timeout (both the probe's time) says so, whichever fires first.
        #expect(silent.description.contains("did not answer"))
    }

    /// A loopback port that was free a moment ago and has nothing listening on it.
    private func closedPort() throws -> Int {
        let (descriptor, port) = try listeningSocket()
        close(descriptor)
        return port
    }

    /// A TCP socket listening on a free loopback port, and that port.
    private func listeningSocket() throws -> (Int32, Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && listen(descriptor, 8) == 0
                    && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        try #require(bound)
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}

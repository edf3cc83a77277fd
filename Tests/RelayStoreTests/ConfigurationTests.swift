import RelayStore
import Testing

@Suite("RelayStore database URLs")
struct ConfigurationTests {
    @Test(
        "bad database URLs are typed errors",
        arguments: [
            "",
            "not a url",
            "mysql://user@host/db",
            "postgres://host/db",
            "postgres://user@/db",
            "postgres://user@host/db/extra",
            "postgres://user@host/db?sslmode=sometimes",
            "postgres://user@host/db?host=relative/dir",
            "postgres://user@host/db?color=blue",
            "postgres://user@host:99999/db",
        ]
    )
    func invalid(url: String) {
        #expect {
            try RelayStore.Configuration(databaseURL: url)
        } throws: { error in
            guard (error as? RelayStoreError)?.code == .invalidDatabaseURL else { return false }
            return true
        }
    }

    @Test("the password never appears in the error")
    func redacted() {
        let error = #expect(throws: RelayStoreError.self) {
            try RelayStore.Configuration(databaseURL: "postgres://relay:s3cret@db.example/relay?color=blue")
        }
        #expect(error.map { "\($0)".contains("s3cret") } == false)
    }

    @Test("a TCP URL")
    func tcp() throws {
        let configuration = try RelayStore.Configuration(
            databaseURL: "postgresql://relay:p%40ss@db.example:6543/pushrelay?sslmode=disable"
        )
        #expect(configuration.postgres.host == "db.example")
        #expect(configuration.postgres.port == 6543)
        #expect(configuration.postgres.username == "relay")
        #expect(configuration.postgres.password == "p@ss")
        #expect(configuration.postgres.database == "pushrelay")
        #expect(configuration.postgres.unixSocketPath == nil)
    }

    @Test("defaults: port 5432, no database")
    func defaults() throws {
        let configuration = try RelayStore.Configuration(databaseURL: "postgres://relay@localhost")
        #expect(configuration.postgres.port == 5432)
        #expect(configuration.postgres.database == nil)
        #expect(configuration.postgres.password == nil)
    }

    @Test("a unix socket folder in ?host=")
    func unixSocket() throws {
        let configuration = try RelayStore.Configuration(
            databaseURL: "postgres://relay@/pushrelay?host=/var/run/postgresql"
        )
        #expect(configuration.postgres.unixSocketPath == "/var/run/postgresql/.s.PGSQL.5432")
        #expect(configuration.postgres.host == nil)
        #expect(configuration.postgres.database == "pushrelay")
    }
}

import PostgresNIO
import Testing

@testable import RelayStore

@Suite("Statement timeout")
struct StatementTimeoutTests {
    @Test("a pool statement running past statement_timeout is cancelled by PostgreSQL")
    func poolStatementsAreCancelledAtTheTimeout() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            var configuration = RelayStore.Configuration(embedded: endpoint)
            configuration.statementTimeout = .milliseconds(300)
            try await RelayStore.withStore(configuration: configuration, logger: quietLogger) { store async throws in
                try await store.migrate()
                let setting = try await store.database.rows("SHOW statement_timeout", logger: quietLogger)
                #expect(try setting.first?.decode(String.self) == "300ms")
                do {
                    _ = try await store.database.rows("SELECT pg_sleep(3)", logger: quietLogger)
                    Issue.record("a 3 s statement outlived a 300 ms statement_timeout")
                } catch let error as PSQLError {
                    // 57014: query_canceled, "canceling statement due to statement timeout".
                    #expect(error.serverInfo?[.sqlState] == "57014")
                }
            }
        }
    }
}

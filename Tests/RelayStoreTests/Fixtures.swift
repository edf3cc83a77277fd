import EmbeddedPostgres
import Foundation
import Logging
import PostgresNIO
import RelayStore
import Testing

/// A logger that drops everything, so test output stays readable.
let quietLogger = Logger(label: "relaystore-tests") { _ in SwiftLogNoOpLogHandler() }

/// A fresh folder under /tmp for one test's cluster; every test gets its own, so suites can run in parallel.
func makeTemporaryFolder() throws -> String {
    let folder = "/tmp/relaystore-tests-\(UUID().uuidString.prefix(13))"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}

/// Starts an embedded server in a fresh folder, runs `body` with it, then stops it and deletes the folder.
func withEmbeddedPostgres<Result>(
    _ body: (EmbeddedPostgres, EmbeddedPostgres.Endpoint) async throws -> Result
) async throws -> Result {
    let folder = try makeTemporaryFolder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let postgres = EmbeddedPostgres(dataFolder: folder + "/pg", logger: quietLogger)
    try await postgres.start()
    do {
        let endpoint = try #require(await postgres.endpoint)
        let result = try await body(postgres, endpoint)
        try await postgres.stop()
        return result
    } catch {
        try? await postgres.stop()
        throw error
    }
}

/// Runs `sql` and returns the first column of every row as text.
func column(_ sql: String, in store: RelayStore) async throws -> [String] {
    var values: [String] = []
    for try await value in try await store.client.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) {
        values.append(value)
    }
    return values
}

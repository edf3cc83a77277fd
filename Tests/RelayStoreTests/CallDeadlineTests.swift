import Foundation
import Logging
import RelayStore
import Testing

@Suite("RelayStore call deadline")
struct CallDeadlineTests {
    @Test("a call that gets no connection fails as unavailable at its deadline instead of waiting on")
    func noServer() async throws {
        // No server listens on this socket: postgres-nio keeps trying to connect (its circuit breaker
        // opens only after 15 s), so without the deadline the call would wait that long.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("no-pg-\(UUID().uuidString)")
        var configuration = RelayStore.Configuration(
            unixSocketPath: folder.appendingPathComponent(".s.PGSQL.5432").path, username: "nobody", database: "none"
        )
        configuration.callDeadline = .milliseconds(500)
        let error = await #expect(throws: RelayStoreError.self) {
            try await RelayStore.withStore(configuration: configuration, logger: Logger(label: "test")) { store in
                try await store.listTenants()
            }
        }
        guard error?.code == .databaseUnavailable, let message = error?.detail else {
            Issue.record("expected databaseUnavailable, got \(String(describing: error))")
            return
        }
        #expect(message.contains("did not answer within 500 ms"))
    }
}

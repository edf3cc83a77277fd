import EmbeddedPostgres
import Foundation
import RelayStore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stops the server running in `dataFolder` whoever started it (fast shutdown through its postmaster's pid), and
/// waits until it is gone.
func killServer(in dataFolder: String) async throws {
    let contents = try String(contentsOfFile: dataFolder + "/postmaster.pid", encoding: .utf8)
    let pid = try #require(contents.split(separator: "\n").first.flatMap { pid_t($0) })
    kill(pid, SIGINT)
    for _ in 0..<600 where kill(pid, 0) == 0 {
        try await Task.sleep(for: .milliseconds(100))
    }
    #expect(kill(pid, 0) != 0, "the server did not stop")
}

@Suite("EmbeddedPostgres shared by several handles")
struct EmbeddedPostgresSharingTests {
    @Test("two handles starting at once on a fresh folder: one creates, the other waits and reuses")
    func concurrentStart() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dataFolder = folder + "/pg"
        let first = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        let second = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)

        async let a = first.start()
        async let b = second.start()
        let outcomes = try await [a, b]
        #expect(Set(outcomes) == [.created, .reused])
        let endpoint = try #require(await first.endpoint)
        #expect(await second.endpoint == endpoint)
        #expect(FileManager.default.fileExists(atPath: dataFolder + ".lock"))
        #expect(!FileManager.default.fileExists(atPath: dataFolder + "/" + ".lock"))

        // Both endpoints work.
        for handle in [first, second] {
            let endpoint = try #require(await handle.endpoint)
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                #expect(try await column("SELECT current_database()::text", in: store) == ["pushrelay"])
            }
        }

        let (starter, other) = await first.isStartedHere ? (first, second) : (second, first)
        #expect(await !other.isStartedHere)
        try await other.stop()
        #expect(try await starter.isRunning(), "the handle that did not start the server does not stop it")
        #expect(await other.endpoint == nil)

        try await starter.stop()
        #expect(try await !starter.isRunning(), "the starter, last to use it, stops it")
    }

    @Test("the starter leaves the server running while another handle still uses it")
    func starterLeavesItRunning() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dataFolder = folder + "/pg"
        let starter = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        let user = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        #expect(try await starter.start() == .created)
        #expect(try await user.start() == .reused)

        try await starter.stop()
        #expect(try await user.isRunning(), "the server is still in use")
        let endpoint = try #require(await user.endpoint)
        try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
            store async throws in
            #expect(try await column("SELECT 'still here'", in: store) == ["still here"])
        }
        try await user.stop()
        #expect(try await user.isRunning(), "a handle that did not start the server never stops it")

        // A later handle reuses the orphaned server.
        let later = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        #expect(try await later.start() == .reused)
        try await later.stop()
        try await killServer(in: dataFolder)
        #expect(try await !later.isRunning())
    }

    @Test("six handles starting at once run initdb once and share one server")
    func manyConcurrentStarts() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dataFolder = folder + "/pg"
        let handles = (0..<6).map { _ in EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger) }
        let outcomes = try await withThrowingTaskGroup(of: EmbeddedPostgres.StartOutcome.self) { group in
            for handle in handles {
                group.addTask { try await handle.start() }
            }
            var outcomes: [EmbeddedPostgres.StartOutcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.filter { $0 == .created }.count == 1)
        #expect(outcomes.filter { $0 == .reused }.count == 5)
        var endpoints = Set<EmbeddedPostgres.Endpoint>()
        for handle in handles {
            endpoints.insert(try #require(await handle.endpoint))
        }
        #expect(endpoints.count == 1)
        // Stopped in reverse order of start, the starter is not necessarily last; stop all, starter last.
        var starter: EmbeddedPostgres?
        for handle in handles {
            if await handle.isStartedHere {
                starter = handle
            } else {
                try await handle.stop()
            }
        }
        let last = try #require(starter)
        #expect(try await last.isRunning())
        try await last.stop()
        #expect(try await !last.isRunning())
    }
}

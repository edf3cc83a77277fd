import EmbeddedPostgres
import Foundation
import RelayStore
import Testing

@Suite("EmbeddedPostgres")
struct EmbeddedPostgresTests {
    @Test("start creates a cluster, a second start reuses it, stop stops it, a later start does not re-create it")
    func lifecycle() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dataFolder = folder + "/pg"

        let first = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        #expect(try await first.start() == .created)
        #expect(FileManager.default.fileExists(atPath: dataFolder + "/PG_VERSION"))
        #expect(try await first.isRunning())
        #expect(await first.isStartedHere)
        let endpoint = try #require(await first.endpoint)
        #expect(endpoint.socketDirectory == dataFolder)
        #expect(FileManager.default.fileExists(atPath: endpoint.socketPath))

        // A second handle on the same folder finds the running server: no initdb, no second server.
        let second = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        #expect(try await second.start() == .reused)
        #expect(await second.endpoint == endpoint)
        #expect(await !second.isStartedHere)
        try await second.stop()
        #expect(try await first.isRunning(), "stop() on a handle that did not start the server leaves it running")

        try await first.stop()
        #expect(try await !first.isRunning())
        #expect(await first.endpoint == nil)

        // The cluster is still there: starting again does not run initdb.
        let third = EmbeddedPostgres(dataFolder: dataFolder, logger: quietLogger)
        #expect(try await third.start() == .started)
        #expect(try await third.isRunning())
        try await third.stop()
        #expect(try await !third.isRunning())
    }

    @Test("the server is reachable through its socket and has the relay's database")
    func reachable() async throws {
        try await withEmbeddedPostgres { _, endpoint async throws in
            #expect(endpoint.database == "pushrelay")
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: quietLogger) {
                store async throws in
                #expect(try await column("SELECT current_database()::text", in: store) == ["pushrelay"])
                #expect(try await column("SELECT current_user::text", in: store) == ["pushrelay"])
                #expect(try await column("SHOW listen_addresses", in: store) == [""])
                #expect(try await column("SHOW server_encoding", in: store) == ["UTF8"])
            }
        }
    }

    @Test("the binaries are found under /usr/lib/postgresql")
    func binaries() throws {
        let folder = try EmbeddedPostgres.findBinaries()
        #expect(folder.hasPrefix("/usr/lib/postgresql/"))
        #expect(FileManager.default.isExecutableFile(atPath: folder + "/initdb"))
    }
}

import Foundation
import PostgresNIO
import Testing

@testable import RelayStore

@Suite("Connections held for the hot path")
struct HeldConnectionsTests {
    private enum BackendID: PreparedStatementName {}

    /// The server process of the connection a prepared call runs on.
    private static func preparedBackend(_ store: RelayStore) async throws -> Int {
        let rows = try await store.database.query(
            "SELECT pg_backend_pid()::int8", preparedAs: BackendID.self, logger: quietLogger)
        return try #require(rows.first).decode(Int.self)
    }

    /// The server process of the connection a ``DeadlineClient/rows(_:logger:)`` call runs on.
    private static func backend(_ store: RelayStore, sleeping seconds: Double = 0) async throws -> Int {
        let rows = try await store.database.rows(
            "SELECT pg_backend_pid()::int8 FROM pg_sleep(\(seconds))", logger: quietLogger)
        return try #require(rows.first).decode(Int.self)
    }

    /// The server process of `connection`.
    private static func backend(on connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query("SELECT pg_backend_pid()::int8", logger: quietLogger).collect()
        return try #require(rows.first).decode(Int.self)
    }

    /// No answer in time.
    private struct NoAnswer: Error {}

    /// `body`'s result, or ``NoAnswer`` after `seconds`: a statement on a connection postgres-nio has closed is
    /// never answered, and a test waiting on it would hang the whole run (`body` runs in a task of its own, left
    /// behind then).
    private static func within<Value: Sendable>(
        seconds: Int = 20, _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let (answers, answer) = AsyncStream.makeStream(
            of: Result<Value, any Error>.self, bufferingPolicy: .bufferingNewest(1))
        Task {
            do {
                answer.yield(.success(try await body()))
            } catch {
                answer.yield(.failure(error))
            }
        }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            answer.finish()
        }
        var next = answers.makeAsyncIterator()
        guard let result = await next.next() else { throw NoAnswer() }
        return try result.get()
    }

    @Test("calls one after another run on one held connection, prepared or not")
    func callsInTurnShareOneConnection() async throws {
        try await withMigratedStore { store in
            var backends: Set<Int> = []
            for _ in 0..<6 {
                backends.insert(try await Self.preparedBackend(store))
                backends.insert(try await Self.backend(store))
            }
            #expect(backends.count == 1)
            #expect(store.database.held.count == 1)
        }
    }

    @Test("a held connection the server ended goes back to the pool: the next call leases another one")
    func anEndedConnectionIsReplaced() async throws {
        try await withMigratedStore { store in
            let held = HeldConnections(client: store.client, limit: 2)
            let first = try #require(await held.take())
            let firstBackend = try await Self.backend(on: first.connection)
            held.putBack(first)
            _ = try await store.client.query("SELECT pg_terminate_backend(\(firstBackend)::int4)", logger: quietLogger)
                .collect()
            // postgres-nio marks the connection closed once the server has closed its socket.
            for _ in 0..<250 where !first.connection.isClosed { try await Task.sleep(for: .milliseconds(20)) }
            #expect(first.connection.isClosed)
            let next = try #require(await Self.within { await held.take() })
            #expect(try await Self.within { try await Self.backend(on: next.connection) } != firstBackend)
            #expect(held.count == 1)
            held.putBack(next)
            held.close()
        }
    }

    @Test("a held connection closed before the pool heard of it is not handed out again: the next call leases another")
    func aClosingConnectionIsNotLeasedAgain() async throws {
        try await withMigratedStore { store in
            for _ in 0..<2 {
                let held = HeldConnections(client: store.client, limit: 2)
                let first = try #require(await Self.within { await held.take() })
                let firstBackend = try await Self.backend(on: first.connection)
                held.putBack(first)
                // A connection is closed as soon as its close starts; the pool hears of it from the close future,
                // completed on the connection's event loop a turn later. Closing it in a turn that then keeps the
                // loop busy leaves the pool unaware of the close while the next call takes a connection.
                let connection = first.connection
                connection.eventLoop.execute {
                    let _: EventLoopFuture<Void> = connection.close()
                    Thread.sleep(forTimeInterval: 0.2)
                }
                let giveUp = ContinuousClock.now + .seconds(10)
                while !connection.isClosed, ContinuousClock.now < giveUp { await Task.yield() }
                let next = try #require(await Self.within { await held.take() })
                #expect(try await Self.within { try await Self.backend(on: next.connection) } != firstBackend)
                held.putBack(next)
                held.close()
            }
        }
    }

    @Test("more calls at once than held connections: the others go through the pool, and every one answers")
    func moreCallsThanHeldConnections() async throws {
        try await withMigratedStore { store in
            let backends = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 { group.addTask { try await Self.backend(store, sleeping: 0.1) } }
                return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
            }
            #expect(backends.count > store.database.held.limit)
        }
    }

    @Test("a connection unused for the idle limit goes back to the pool; one used in time is taken again")
    func idleConnectionsGoBack() async throws {
        try await withMigratedStore { store in
            let held = HeldConnections(client: store.client, limit: 2, idleLimit: .seconds(1))
            let first = try #require(await held.take())
            held.putBack(first)
            let again = try #require(await held.take())
            #expect(again === first)
            held.putBack(again)
            try await Task.sleep(for: .milliseconds(1_500))
            let later = try #require(await held.take())
            #expect(later !== first)
            #expect(held.count == 1)
            held.putBack(later)
            held.close()
        }
    }

    @Test("a call past its deadline gives up its place at once; the next call holds a connection anew")
    func aCallPastItsDeadlineGivesUpItsPlace() async throws {
        try await withMigratedStore(callDeadline: .seconds(3)) { store in
            _ = try await Self.backend(store)
            #expect(store.database.held.count == 1)
            await #expect(throws: RelayStoreError.self) { _ = try await Self.backend(store, sleeping: 8) }
            // The deadline answers the caller, then cancels the call, which gives up its place.
            for _ in 0..<500 where store.database.held.count != 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(store.database.held.count == 0)
            // Calls go on meanwhile, on a connection held anew.
            _ = try await Self.backend(store)
            #expect(store.database.held.count == 1)
        }
    }

    @Test("a caller cancelled while its lease waits for the pool stops waiting and leaves no place taken")
    func aCancelledLeaseLeavesNoPlace() async throws {
        // No server listens on this socket: the pool keeps trying to connect, and a lease waits.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("no-pg-\(UUID().uuidString)")
        let configuration = RelayStore.Configuration(
            unixSocketPath: folder.appendingPathComponent(".s.PGSQL.5432").path, username: "nobody", database: "none"
        )
        try await RelayStore.withStore(configuration: configuration, logger: quietLogger) { store in
            let held = HeldConnections(client: store.client, limit: 2)
            let taking = Task { await held.take() }
            try await Task.sleep(for: .milliseconds(200))
            #expect(held.count == 1)
            taking.cancel()
            #expect(try await Self.within { await taking.value } == nil)
            #expect(held.count == 0)
        }
    }

    @Test("closed, the holder gives its connections back and holds no more; calls still answer through the pool")
    func closedHolderHoldsNone() async throws {
        try await withMigratedStore { store in
            _ = try await Self.preparedBackend(store)
            #expect(store.database.held.count == 1)
            store.database.held.close()
            #expect(store.database.held.count == 0)
            _ = try await Self.preparedBackend(store)
            _ = try await Self.backend(store)
            #expect(store.database.held.count == 0)
        }
    }
}

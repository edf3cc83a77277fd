import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The store's connection pool behind a deadline: a call that PostgreSQL has not answered within
/// ``deadline`` fails with ``RelayStoreError/databaseUnavailable(_:)`` instead of waiting on.
///
/// postgres-nio 1.33.2 can leave a request waiting for a connection forever when the connection it was
/// waiting for fails as the server stops (vapor/postgres-nio#657); the caller, a backend's Send among them,
/// would never be answered. So each call runs in a task of its own, and a timer on an event loop cancels
/// that task at the deadline; cancelling ends a wait for a connection at once. The timer is a NIO scheduled
/// task, cancelled when the call ends: no sleeping Swift task is left behind per call (a cancelled
/// `Task.sleep` keeps its memory until its deadline, which at hundreds of calls a second adds up).
///
/// The deadline covers getting a connection and the first answer of a query; the rows of a query that has
/// begun answering arrive on a live connection, and a connection that dies fails them.
struct DeadlineClient: Sendable {
    /// The pool.
    let client: PostgresClient
    /// How long one call may wait for PostgreSQL.
    let deadline: TimeAmount
    /// Where the deadline timers run.
    let eventLoop: any EventLoop

    /// `client.query` within the deadline.
    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await withDeadline { try await client.query(query, logger: logger) }
    }

    /// `client.withConnection` within the deadline, which covers `body` too.
    func withConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withDeadline {
            try await client.withConnection { connection in try await body(connection) }
        }
    }

    /// `client.withTransaction` within the deadline, which covers `body` too.
    func withTransaction<Result: Sendable>(
        logger: Logger,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withDeadline {
            try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }

    /// Runs `operation` in a task of its own that is cancelled at the deadline, or when the caller is.
    private func withDeadline<Result: Sendable>(
        _ operation: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        let task = Task { try await operation() }
        let expired = ExpiryFlag()
        let timer = eventLoop.scheduleTask(in: deadline) {
            expired.set()
            task.cancel()
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            guard expired.isSet else { throw error }
            let milliseconds = deadline.nanoseconds / 1_000_000
            throw RelayStoreError.databaseUnavailable("PostgreSQL did not answer within \(milliseconds) ms")
        }
    }
}

/// Whether a call's deadline passed.
private final class ExpiryFlag: Sendable {
    private let value = Atomic<Bool>(false)

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() { value.store(true, ordering: .releasing) }
}

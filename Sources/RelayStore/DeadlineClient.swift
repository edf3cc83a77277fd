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
/// that task at the deadline and answers the caller at once, whatever the task does. The timer is a NIO scheduled
/// task, cancelled when the call ends: no sleeping Swift task is left behind per call (a cancelled
/// `Task.sleep` keeps its memory until its deadline, which at hundreds of calls a second adds up).
///
/// The deadline of ``query(_:logger:)`` covers getting a connection and the first answer; the rows of a query
/// that has begun answering arrive on a live connection, and a connection that dies fails them. The deadline of
/// the prepared calls and ``rows(_:logger:)`` covers all their rows.
struct DeadlineClient: Sendable {
    /// The pool.
    let client: PostgresClient
    /// How long one call may wait for PostgreSQL.
    let deadline: TimeAmount
    /// Where the deadline timers run.
    let eventLoop: any EventLoop
    /// Connections kept leased for the prepared statements and ``rows(_:logger:)``.
    let held: HeldConnections

    /// `client` behind `deadline`, its timers on `eventLoop`, holding a few of its connections between calls.
    init(client: PostgresClient, deadline: TimeAmount, eventLoop: any EventLoop) {
        self.client = client
        self.deadline = deadline
        self.eventLoop = eventLoop
        self.held = HeldConnections(client: client)
    }

    /// `client.query` within the deadline.
    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await withDeadline { try await client.query(query, logger: logger) }
    }

    /// `query` run as the prepared statement `name` (see ``PreparedStatementName``) within the deadline, which
    /// covers its rows too; unprepared when `name` stands for another text already.
    func query<Name: PreparedStatementName>(
        _ query: PostgresQuery, preparedAs name: Name.Type, logger: Logger
    ) async throws -> [PostgresRow] {
        guard PreparedQueryTexts.shared.claim(ObjectIdentifier(name), for: query.sql) else {
            return try await rows(query, logger: logger)
        }
        let statement = PreparedQuery<Name>(bindings: query.binds)
        return try await onHeldOrPooled { connection in
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return rows
        } pooled: { client in
            var rows: [PostgresRow] = []
            for try await row in try await client.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
    }

    /// Every row of `query` within the deadline, which covers them all: on a held connection when one is free,
    /// else on a pooled one.
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await onHeldOrPooled { connection in
            try await connection.query(query, logger: logger).collect()
        } pooled: { client in
            try await client.query(query, logger: logger).collect()
        }
    }

    /// `onConnection` within the deadline, which covers it all, on a held connection when one is free
    /// (``using(_:of:_:)``), else `pooled` on the pool.
    private func onHeldOrPooled<Result: Sendable>(
        _ onConnection: @escaping @Sendable (PostgresConnection) async throws -> Result,
        pooled: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        try await withDeadline { [client, held] in
            if let connection = await held.take() {
                return try await Self.using(connection, of: held, onConnection)
            }
            return try await pooled(client)
        }
    }

    /// Runs `body` on `connection` unless the call is cancelled already, then puts the connection back into
    /// `held`, also when `body` throws. A call cancelled while `body` runs (its deadline passed, or its caller was
    /// cancelled) abandons its place among the held connections at once: a call stuck on a connection would keep
    /// it for good.
    private static func using<Result: Sendable>(
        _ connection: HeldConnections.Held,
        of held: HeldConnections,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let result: Swift.Result<Result, any Error>
        if Task.isCancelled {
            result = .failure(CancellationError())
        } else {
            do {
                result = .success(
                    try await withTaskCancellationHandler {
                        try await body(connection.connection)
                    } onCancel: {
                        held.abandon(connection)
                    })
            } catch {
                result = .failure(error)
            }
        }
        held.putBack(connection)
        return try result.get()
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

    /// Runs `operation` in a task of its own and answers with its result, or with `databaseUnavailable` at
    /// the deadline, whichever comes first; at the deadline the task is cancelled and left to end on its own
    /// (a query on a connection that died unnoticed may never end). A cancelled caller cancels the task.
    private func withDeadline<Result: Sendable>(
        _ operation: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        let race = FirstAnswer<Result>()
        let task = Task {
            do {
                race.answer(.success(try await operation()))
            } catch {
                race.answer(.failure(error))
            }
        }
        let milliseconds = deadline.nanoseconds / 1_000_000
        let timer = eventLoop.scheduleTask(in: deadline) {
            race.answer(
                .failure(RelayStoreError.databaseUnavailable("PostgreSQL did not answer within \(milliseconds) ms")))
            task.cancel()
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in race.wait(continuation) }
        } onCancel: {
            task.cancel()
        }
    }
}

/// The first of several answers to one call: the operation's result or its deadline.
private final class FirstAnswer<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var answer: Result<Value, any Error>?
        var resumed = false
    }

    private let state = Mutex(State())

    /// Takes `answer` if it is the first; resumes the waiting caller, if it waits already.
    func answer(_ answer: Result<Value, any Error>) {
        let waiting: CheckedContinuation<Value, any Error>? = state.withLock { state in
            guard state.answer == nil else { return nil }
            state.answer = answer
            guard let continuation = state.continuation else { return nil }
            state.continuation = nil
            state.resumed = true
            return continuation
        }
        waiting?.resume(with: answer)
    }

    /// Waits for the first answer (resumed at once when it came already).
    func wait(_ continuation: CheckedContinuation<Value, any Error>) {
        let answer: Result<Value, any Error>? = state.withLock { state in
            guard let answer = state.answer, !state.resumed else {
                state.continuation = continuation
                return nil
            }
            state.resumed = true
            return answer
        }
        if let answer { continuation.resume(with: answer) }
    }
}

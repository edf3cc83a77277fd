import PostgresNIO
import Synchronization

/// A few of the pool's connections kept leased between calls, so that the calls of the hot path (prepared
/// statements and delivery writes) do not lease and return a pooled connection each.
///
/// postgres-nio 1.33.2's pool starts an idle-timeout timer each time a connection goes back to it: a task with a
/// task group of two more, cancelled at the next lease, whose `Task.sleep` still fires at its deadline (10 s
/// later, `RelayStore.pooled`) on a Dispatch thread: at several statements a single send, a burst of sends leaves
/// tens of thousands of timers firing over the next seconds, which cost the fan-outs running then CPU. A pool
/// minimum would keep the timers away too, but postgres-nio 1.33.2 trips a precondition after a restart with one.
///
/// At most ``limit`` connections are held. A call takes the one used last (``take()``), or leases one more while
/// fewer are held; with all of them in use it returns `nil` and the caller goes through the pool. A held
/// connection goes back with ``putBack(_:)``; one that is closed (PostgreSQL restarted or ended it) is given
/// back to the pool instead, which drops it, and so is one idle for ``idleLimit`` (noticed at the next take or
/// put back). A lease waits for the pool as any call does, and a cancelled caller (its deadline passed) stops
/// waiting for it. ``close()`` gives every idle held connection back and holds no more, so that the tasks holding
/// the leases end when the pool shuts down (its shutdown closes the connections, leased or not).
///
/// A held connection is used while the closure of its `withConnection` waits, not after: postgres-nio takes it
/// back only once that closure returns.
final class HeldConnections: Sendable {
    /// A connection leased from the pool until ended, counted among the held until ended or abandoned.
    final class Held: Sendable {
        /// The connection.
        let connection: PostgresConnection
        private let lease: Mutex<(continuation: CheckedContinuation<Void, Never>?, counted: Bool)>

        fileprivate init(connection: PostgresConnection, lease: CheckedContinuation<Void, Never>) {
            self.connection = connection
            self.lease = Mutex((lease, true))
        }

        /// Whether it still counts among the held connections.
        fileprivate var counted: Bool { lease.withLock { $0.counted } }

        /// Gives the connection back to the pool (once); returns whether it counted among the held until now.
        fileprivate func end() -> Bool {
            let (continuation, counted) = lease.withLock { lease in
                defer { lease = (nil, false) }
                return lease
            }
            continuation?.resume()
            return counted
        }

        /// Stops counting it among the held connections, its lease kept; returns whether it counted until now.
        fileprivate func uncount() -> Bool {
            lease.withLock { lease in
                defer { lease.counted = false }
                return lease.counted
            }
        }
    }

    private struct State {
        /// Held connections not in use, the one used last at the end, with when each was put back.
        var idle: [(held: Held, since: ContinuousClock.Instant)] = []
        /// Connections counted as held (idle, in use, or being leased).
        var count = 0
        var closed = false

        /// Takes the idle connections put back before `oldest` (they are at the front).
        mutating func expire(before oldest: ContinuousClock.Instant) -> [Held] {
            let stale = idle.prefix { $0.since < oldest }.map(\.held)
            idle.removeFirst(stale.count)
            return stale
        }
    }

    /// Connections held at most.
    let limit: Int
    /// How long a held connection may stay unused before it goes back to the pool.
    let idleLimit: Duration
    private let client: PostgresClient
    private let state = Mutex(State())

    /// Holds at most `limit` of `client`'s connections, each until unused for `idleLimit`.
    init(client: PostgresClient, limit: Int = 4, idleLimit: Duration = .seconds(5)) {
        self.client = client
        self.limit = limit
        self.idleLimit = idleLimit
    }

    /// Connections counted as held now, in use or not.
    var count: Int { state.withLock { $0.count } }

    /// A held connection for one call: the idle one used last, else a newly leased one while fewer than
    /// ``limit`` are held; `nil` when all are in use, after ``close()``, or when the pool gave no connection.
    func take() async -> Held? {
        enum Next {
            case held(Held)
            case lease
            case none
        }
        let now = ContinuousClock.now
        var ended: [Held] = []
        let next: Next = state.withLock { state in
            guard !state.closed else { return .none }
            ended = state.expire(before: now - idleLimit)
            while let (held, _) = state.idle.popLast() {
                guard held.connection.isClosed else { return .held(held) }
                ended.append(held)
            }
            guard state.count < limit else { return .none }
            state.count += 1
            return .lease
        }
        end(ended)
        switch next {
        case .held(let held): return held
        case .none: return nil
        case .lease:
            // The pool may hand out a connection the server has just closed before it learns of the close (one
            // given back closed a moment ago): a statement on it would never be answered. A connection is closed
            // (`isClosed`) before its close future completes, and the pool learns of the close in that future's
            // first callback: such a lease waits for the future, so that the pool drops the connection when it
            // comes back instead of handing it out again, and another is asked for.
            for _ in 0..<3 {
                guard let held = await lease() else { break }
                guard held.connection.isClosed else { return held }
                try? await held.connection.closeFuture.get()
                _ = held.end()
            }
            state.withLock { $0.count -= 1 }
            return nil
        }
    }

    /// Puts `held` back after a call: kept for the next one, or given back to the pool when it is closed, was
    /// abandoned, or the holder is closed.
    func putBack(_ held: Held) {
        let now = ContinuousClock.now
        let ended: [Held] = state.withLock { state in
            guard !state.closed, held.counted, !held.connection.isClosed else { return [held] }
            let stale = state.expire(before: now - idleLimit)
            state.idle.append((held, now))
            return stale
        }
        end(ended)
    }

    /// Stops counting `held`, whose call was cancelled (its deadline passed, or its caller was cancelled): a call
    /// stuck on a connection would otherwise keep its place for good. The connection goes back to the pool when
    /// the call ends and puts it back.
    func abandon(_ held: Held) {
        if held.uncount() { state.withLock { $0.count -= 1 } }
    }

    /// Gives every idle connection back to the pool; those in use go back when put back. Holds none after.
    func close() {
        let idle: [Held] = state.withLock { state in
            state.closed = true
            defer { state.idle = [] }
            return state.idle.map(\.held)
        }
        end(idle)
    }

    /// Gives `ended` back to the pool, uncounting those that counted.
    private func end(_ ended: [Held]) {
        let uncounted = ended.filter { $0.end() }.count
        if uncounted > 0 { state.withLock { $0.count -= uncounted } }
    }

    /// Leases a connection from the pool in a task of its own, which keeps the lease until the connection is
    /// ended; `nil` when the pool gives none or the caller is cancelled first (the lease request is then
    /// cancelled too, and a connection leased all the same goes straight back).
    private func lease() async -> Held? {
        let client = client
        let (handOver, handing) = AsyncStream.makeStream(of: Held.self, bufferingPolicy: .bufferingNewest(1))
        let leasing = Task {
            defer { handing.finish() }
            try await client.withConnection { connection in
                await withCheckedContinuation { (lease: CheckedContinuation<Void, Never>) in
                    let held = Held(connection: connection, lease: lease)
                    if case .terminated = handing.yield(held) { _ = held.end() }
                }
            }
        }
        return await withTaskCancellationHandler {
            var next = handOver.makeAsyncIterator()
            return await next.next()
        } onCancel: {
            leasing.cancel()
        }
    }
}

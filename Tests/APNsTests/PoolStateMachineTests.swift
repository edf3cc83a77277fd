import NIOCore
import Testing

@testable import APNs

/// The pool's state machine on a test clock: plain values, with the connections' free streams set by the test.
@Suite("Pool state machine")
struct PoolStateMachineTests {
    /// A pool of `slots` connections, started, each slot's first attempt connected and ready with `free` streams.
    static func runningPool(
        slots: Int = 2, free: Int = 10, seed: UInt64 = 7,
        _ configure: (inout APNsPoolConfiguration) -> Void = { _ in }
    ) -> (PoolStateMachine, FakeConnections) {
        let configuration = Fixtures.configuration {
            $0.connections = slots
            configure(&$0)
        }
        var pool = PoolStateMachine(configuration: .init(configuration), random: SeededGenerator(seed: seed))
        var connections = FakeConnections(slots: pool.slots.count)
        #expect(pool.start(connections: connections) == .connectFloor)
        for slot in 0..<slots {
            let id = pool.beginConnect(slot: slot)!
            let accepted = pool.connected(slot: slot, attempt: id)
            #expect(accepted)
            connections.setReady(slot, free: free)
            let expected: PoolStateMachine.StartOutcome? = slot == slots - 1 ? .succeeded : nil
            #expect(pool.connectionReady(slot: slot, connections: connections) == .dispatch(finishStart: expected))
        }
        return (pool, connections)
    }

    @Test func startSucceedsOnceEverySlotsFirstAttemptEndedWithOneReady() {
        let clock = ManualClock()
        var pool = PoolStateMachine(configuration: .init(Fixtures.configuration { $0.connections = 2 }))
        var connections = FakeConnections(slots: 2)
        #expect(pool.start(connections: connections) == .connectFloor)
        #expect(pool.start(connections: connections) == .wait)
        #expect(pool.beginConnect(slot: 0) == 1)
        #expect(pool.beginConnect(slot: 1) == 2)
        let failed = pool.connectFailed(slot: 1, attempt: 2, error: "refused", connections: connections)
        #expect(failed?.finishStart == nil)
        let accepted = pool.connected(slot: 0, attempt: 1)
        #expect(accepted)
        connections.setReady(0, free: 1)
        #expect(pool.connectionReady(slot: 0, connections: connections) == .dispatch(finishStart: .succeeded))
        #expect(pool.start(connections: connections) == .finish(.succeeded))
        // A request goes to the ready connection.
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(request, backPressure: .wait, connections: connections) == .send(slot: 0))
        #expect(request.attempts == 1)
    }

    @Test func startFailsWithTheLastConnectErrorWhenNoConnectionBecameReady() {
        var pool = PoolStateMachine(configuration: .init(Fixtures.configuration { $0.connections = 1 }))
        let connections = FakeConnections(slots: 1)
        #expect(pool.start(connections: connections) == .connectFloor)
        let id = pool.beginConnect(slot: 0)!
        let change = pool.connectFailed(slot: 0, attempt: id, error: "connection refused", connections: connections)
        #expect(change?.finishStart == .failed(.connectFailed("connection refused")))
    }

    @Test func successiveConnectFailuresWaitGrowingDelaysOfTheReconnectBackoff() throws {
        let backoff = ExponentialBackoff(first: .seconds(1), maximum: .seconds(60))
        var pool = PoolStateMachine(
            configuration: .init(
                Fixtures.configuration {
                    $0.connections = 1; $0.reconnectBackoff = backoff
                }),
            random: SeededGenerator(seed: 42)
        )
        let connections = FakeConnections(slots: 1)
        _ = pool.start(connections: connections)
        var attempt = pool.beginConnect(slot: 0) ?? 0
        var delays: [TimeAmount] = []
        for failure in 1...9 {
            let failed = pool.connectFailed(slot: 0, attempt: attempt, error: "refused", connections: connections)
            let change = try #require(failed)
            guard case .after(let delay) = change.reconnect else {
                Issue.record("failure \(failure) reconnected without a delay")
                return
            }
            let ceiling = backoff.ceiling(attempt: failure)
            #expect(delay <= ceiling && delay.nanoseconds >= ceiling.nanoseconds / 2, "failure \(failure): \(delay)")
            delays.append(delay)
            attempt = pool.reconnectDue(slot: 0) ?? 0
            #expect(attempt == failure + 1)
        }
        // Equal jitter: while the ceiling doubles (1 s to 32 s), each delay is at least half its ceiling, which is
        // the previous ceiling; then the delays stay between 30 and 60 s.
        let doubling = delays.prefix(6)
        #expect(zip(doubling, doubling.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(delays.dropFirst(6).allSatisfy { $0 >= .seconds(30) && $0 <= .seconds(60) })
        #expect(pool.slots[0].failures == 9)
        #expect(pool.connectionsOpened == 10)

        // The same seed gives the same delays.
        var again = PoolStateMachine(
            configuration: .init(
                Fixtures.configuration {
                    $0.connections = 1; $0.reconnectBackoff = backoff
                }),
            random: SeededGenerator(seed: 42)
        )
        _ = again.start(connections: connections)
        let first = again.beginConnect(slot: 0) ?? 0
        let change = again.connectFailed(slot: 0, attempt: first, error: "refused", connections: connections)
        #expect(change?.reconnect == .after(delays[0]))
    }

    @Test func aConnectionThatDeliveredIsReplacedAtOnceAndOneThatDidNotAfterTheBackoff() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1) {
            $0.reconnectBackoff = ExponentialBackoff(first: .seconds(1), maximum: .seconds(60))
        }
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(request, backPressure: .wait, connections: connections) == .send(slot: 0))
        clock.advance(.milliseconds(5))
        let action = pool.requestFinished(
            request, .success(APNsResponse(status: 200)), slot: 0, connections: connections, now: clock.now
        )
        guard case .complete(let report) = action else {
            Issue.record("a 200 was not completed")
            return
        }
        #expect(report.outcome == .delivered && report.attempts == 1)
        connections.setGone(0)
        #expect(pool.connectionDraining(slot: 0, hasDelivered: true) == .now(connection: 2))
        let accepted = pool.connected(slot: 0, attempt: 2)
        #expect(accepted)
        // The replacement is refused before it delivers anything: that counts as a failure.
        guard case .after(let delay) = pool.connectionDraining(slot: 0, hasDelivered: false) else {
            Issue.record("a connection that never delivered was replaced at once")
            return
        }
        #expect(delay >= .milliseconds(500) && delay <= .seconds(1))
    }

    @Test func requestsAPeersGoAwayLeftUnprocessedGoToAnotherConnectionWithoutUsingAnAttempt() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 2, free: 10)
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(request, backPressure: .wait, connections: connections) == .send(slot: 0))
        // Slot 0's connection got GOAWAY: it drains (out of its slot) and the request was above the last id.
        connections.setGone(0)
        _ = pool.connectionDraining(slot: 0, hasDelivered: true)
        let action = pool.requestFinished(
            request, .failure(.notProcessed("GOAWAY Shutdown")), slot: nil, connections: connections, now: clock.now
        )
        guard case .send(slot: 1) = action else {
            Issue.record("the unprocessed request did not go to the other connection: \(action)")
            return
        }
        #expect(request.attempts == 1)
        #expect(request.requeues == 1)
    }

    @Test func requestsLostWithAConnectionWaitFirstInTheQueueWhenNoConnectionHasRoom() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1, free: 10)
        let waiting = Fixtures.request(deadline: clock.now + .seconds(30))
        let lost = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(lost, backPressure: .wait, connections: connections) == .send(slot: 0))
        connections.setGone(0)
        #expect(pool.submit(waiting, backPressure: .wait, connections: connections) == .queued)
        // The connection's PING went unanswered: its requests are lost.
        let action = pool.requestFinished(
            lost, .failure(.connectionLost), slot: 0, connections: connections, now: clock.now)
        guard case .queued = action else {
            Issue.record("the lost request was not queued: \(action)")
            return
        }
        #expect(pool.queue.first === lost)
        // The replacement is ready: the lost request goes first, and its attempt is its first.
        connections.setReady(0, free: 10)
        guard case .send(let first) = pool.nextQueued(for: 0, connections: connections, now: clock.now) else {
            Issue.record("the queue was not dispatched")
            return
        }
        #expect(first === lost && lost.attempts == 1)
    }

    @Test func aRequestPastItsDeadlineOnItsStreamIsCompletedWithTheDeadlineFailure() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1)
        let request = Fixtures.request(deadline: clock.now + .seconds(1))
        _ = pool.submit(request, backPressure: .wait, connections: connections)
        clock.advance(.seconds(1))
        guard
            case .complete(let report) = pool.requestFinished(
                request, .failure(.deadlineExceeded), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("the timed-out request was not completed")
            return
        }
        #expect(report == APNsDeliveryReport(outcome: .retryLater, failure: .deadlineExceeded, attempts: 1))
    }

    @Test func queuedRequestsPastTheirDeadlineExpireWithTheLastConnectErrorWhileAConnectionIsBeingMade() {
        var clock = ManualClock()
        var pool = PoolStateMachine(configuration: .init(Fixtures.configuration { $0.connections = 1 }))
        let connections = FakeConnections(slots: 1)
        _ = pool.start(connections: connections)
        let id = pool.beginConnect(slot: 0)!
        _ = pool.connectFailed(slot: 0, attempt: id, error: "connection refused", connections: connections)
        // The slot tries again: requests wait for that attempt, up to their deadline.
        _ = pool.reconnectDue(slot: 0)
        let request = Fixtures.request(deadline: clock.now + .seconds(2))
        #expect(pool.submit(request, backPressure: .wait, connections: connections) == .queued)
        clock.advance(.seconds(1))
        #expect(pool.expireQueued(now: clock.now, connections: connections) == nil)
        clock.advance(.seconds(1))
        let expired = pool.expireQueued(now: clock.now, connections: connections)
        #expect(expired?.request === request)
        #expect(expired?.report.failure == .connectFailed("connection refused"))
        #expect(expired?.report.attempts == 0)
    }

    @Test func anUnreachablePeerFailsQueuedRequestsAtOnceAndRefusesNewOnesUntilAConnectionIsTriedAgain() {
        let clock = ManualClock()
        var pool = PoolStateMachine(configuration: .init(Fixtures.configuration { $0.connections = 2 }))
        let connections = FakeConnections(slots: pool.slots.count)
        _ = pool.start(connections: connections)
        let first = pool.beginConnect(slot: 0)!
        let second = pool.beginConnect(slot: 1)!
        let queued = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(queued, backPressure: .wait, connections: connections) == .queued)
        _ = pool.connectFailed(slot: 0, attempt: first, error: "connection refused", connections: connections)
        // One slot still connects: nothing fails yet.
        #expect(!pool.isUnreachable)
        #expect(pool.expireQueued(now: clock.now, connections: connections) == nil)
        _ = pool.connectFailed(slot: 1, attempt: second, error: "connection refused", connections: connections)
        #expect(pool.isUnreachable)
        // Long before its deadline, the queued request fails with the connection error; a new one is refused.
        let expired = pool.expireQueued(now: clock.now, connections: connections)
        #expect(expired?.request === queued)
        #expect(expired?.report.failure == .connectFailed("connection refused"))
        let refused = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(
            pool.submit(refused, backPressure: .wait, connections: connections)
                == .refuse(.connectFailed("connection refused")))
        // A reconnect under way: requests wait for it again.
        _ = pool.reconnectDue(slot: 0)
        #expect(!pool.isUnreachable)
        #expect(pool.submit(refused, backPressure: .wait, connections: connections) == .queued)
    }

    @Test func aFullQueueMakesCallersWaitWithinTheirBoundOrRefusesThem() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1, free: 1) {
            $0.waitQueueCapacity = 2
            $0.waiterCapacity = 1
        }
        let requests = (0..<5).map { _ in Fixtures.request(deadline: clock.now + .seconds(30)) }
        #expect(pool.submit(requests[0], backPressure: .wait, connections: connections) == .send(slot: 0))
        connections.available[0] = 0
        #expect(pool.submit(requests[1], backPressure: .wait, connections: connections) == .queued)
        #expect(pool.submit(requests[2], backPressure: .wait, connections: connections) == .queued)
        #expect(
            pool.submit(requests[3], backPressure: .failFast, connections: connections)
                == .refuse(.queueFull(capacity: 2)))
        #expect(pool.submit(requests[3], backPressure: .wait, connections: connections) == .queued)
        #expect(
            pool.submit(requests[4], backPressure: .wait, connections: connections) == .refuse(.queueFull(capacity: 2)))
        #expect(pool.queue.count == 2 && pool.waiters.count == 1)
        // A stream frees: the queue's first goes, and the waiting caller's request moves into the queue.
        connections.available[0] = 1
        guard case .send(let next) = pool.nextQueued(for: 0, connections: connections, now: clock.now) else {
            Issue.record("the queue was not dispatched")
            return
        }
        #expect(next === requests[1])
        connections.available[0] = 0
        guard case .done = pool.nextQueued(for: 0, connections: connections, now: clock.now) else {
            Issue.record("a full connection was given a request")
            return
        }
        #expect(pool.queue.map(ObjectIdentifier.init) == [requests[2], requests[3]].map(ObjectIdentifier.init))
        #expect(pool.waiters.isEmpty)
    }

    @Test func transientErrorsAreRetriedAfterTheBackoffWithinTheAttempts() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1) {
            $0.maximumAttempts = 2
            $0.retryBackoff = ExponentialBackoff(first: .milliseconds(100), maximum: .seconds(5))
        }
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = pool.submit(request, backPressure: .wait, connections: connections)
        let unavailable = APNsResponse(status: 503, reason: .serviceUnavailable)
        guard
            case .retry(let delay) = pool.requestFinished(
                request, .success(unavailable), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a 503 was not retried")
            return
        }
        #expect(delay >= .milliseconds(50) && delay <= .milliseconds(100))
        clock.advance(delay)
        guard case .send(slot: 0) = pool.retryDue(request, connections: connections) else {
            Issue.record("the retry was not sent")
            return
        }
        guard
            case .complete(let report) = pool.requestFinished(
                request, .success(unavailable), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a second 503 was retried beyond the attempts")
            return
        }
        #expect(report.outcome == .retryLater && report.attempts == 2)
    }

    @Test func shutdownLetsRequestsInFlightFinishWithinTheGracePeriodAndRefusesNewOnes() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1, free: 2) {
            $0.retryBackoff = ExponentialBackoff(first: .seconds(10), maximum: .seconds(10))
        }
        let inFlight = (0..<2).map { _ in Fixtures.request(deadline: clock.now + .seconds(30)) }
        for request in inFlight {
            #expect(pool.submit(request, backPressure: .wait, connections: connections) == .send(slot: 0))
        }
        connections.available[0] = 0
        connections.inFlight = 2
        let queued = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(queued, backPressure: .wait, connections: connections) == .queued)

        let shutdown = pool.shutdown(connections: connections)
        #expect(shutdown?.refused.map(ObjectIdentifier.init) == [ObjectIdentifier(queued)])
        #expect(pool.shutdown(connections: connections) == nil)
        let deadline = clock.now + .seconds(5)
        #expect(
            pool.shutdownWait(until: deadline, now: clock.now, connections: connections)
                == .checkAgain(in: .milliseconds(20)))
        let late = Fixtures.request(deadline: clock.now + .seconds(30))
        #expect(pool.submit(late, backPressure: .wait, connections: connections) == .refuse(.shutdown))
        #expect(pool.start(connections: connections) == .refuse(.shutdown))

        clock.advance(.seconds(1))
        guard
            case .complete(let delivered) = pool.requestFinished(
                inFlight[0], .success(APNsResponse(status: 200)), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a request finishing within the grace period was not completed")
            return
        }
        #expect(delivered.outcome == .delivered)
        // A retryable answer is not retried after shutdown.
        guard
            case .complete(let unavailable) = pool.requestFinished(
                inFlight[1], .success(APNsResponse(status: 503, reason: .serviceUnavailable)), slot: 0,
                connections: connections, now: clock.now)
        else {
            Issue.record("a retryable answer was retried after shutdown")
            return
        }
        #expect(unavailable.outcome == .retryLater && unavailable.attempts == 1)
        connections.inFlight = 0
        #expect(pool.shutdownWait(until: deadline, now: clock.now, connections: connections) == .closeConnections)
        // Nothing reconnects.
        #expect(pool.connectionDraining(slot: 0, hasDelivered: true) == nil)
    }

    @Test func afterTheGracePeriodTheConnectionsCloseAndTheirRequestsFail() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1)
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = pool.submit(request, backPressure: .wait, connections: connections)
        connections.inFlight = 1
        _ = pool.shutdown(connections: connections)
        let deadline = clock.now + .seconds(5)
        clock.advance(.milliseconds(4_999))
        #expect(
            pool.shutdownWait(until: deadline, now: clock.now, connections: connections)
                == .checkAgain(in: .milliseconds(20)))
        clock.advance(.milliseconds(1))
        #expect(pool.shutdownWait(until: deadline, now: clock.now, connections: connections) == .closeConnections)
        // The closed connection loses the request: it is not sent again after shutdown.
        guard
            case .complete(let report) = pool.requestFinished(
                request, .failure(.connectionLost), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("the lost request was not completed")
            return
        }
        // It was sent once (its stream opened), whatever became of it.
        #expect(report == APNsDeliveryReport(outcome: .retryLater, failure: .connectionLost, attempts: 1))
        let change = pool.connectionClosed(slot: 0, setupError: nil, hasDelivered: true, connections: connections)
        #expect(change == PoolStateMachine.SlotChange(finishStart: nil, reconnect: nil))
    }

    @Test func shutdownRefusesRequestsWaitingForARetry() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(slots: 1)
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = pool.submit(request, backPressure: .wait, connections: connections)
        guard
            case .retry = pool.requestFinished(
                request, .success(APNsResponse(status: 500)), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a 500 was not retried")
            return
        }
        let shutdown = pool.shutdown(connections: connections)
        #expect(shutdown?.refused.count == 1 && shutdown?.refused.first === request)
        #expect(pool.retryDue(request, connections: connections) == nil)
    }
}

import NIOCore
import Testing

@testable import APNs

/// The pool's state machine growing under load and shrinking when idle, on a test clock.
@Suite("Pool sizing")
struct PoolSizingTests {
    /// A started pool with a floor of `floor` and a cap of `cap` connections, the floor's connections ready with
    /// `limit` streams each, none in flight.
    private static func runningPool(
        floor: Int = 2, cap: Int = 4, limit: Int = 10, idleTimeout: TimeAmount = .minutes(5)
    ) -> (PoolStateMachine, FakeConnections) {
        let configuration = Fixtures.configuration {
            $0.connections = floor
            $0.maximumConnections = cap
            $0.idleConnectionTimeout = idleTimeout
        }
        var pool = PoolStateMachine(configuration: .init(configuration), random: SeededGenerator(seed: 3))
        var connections = FakeConnections(slots: pool.slots.count)
        #expect(pool.slots.count == cap)
        #expect(pool.start(connections: connections) == .connectFloor)
        for slot in 0..<floor {
            let id = pool.beginConnect(slot: slot)!
            let accepted = pool.connected(slot: slot, attempt: id)
            #expect(accepted)
            connections.setReady(slot, limit: limit, busy: 0)
            _ = pool.connectionReady(slot: slot, connections: connections)
        }
        return (pool, connections)
    }

    /// Submits `count` requests; returns how many went to a connection (their streams are counted on it).
    @discardableResult
    private static func submit(
        _ count: Int, to pool: inout PoolStateMachine, _ connections: inout FakeConnections, now: NIODeadline
    ) -> Int {
        var sent = 0
        for _ in 0..<count {
            let request = Fixtures.request(deadline: now + .seconds(30))
            if case .send(let slot) = pool.submit(request, backPressure: .wait, connections: connections) {
                connections.setReady(slot, limit: connections.limit[slot], busy: connections.slotInFlight[slot] + 1)
                connections.opened[slot] += 1
                sent += 1
            }
        }
        return sent
    }

    @Test func requestsFillTheLowestConnectionFirst() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(limit: 10)
        #expect(Self.submit(12, to: &pool, &connections, now: clock.now) == 12)
        #expect(connections.slotInFlight[0] == 10)
        #expect(connections.slotInFlight[1] == 2)
    }

    @Test func aPoolWhoseStreamsStayNearThePeersLimitOpensConnectionsUpToItsCap() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(floor: 2, cap: 4, limit: 10)
        // 17 of 20 streams in flight: under nine tenths of each connection's limit (9 + 9 = 18), no growth.
        Self.submit(17, to: &pool, &connections, now: clock.now)
        #expect(pool.grow(connections) == [])
        // 20 in flight and 5 waiting: 25 streams at 9 a connection need 3 connections.
        Self.submit(8, to: &pool, &connections, now: clock.now)
        #expect(pool.queue.count == 5)
        let first = pool.grow(connections)
        #expect(first.map(\.slot) == [2])
        #expect(pool.slots[2].inUse && pool.slots[2].attempt == first.first?.attempt)
        // While the new connection is being set up, the pool opens no other, however many wait.
        Self.submit(30, to: &pool, &connections, now: clock.now)
        #expect(pool.grow(connections) == [])
        // Ready, with APNs' limit of 1 stream until its first token is accepted: the demand (55 streams) needs 7
        // connections of 9; the cap is 4, so one more.
        let thirdAccepted = pool.connected(slot: 2, attempt: first[0].attempt)
        #expect(thirdAccepted)
        connections.setReady(2, limit: 1, busy: 0)
        _ = pool.connectionReady(slot: 2, connections: connections)
        let second = pool.grow(connections)
        #expect(second.map(\.slot) == [3])
        let fourthAccepted = pool.connected(slot: 3, attempt: second[0].attempt)
        #expect(fourthAccepted)
        connections.setReady(3, limit: 10, busy: 0)
        _ = pool.connectionReady(slot: 3, connections: connections)
        #expect(pool.grow(connections) == [])
        #expect(pool.slots.filter(\.inUse).count == 4)
    }

    @Test func aPoolWhoseConnectionsStillAllowOneStreamDoesNotGrow() {
        let clock = ManualClock()
        // Neither connection's first token was accepted yet: APNs allows each one stream.
        var (pool, connections) = Self.runningPool(floor: 2, cap: 4, limit: 1)
        Self.submit(30, to: &pool, &connections, now: clock.now)
        #expect(pool.queue.count == 28)
        #expect(pool.grow(connections) == [])
        // Once APNs raises a connection's limit, the demand is judged by it.
        connections.setReady(0, limit: 10, busy: 1)
        let growth = pool.grow(connections)
        #expect(growth.map(\.slot) == [2, 3])
    }

    @Test func aPoolWithAConnectionWaitingToReconnectDoesNotGrow() {
        let clock = ManualClock()
        var (pool, connections) = Self.runningPool(floor: 2, cap: 4, limit: 10)
        Self.submit(30, to: &pool, &connections, now: clock.now)
        // Slot 1's connection closed without delivering: it waits for the reconnect backoff.
        connections.setGone(1)
        let change = pool.connectionClosed(slot: 1, setupError: nil, hasDelivered: false, connections: connections)
        guard case .after = change.reconnect else {
            Issue.record("the slot reconnected at once: \(String(describing: change.reconnect))")
            return
        }
        #expect(pool.grow(connections) == [])
    }

    @Test func aSlotAboveTheFloorThatKeepsFailingToConnectIsTakenOutOfUseAfterTheIdleTimeout() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(floor: 1, cap: 2, limit: 10, idleTimeout: .minutes(5))
        Self.submit(15, to: &pool, &connections, now: clock.now)
        let growth = pool.grow(connections)
        #expect(growth.map(\.slot) == [1])
        // The peer refuses the new connection: the slot waits for its reconnect backoff, and the pool opens no
        // other meanwhile.
        let change = pool.connectFailed(
            slot: 1, attempt: growth[0].attempt, error: "refused", connections: connections)
        guard case .after = change?.reconnect else {
            Issue.record("a refused slot reconnected at once: \(String(describing: change))")
            return
        }
        #expect(pool.grow(connections) == [])
        #expect(pool.shrink(now: clock.now, connections: connections) == [])
        clock.advance(.minutes(5))
        #expect(pool.shrink(now: clock.now, connections: connections) == [1])
        #expect(!pool.slots[1].inUse)
        // Its reconnect timer, if it fires, connects nothing.
        #expect(pool.reconnectDue(slot: 1) == nil)
    }

    @Test func connectionsAboveTheFloorCloseAfterTheIdleTimeoutWithoutANewStream() {
        var clock = ManualClock()
        var (pool, connections) = Self.runningPool(floor: 1, cap: 3, limit: 10, idleTimeout: .minutes(5))
        Self.submit(15, to: &pool, &connections, now: clock.now)
        for growth in pool.grow(connections) {
            let accepted = pool.connected(slot: growth.slot, attempt: growth.attempt)
            #expect(accepted)
            connections.setReady(growth.slot, limit: 10, busy: 0)
            _ = pool.connectionReady(slot: growth.slot, connections: connections)
        }
        #expect(pool.slots.filter(\.inUse).count == 2)
        // Busy connections are not idle: the new one takes 5 of the waiting requests.
        connections.setReady(1, limit: 10, busy: 5)
        connections.opened[1] = 5
        #expect(pool.shrink(now: clock.now, connections: connections) == [])
        // The load ends: every stream is answered.
        for slot in 0..<3 where connections.ready[slot] { connections.setReady(slot, limit: 10, busy: 0) }
        #expect(pool.shrink(now: clock.now, connections: connections) == [])
        clock.advance(.minutes(4))
        // A new stream on slot 1 (answered by now) starts its idle time again.
        connections.opened[1] += 1
        #expect(pool.shrink(now: clock.now, connections: connections) == [])
        clock.advance(.minutes(4))
        #expect(pool.shrink(now: clock.now, connections: connections) == [])
        clock.advance(.minutes(1))
        // Five minutes without a stream: slot 1 goes out of use; the floor's slot 0, idle as long, stays.
        #expect(pool.shrink(now: clock.now, connections: connections) == [1])
        #expect(!pool.slots[1].inUse && pool.slots[1].connection == nil)
        #expect(pool.slots[0].inUse && pool.slots[0].connection != nil)
        connections.setGone(1)
        // Requests go to the floor's connection again, and a slot out of use does not reconnect.
        #expect(pool.slotWithFreeStream(connections) == 0)
        #expect(pool.reconnectDue(slot: 1) == nil)
    }
}

import NIOCore

extension PoolStateMachine {
    /// A slot to connect because the pool's streams stay near the peers' limits, with its attempt's id.
    struct Growth: Equatable {
        /// The slot taken into use.
        var slot: Int
        /// The id of its connection attempt (``beginConnect(slot:)`` was called).
        var attempt: Int
    }

    /// What the pool asks of its connections: the streams in flight and the requests waiting for one.
    func demand(_ connections: some PoolConnections) -> Int {
        connections.streamsInFlight + queue.count + waiters.count
    }

    /// How many connections the pool's demand needs, within the floor and the cap: a connection is counted
    /// full at nine tenths of its stream limit (the largest of the connections'), so that the pool grows before
    /// its streams run out. Nil while no connection's limit is above 1: APNs allows one stream until it accepts
    /// a connection's first token, so the pool cannot tell yet what its connections carry.
    func connectionsNeeded(_ connections: some PoolConnections) -> Int? {
        var limit = 0
        for index in slots.indices where slots[index].connection != nil {
            limit = max(limit, connections.streamLimit(slot: index))
        }
        guard limit > 1 else { return nil }
        let perConnection = max(1, limit * 9 / 10)
        let needed = (demand(connections) + perConnection - 1) / perConnection
        return min(configuration.maximumConnections, max(configuration.minimumConnections, needed))
    }

    /// The slots to connect now: as many as the demand needs beyond the slots in use, lowest first, only while
    /// every slot in use has a ready connection (a pool whose connections fail or are still being set up does
    /// not open more), some connection's stream limit is known, and the pool runs.
    mutating func grow(_ connections: some PoolConnections) -> [Growth] {
        guard lifecycle == .running else { return [] }
        var inUse = 0
        for index in slots.indices where slots[index].inUse {
            guard slots[index].connection != nil, connections.isReady(slot: index) else { return [] }
            inUse += 1
        }
        guard let needed = connectionsNeeded(connections) else { return [] }
        var missing = needed - inUse
        var growth: [Growth] = []
        for index in slots.indices where missing > 0 && !slots[index].inUse {
            slots[index].inUse = true
            slots[index].failures = 0
            if let attempt = beginConnect(slot: index) { growth.append(Growth(slot: index, attempt: attempt)) }
            missing -= 1
        }
        return growth
    }

    /// The slots above the floor to take out of use at `now`: those whose connections opened no stream and had
    /// none in flight for ``Configuration/idleConnectionTimeout``, and those that have waited as long to connect
    /// again after failures (a peer that refuses them is not asked again and again). Their connections, if any,
    /// are to be closed (they have nothing in flight), their reconnect timers cancelled. Looked at on every
    /// housekeeping tick.
    mutating func shrink(now: NIODeadline, connections: some PoolConnections) -> [Int] {
        var retired: [Int] = []
        for index in configuration.minimumConnections..<slots.count where slots[index].inUse {
            let opened: Int
            if slots[index].connection != nil {
                guard connections.isReady(slot: index), connections.streamsInFlight(slot: index) == 0 else {
                    slots[index].quiet = nil
                    continue
                }
                opened = connections.streamsOpened(slot: index)
            } else if slots[index].attempt == nil && slots[index].failures > 0 {
                // Waiting for its reconnect backoff.
                opened = -1
            } else {
                slots[index].quiet = nil
                continue
            }
            guard let quiet = slots[index].quiet, quiet.streamsOpened == opened else {
                slots[index].quiet = Quiet(since: now, streamsOpened: opened)
                continue
            }
            if now - quiet.since >= configuration.idleConnectionTimeout {
                slots[index] = Slot(inUse: false)
                retired.append(index)
            }
        }
        return retired
    }
}

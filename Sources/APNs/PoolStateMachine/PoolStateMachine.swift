import NIOCore

/// What the pool's state machine reads of the pool's connections: their figures now. They change with every frame
/// a connection reads, so the state machine is not sent copies of them: it reads them, through this, when it
/// chooses a connection, and so chooses on the same figures as the connections' own state machines.
protocol PoolConnections {
    /// How many more streams the current connection of `slot` takes now: 0 with none, or while it sets up.
    func availableStreams(slot: Int) -> Int
    /// Whether the current connection of `slot` takes streams (it is set up and not draining).
    func isReady(slot: Int) -> Bool
    /// Streams in flight over all the pool's connections, draining ones included.
    var streamsInFlight: Int { get }
    /// Streams in flight on the current connection of `slot`: 0 with none.
    func streamsInFlight(slot: Int) -> Int
    /// Streams opened since it began by the current connection of `slot`: 0 with none.
    func streamsOpened(slot: Int) -> Int
    /// How many streams the current connection of `slot` may have in flight at once now: 0 with none.
    func streamLimit(slot: Int) -> Int
}

/// A pool of connections to APNs, as a value: its slots (one connection each, with its connection attempts,
/// failures and reconnect backoff; the floor's always in use, the others up to the cap while the load needs
/// them), the queue of requests waiting for a stream, the callers waiting for room in the queue, the requests
/// waiting for a retry, and the pool's start and shutdown.
///
/// It takes the pool's inputs (a request submitted, a connection attempt's or connection's events, a request's
/// attempt ended, a timer due, the time at a housekeeping tick, shutdown) and answers each with what to do: open a
/// connection now or after a delay, send a request on a slot's connection, complete a request with its report,
/// retry it after a delay, complete the callers of `start()`, close the connections. ``APNsPool`` carries the
/// answers out; the time comes in as an argument, and the random numbers of the backoff's jitter from the generator
/// the state machine was made with.
///
/// Requests are references (``PendingRequest``): the state machine counts their attempts on them.
struct PoolStateMachine {
    /// The pool's settings the state machine keeps.
    struct Configuration {
        /// How many connections the pool keeps open however idle.
        var minimumConnections: Int
        /// How many connections the pool may open under load.
        var maximumConnections: Int
        /// How long a connection above the floor may go without a new stream before it is closed.
        var idleConnectionTimeout: TimeAmount
        /// How many requests may wait for a free stream.
        var waitQueueCapacity: Int
        /// How many callers may wait for room in a full queue.
        var waiterCapacity: Int
        /// How many attempts a retryable failure gets in all.
        var maximumAttempts: Int
        /// How many times a request may be sent again at once without using an attempt.
        var maximumResends: Int
        /// Delays between attempts of a retryable request.
        var retryBackoff: ExponentialBackoff
        /// Delays between failed connection attempts of a slot.
        var reconnectBackoff: ExponentialBackoff

        /// The settings of `pool`.
        init(_ pool: APNsPoolConfiguration) {
            minimumConnections = pool.connections
            maximumConnections = max(pool.connections, pool.maximumConnections)
            idleConnectionTimeout = pool.idleConnectionTimeout
            waitQueueCapacity = pool.waitQueueCapacity
            waiterCapacity = pool.waiterCapacity
            maximumAttempts = pool.maximumAttempts
            maximumResends = pool.maximumResends
            retryBackoff = pool.retryBackoff
            reconnectBackoff = pool.reconnectBackoff
        }
    }

    /// One of the pool's connections, across the connections that replace each other in it.
    struct Slot: Equatable {
        /// Whether the slot keeps a connection: always for the floor's slots, while the load asks for it above.
        var inUse: Bool
        /// The id of the slot's connection once its TCP connect succeeded (while it does TLS and HTTP/2 setup, and
        /// after), until it drains or closes.
        var connection: Int?
        /// The id of the connection attempt in progress, until its TCP connect ends.
        var attempt: Int?
        /// Connection attempts in a row that ended before a notification was delivered.
        var failures = 0
        /// Whether `start()` still waits for this slot's first attempt.
        var startPending = false
        /// Since when the slot has had no stream in flight (its connection idle, or none while it waits to
        /// reconnect), with the streams its connection had opened then.
        var quiet: Quiet?
    }

    /// A slot seen without a stream in flight: since when, and how many streams its connection had opened then
    /// (-1 without a connection); one opened since means it was not quiet all along.
    struct Quiet: Equatable {
        var since: NIODeadline
        var streamsOpened: Int
    }

    /// Where the pool is in its life.
    enum Lifecycle: Equatable {
        /// Not started: requests wait in the queue.
        case idle
        /// Started: the slots connect, and reconnect.
        case running
        /// Shut down: requests are refused, nothing reconnects.
        case shutDown
    }

    /// How `start()` ends for its callers.
    enum StartOutcome: Equatable {
        /// At least one connection became ready.
        case succeeded
        /// None did.
        case failed(APNsPoolError)
    }

    /// What a call of `start()` does.
    enum StartAction: Equatable {
        /// Refuse it: the pool is shut down.
        case refuse(APNsPoolError)
        /// Connect every slot of the floor (``beginConnect(slot:)``); the caller waits for the attempts.
        case connectFloor
        /// The caller waits for the attempts under way.
        case wait
        /// Complete the callers at once.
        case finish(StartOutcome)
    }

    /// When a slot connects again.
    enum Reconnect: Equatable {
        /// Now, with this connection id.
        case now(connection: Int)
        /// After this delay (then ``reconnectDue(slot:)``).
        case after(TimeAmount)
    }

    /// What follows the end of a slot's connection attempt or connection.
    struct SlotChange: Equatable {
        /// Complete the callers of `start()` so, when set: every slot's first attempt has ended.
        var finishStart: StartOutcome?
        /// Connect the slot again, when set.
        var reconnect: Reconnect?
    }

    /// What a connection that became ready does.
    enum ReadyAction: Equatable {
        /// Close it: the pool is shut down.
        case close
        /// Complete the callers of `start()` when set, then dispatch the queue to it (``nextQueued(for:connections:now:)``).
        case dispatch(finishStart: StartOutcome?)
    }

    /// What shutdown leaves to do, once.
    struct Shutdown {
        /// The requests waiting for a retry, in the queue and for room in it: refuse them as shut down.
        var refused: [PendingRequest]
        /// Complete the callers of `start()` still waiting so.
        var finishStart: StartOutcome
    }

    /// What a shutdown that waits for the streams in flight does next.
    enum ShutdownWait: Equatable {
        /// Close every connection: no stream is left, or the grace period is over.
        case closeConnections
        /// Look again after this delay.
        case checkAgain(in: TimeAmount)
    }

    let configuration: Configuration
    /// The slots, one connection each: the floor's first, then those the load may take, up to the cap.
    var slots: [Slot]
    /// Requests waiting for a free stream, oldest first (requests sent again at once go first).
    var queue = CircularBuffer<PendingRequest>()
    /// Requests whose callers wait for room in the queue, oldest first.
    var waiters = CircularBuffer<PendingRequest>()
    /// Requests waiting for their retry's delay to pass.
    var retries: [ObjectIdentifier: PendingRequest] = [:]
    /// Connection attempts made since the pool started (each one's id).
    var connectionsOpened = 0
    /// Where the pool is in its life.
    var lifecycle = Lifecycle.idle
    /// The last reason a connection could not be made, for the callers of `start()` and requests that time out.
    var lastConnectError: String?
    /// The source of the backoff's jitter.
    var random: any RandomNumberGenerator

    /// How often a shutdown looks whether the streams in flight have ended.
    static let shutdownCheckInterval = TimeAmount.milliseconds(20)

    /// A pool with `configuration`, not started, drawing jitter from `random`.
    init(configuration: Configuration, random: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        precondition(configuration.minimumConnections >= 1, "a pool needs at least one connection")
        self.configuration = configuration
        self.slots = (0..<configuration.maximumConnections).map {
            Slot(inUse: $0 < configuration.minimumConnections)
        }
        self.random = random
    }

    /// Whether requests wait in the queue or for room in it.
    var hasQueued: Bool { !queue.isEmpty || !waiters.isEmpty }

    /// Whether some slot's connection is ready.
    func anyReady(_ connections: some PoolConnections) -> Bool {
        slots.indices.contains { slots[$0].connection != nil && connections.isReady(slot: $0) }
    }

    // MARK: Start

    /// A caller asks to start the pool (and to wait until each slot's first attempt has ended).
    mutating func start(connections: some PoolConnections) -> StartAction {
        switch lifecycle {
        case .shutDown:
            return .refuse(.shutdown)
        case .idle:
            lifecycle = .running
            for index in slots.indices where slots[index].inUse { slots[index].startPending = true }
            return .connectFloor
        case .running:
            return slots.contains(where: \.startPending) ? .wait : .finish(startOutcome(connections))
        }
    }

    /// How `start()` ends now.
    func startOutcome(_ connections: some PoolConnections) -> StartOutcome {
        anyReady(connections) ? .succeeded : .failed(.connectFailed(lastConnectError ?? "no connection became ready"))
    }

    private mutating func startAttemptEnded(slot index: Int, connections: some PoolConnections) -> StartOutcome? {
        guard slots[index].startPending else { return nil }
        slots[index].startPending = false
        return slots.contains(where: \.startPending) ? nil : startOutcome(connections)
    }

    // MARK: Connections

    /// Begins a connection attempt for slot `index`; returns its id (the connection's, if it succeeds), or nil
    /// when the pool is shut down or the slot out of use.
    mutating func beginConnect(slot index: Int) -> Int? {
        guard lifecycle != .shutDown, slots[index].inUse else { return nil }
        connectionsOpened += 1
        slots[index].attempt = connectionsOpened
        return connectionsOpened
    }

    /// A reconnect's delay passed for slot `index`: returns the new attempt's id, or nil when shut down.
    mutating func reconnectDue(slot index: Int) -> Int? {
        beginConnect(slot: index)
    }

    /// Attempt `id` of slot `index` connected over TCP: returns whether the connection becomes the slot's (else
    /// it is closed: a later attempt replaced it, or the pool is shut down).
    mutating func connected(slot index: Int, attempt id: Int) -> Bool {
        guard slots[index].attempt == id, lifecycle != .shutDown else { return false }
        slots[index].attempt = nil
        slots[index].connection = id
        return true
    }

    /// Attempt `id` of slot `index` could not connect over TCP; nil when it was no longer the slot's.
    mutating func connectFailed(
        slot index: Int, attempt id: Int, error: String, connections: some PoolConnections
    ) -> SlotChange? {
        lastConnectError = error
        guard slots[index].attempt == id else { return nil }
        slots[index].attempt = nil
        slots[index].failures += 1
        let finishStart = startAttemptEnded(slot: index, connections: connections)
        return SlotChange(finishStart: finishStart, reconnect: reconnect(slot: index))
    }

    /// The connection of slot `index` became ready.
    mutating func connectionReady(slot index: Int, connections: some PoolConnections) -> ReadyAction {
        guard lifecycle != .shutDown else { return .close }
        return .dispatch(finishStart: startAttemptEnded(slot: index, connections: connections))
    }

    /// The connection of slot `index` drains (it finishes its streams elsewhere than in the slot): the slot
    /// connects again. A connection replaced before it delivered anything counts as a failed attempt, so that a
    /// peer that accepts and then refuses every connection is not hammered.
    mutating func connectionDraining(slot index: Int, hasDelivered: Bool) -> Reconnect? {
        slots[index].connection = nil
        slots[index].quiet = nil
        if !hasDelivered { slots[index].failures += 1 }
        return reconnect(slot: index)
    }

    /// The connection of slot `index` closed; `setupError` says why when it never became ready.
    mutating func connectionClosed(
        slot index: Int, setupError: String?, hasDelivered: Bool, connections: some PoolConnections
    ) -> SlotChange {
        slots[index].connection = nil
        slots[index].quiet = nil
        var finishStart: StartOutcome?
        if let setupError {
            lastConnectError = setupError
            finishStart = startAttemptEnded(slot: index, connections: connections)
        }
        if !hasDelivered { slots[index].failures += 1 }
        return SlotChange(finishStart: finishStart, reconnect: reconnect(slot: index))
    }

    /// When slot `index` connects again: at once after a connection that delivered, else after the reconnect
    /// backoff's delay for its failures in a row. Nil when shut down or the slot is out of use.
    private mutating func reconnect(slot index: Int) -> Reconnect? {
        guard lifecycle != .shutDown, slots[index].inUse else { return nil }
        let failures = slots[index].failures
        guard failures > 0 else {
            return beginConnect(slot: index).map { .now(connection: $0) }
        }
        return .after(configuration.reconnectBackoff.delay(attempt: failures, using: &random))
    }

    // MARK: Shutdown

    /// Shuts the pool down: it takes no more requests, refuses those waiting, and reconnects nothing; nil when it
    /// was shut down already. The connections finish their streams within the grace period (``shutdownWait``).
    mutating func shutdown(connections: some PoolConnections) -> Shutdown? {
        guard lifecycle != .shutDown else { return nil }
        lifecycle = .shutDown
        var refused = Array(retries.values)
        refused.append(contentsOf: queue)
        refused.append(contentsOf: waiters)
        retries.removeAll()
        queue.removeAll()
        waiters.removeAll()
        for index in slots.indices { slots[index].startPending = false }
        return Shutdown(refused: refused, finishStart: startOutcome(connections))
    }

    /// Whether a shutdown whose grace period ends at `deadline` closes the connections at `now`.
    func shutdownWait(
        until deadline: NIODeadline, now: NIODeadline, connections: some PoolConnections
    ) -> ShutdownWait {
        connections.streamsInFlight == 0 || now >= deadline
            ? .closeConnections : .checkAgain(in: Self.shutdownCheckInterval)
    }
}

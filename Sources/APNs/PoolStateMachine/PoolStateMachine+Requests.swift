import NIOCore

extension PoolStateMachine {
    /// What becomes of a submitted request.
    enum SubmitAction: Equatable {
        /// Send it on the connection of this slot (its attempt is counted).
        case send(slot: Int)
        /// It waits in the queue, or for room in it.
        case queued
        /// Refuse it so.
        case refuse(APNsPoolError)
    }

    /// The next step of dispatching the queue to a connection with free streams.
    enum DispatchAction {
        /// Send this request on the connection (its attempt is counted), then ask for the next step.
        case send(PendingRequest)
        /// This request's deadline passed while it waited: complete it with this report, then ask for the next step.
        case complete(PendingRequest, APNsDeliveryReport)
        /// Nothing more for this connection.
        case done
    }

    /// What becomes of a request whose attempt ended.
    enum ResultAction {
        /// Complete it with this report.
        case complete(APNsDeliveryReport)
        /// Send it again at once on the connection of this slot (its attempt is counted).
        case send(slot: Int)
        /// It waits in the queue, first, to be sent again at once.
        case queued
        /// Send it again after this delay (then ``retryDue(_:connections:)``).
        case retry(after: TimeAmount)
    }

    // MARK: Submitting

    /// A request comes in: it goes to the first connection with a free stream when none waits before it, else
    /// it waits in the queue; with the queue full, its caller waits for room (`backPressure` `.wait`, within the
    /// waiters' bound) or it is refused. While the peer is unreachable (``isUnreachable``) it is refused at once.
    mutating func submit(
        _ request: PendingRequest, backPressure: APNsBackPressure, connections: some PoolConnections
    ) -> SubmitAction {
        guard lifecycle != .shutDown else { return .refuse(.shutdown) }
        if let lastConnectError, isUnreachable { return .refuse(.connectFailed(lastConnectError)) }
        if queue.isEmpty, let slot = slotWithFreeStream(connections) {
            request.attempts += 1
            request.streamsOpened += 1
            return .send(slot: slot)
        }
        if queue.count < configuration.waitQueueCapacity {
            queue.append(request)
        } else if backPressure == .wait && waiters.count < configuration.waiterCapacity {
            waiters.append(request)
        } else {
            return .refuse(.queueFull(capacity: configuration.waitQueueCapacity))
        }
        return .queued
    }

    /// Whether no connection can take a request soon: the pool runs, no slot in use has a connection or an
    /// attempt under way, and each waits to reconnect after failing. Requests are then refused at once and those
    /// queued fail at the next housekeeping, with the last connection error, instead of waiting for their deadline
    /// in memory: the caller holds them (the relay, durably) until the peer is back.
    var isUnreachable: Bool {
        guard lifecycle == .running, lastConnectError != nil else { return false }
        return slots.allSatisfy { !$0.inUse || ($0.connection == nil && $0.attempt == nil && $0.failures > 0) }
    }

    /// The first slot whose connection has a free stream, if any has one: requests fill the lowest connections
    /// first, so that under a light load the connections above the floor go idle and close (``shrink(now:connections:)``).
    func slotWithFreeStream(_ connections: some PoolConnections) -> Int? {
        for index in slots.indices where slots[index].connection != nil && connections.availableStreams(slot: index) > 0
        {
            return index
        }
        return nil
    }

    // MARK: Dispatching the queue

    /// The next request of the queue for the connection of slot `index`, while it has free streams; callers
    /// waiting for room move into the queue as it empties.
    mutating func nextQueued(
        for index: Int, connections: some PoolConnections, now: NIODeadline
    ) -> DispatchAction {
        guard slots[index].connection != nil, connections.availableStreams(slot: index) > 0 else {
            admitWaiters()
            return .done
        }
        if queue.isEmpty { admitWaiters() }
        guard let request = queue.popFirst() else { return .done }
        if request.deadline <= now {
            return .complete(request, Self.report(request, .failure(.deadlineExceeded)))
        }
        request.attempts += 1
        request.streamsOpened += 1
        return .send(request)
    }

    /// Moves callers waiting for room into the queue, as far as it has room.
    mutating func admitWaiters() {
        while queue.count < configuration.waitQueueCapacity, let waiter = waiters.popFirst() {
            queue.append(waiter)
        }
    }

    /// The next request, first of the queue then of the waiters, whose deadline passed by `now` before it got a
    /// stream, or any of them while the peer is unreachable (``isUnreachable``), with its report: the last
    /// connection error while no connection is ready, else the deadline.
    mutating func expireQueued(
        now: NIODeadline, connections: some PoolConnections
    ) -> (request: PendingRequest, report: APNsDeliveryReport)? {
        let expired: PendingRequest
        let unreachable = isUnreachable
        if let first = queue.first, first.deadline <= now || unreachable {
            expired = queue.removeFirst()
        } else if let first = waiters.first, first.deadline <= now || unreachable {
            expired = waiters.removeFirst()
        } else {
            return nil
        }
        let failure: APNsTransportFailure =
            if !anyReady(connections), let lastConnectError { .connectFailed(lastConnectError) } else {
                .deadlineExceeded
            }
        return (expired, Self.report(expired, .failure(failure)))
    }

    // MARK: Results

    /// One attempt of `request` ended with `result`, on the connection of slot `index` (nil when that connection
    /// is no longer a slot's), at `now`.
    ///
    /// A 200 resets the slot's failures. A refused provider token (the connection drains already) and requests APNs
    /// did not process or that were lost with their connection go out again at once on another connection; the
    /// latter without using an attempt (APNs may or may not have them, and a connection taking hundreds of
    /// streams with it must not use up their attempts), within ``Configuration/maximumResends``. Other retryable
    /// results are retried after the retry backoff's delay (or the answer's `Retry-After`, when longer), within
    /// ``Configuration/maximumAttempts``. Nothing is
    /// retried past the request's deadline or after shutdown.
    mutating func requestFinished(
        _ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>, slot index: Int?,
        connections: some PoolConnections, now: NIODeadline
    ) -> ResultAction {
        if case .success(let response) = result, response.status == 200, let index {
            slots[index].failures = 0
        }
        let canRetry = lifecycle != .shutDown && request.deadline > now
        switch result {
        case .success(let response) where response.invalidatesConnection:
            guard canRetry && request.attempts < configuration.maximumAttempts else {
                return .complete(Self.report(request, result))
            }
            return requeueNow(request, connections: connections)
        case .success(let response) where response.outcomeClass == .retryLater:
            return retryLater(request, result, canRetry: canRetry, now: now)
        case .success, .failure(.deadlineExceeded):
            return .complete(Self.report(request, result))
        case .failure(.notProcessed), .failure(.connectionLost):
            request.attempts -= 1
            request.requeues += 1
            guard canRetry && request.requeues <= configuration.maximumResends else {
                return .complete(Self.report(request, result))
            }
            return requeueNow(request, connections: connections)
        case .failure:
            return retryLater(request, result, canRetry: canRetry, now: now)
        }
    }

    /// The delay of `request`'s retry passed; nil when it no longer waits for it (the pool shut down).
    mutating func retryDue(_ request: PendingRequest, connections: some PoolConnections) -> ResultAction? {
        guard retries.removeValue(forKey: ObjectIdentifier(request)) != nil else { return nil }
        return requeueNow(request, connections: connections)
    }

    private mutating func requeueNow(_ request: PendingRequest, connections: some PoolConnections) -> ResultAction {
        if let slot = slotWithFreeStream(connections) {
            request.attempts += 1
            request.streamsOpened += 1
            return .send(slot: slot)
        }
        queue.prepend(request)
        return .queued
    }

    private mutating func retryLater(
        _ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>, canRetry: Bool,
        now: NIODeadline
    ) -> ResultAction {
        guard canRetry, request.attempts < configuration.maximumAttempts else {
            return .complete(Self.report(request, result))
        }
        var delay = configuration.retryBackoff.delay(attempt: request.attempts, using: &random)
        if case .success(let response) = result, let asked = response.retryAfterDelay, asked > delay {
            delay = asked
        }
        guard now + delay < request.deadline else {
            return .complete(Self.report(request, result))
        }
        retries[ObjectIdentifier(request)] = request
        return .retry(after: delay)
    }

    /// The report of `request` whose last attempt ended with `result`.
    static func report(
        _ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>
    ) -> APNsDeliveryReport {
        switch result {
        case .success(let response):
            APNsDeliveryReport(outcome: response.outcomeClass, response: response, attempts: request.streamsOpened)
        case .failure(let failure):
            APNsDeliveryReport(outcome: .retryLater, failure: failure, attempts: request.streamsOpened)
        }
    }
}

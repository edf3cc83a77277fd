import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The pool's connections: opening them, carrying out what the pool's state machine answers to their events, and
/// what the state machine reads of them.
extension APNsPool {
    // MARK: Opening connections

    /// Opens connection attempt `id` of slot `index`: TCP, then TLS and HTTP/2 in the connection's handler.
    func connect(slot index: Int, attempt id: Int) {
        reconnectTasks[index] = nil
        let configuration = self.configuration
        let clock = self.clock
        let logger = self.logger
        let sslContext = self.sslContext
        let serverHostname = self.serverHostname
        ClientBootstrap(group: eventLoop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.maxMessagesPerRead, value: 16)
            .channelOption(
                .recvAllocator,
                value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65_536, maximum: 1 << 20)
            )
            .channelInitializer { channel in
                // A host name with several addresses may get several sockets (happy eyeballs): each
                // gets its own handler, and the winner's becomes the slot's connection below.
                channel.eventLoop.makeCompletedFuture {
                    let handler = APNsConnectionHandler(
                        id: id, configuration: configuration, clock: clock, logger: logger
                    )
                    handler.delegate = self
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                    try sync.addHandler(handler)
                }
            }
            .connect(host: configuration.endpoint.host, port: configuration.endpoint.port)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    self.connected(channel, slot: index, attempt: id)
                case .failure(let error):
                    self.connectFailed(slot: index, attempt: id, error: "\(error)")
                }
            }
    }

    private func connected(_ channel: any Channel, slot index: Int, attempt id: Int) {
        guard let handler = try? channel.pipeline.syncOperations.handler(type: APNsConnectionHandler.self),
            state.connected(slot: index, attempt: id)
        else {
            channel.close(promise: nil)
            return
        }
        handlers[index] = handler
        // The handshake and the first SETTINGS must also come within the connect timeout.
        let bound = NIOLoopBound(handler, eventLoop: eventLoop)
        eventLoop.assumeIsolated().scheduleTask(in: configuration.connectTimeout) {
            bound.value.setupTimedOut()
        }
    }

    private func connectFailed(slot index: Int, attempt id: Int, error: String) {
        guard let change = state.connectFailed(slot: index, attempt: id, error: error, connections: self) else {
            return
        }
        var metadata: Logger.Metadata = ["error": "\(error)"]
        if case .after(let delay) = change.reconnect {
            metadata["retry_in_ms"] = "\(delay.nanoseconds / 1_000_000)"
        }
        logger.warning("APNs connection failed; connecting again after a backoff", metadata: metadata)
        perform(change, slot: index)
    }

    /// Completes the callers of ``start()``, then connects the slot again as `change` says.
    private func perform(_ change: PoolStateMachine.SlotChange, slot index: Int) {
        if let outcome = change.finishStart { finishStart(outcome) }
        reconnect(slot: index, change.reconnect)
    }

    private func reconnect(slot index: Int, _ reconnect: PoolStateMachine.Reconnect?) {
        switch reconnect {
        case nil:
            break
        case .now(let id):
            connect(slot: index, attempt: id)
        case .after(let delay):
            logger.debug("APNs reconnect scheduled", metadata: ["in_ms": "\(delay.nanoseconds / 1_000_000)"])
            reconnectTasks[index] = eventLoop.assumeIsolated().scheduleTask(in: delay) { [weak self] in
                guard let self, let id = self.state.reconnectDue(slot: index) else { return }
                self.connect(slot: index, attempt: id)
            }
        }
    }

    /// Completes the callers of ``start()`` waiting now.
    func finishStart(_ outcome: PoolStateMachine.StartOutcome) {
        let waiters = startWaiters
        startWaiters.removeAll()
        for promise in waiters {
            switch outcome {
            case .succeeded: promise.succeed()
            case .failed(let error): promise.fail(error)
            }
        }
    }

    private func slotIndex(of connection: APNsConnectionHandler) -> Int? {
        handlers.firstIndex { $0 === connection }
    }

    // MARK: Sizing

    /// Connects the slots the pool's load needs beyond those in use (``PoolStateMachine/grow(_:)``).
    func grow() {
        for growth in state.grow(self) {
            logger.debug("APNs pool grows", metadata: ["slot": "\(growth.slot)", "demand": "\(state.demand(self))"])
            connect(slot: growth.slot, attempt: growth.attempt)
        }
    }

    /// Takes slot `index` out of use: cancels its reconnect timer and closes its idle connection (it has no stream
    /// in flight).
    func retire(slot index: Int) {
        reconnectTasks[index]?.cancel()
        reconnectTasks[index] = nil
        guard let handler = handlers[index] else { return }
        logger.debug("APNs pool shrinks", metadata: ["slot": "\(index)", "connection": "\(handler.id)"])
        handlers[index] = nil
        draining[ObjectIdentifier(handler)] = handler
        handler.close()
    }

    // MARK: Sending

    /// Dispatches the queue to the connection of slot `index` while it has free streams.
    func dispatch(slot index: Int, now: NIODeadline) {
        while true {
            switch state.nextQueued(for: index, connections: self, now: now) {
            case .send(let request): send(request, slot: index)
            case .complete(let request, let report): request.finish(.success(report))
            case .done: return
            }
        }
    }

    /// Sends `request` on the connection of slot `index`.
    func send(_ request: PendingRequest, slot index: Int) {
        if let handler = handlers[index] {
            handler.send(request)
        } else {
            let result = Result<APNsResponse, APNsTransportFailure>.failure(.notProcessed("connection not ready"))
            perform(state.requestFinished(request, result, slot: nil, connections: self, now: clock.uptime()), request)
        }
    }

    /// Carries out what becomes of `request` after an attempt.
    private func perform(_ action: PoolStateMachine.ResultAction, _ request: PendingRequest) {
        switch action {
        case .complete(let report):
            request.finish(.success(report))
        case .send(let slot):
            send(request, slot: slot)
        case .queued:
            break
        case .retry(let delay):
            let key = ObjectIdentifier(request)
            let box = NIOLoopBound(request, eventLoop: eventLoop)
            retryTasks[key] = eventLoop.assumeIsolated().scheduleTask(in: delay) { [weak self] in
                guard let self else { return }
                self.retryTasks[key] = nil
                guard let action = self.state.retryDue(box.value, connections: self) else { return }
                self.perform(action, box.value)
            }
        }
    }
}

extension APNsPool: APNsConnectionDelegate {
    func connectionBecameReady(_ connection: APNsConnectionHandler, now: NIODeadline) {
        guard let index = slotIndex(of: connection) else { return }
        switch state.connectionReady(slot: index, connections: self) {
        case .close:
            connection.close()
        case .dispatch(let finishStart):
            logger.debug("APNs connection ready", metadata: ["connection": "\(connection.id)"])
            if let finishStart { self.finishStart(finishStart) }
            dispatch(slot: index, now: now)
        }
    }

    func connectionHasCapacity(_ connection: APNsConnectionHandler, now: NIODeadline) {
        guard state.hasQueued, let index = slotIndex(of: connection) else { return }
        dispatch(slot: index, now: now)
    }

    func connectionIsDraining(_ connection: APNsConnectionHandler) {
        guard let index = slotIndex(of: connection) else { return }
        draining[ObjectIdentifier(connection)] = connection
        handlers[index] = nil
        reconnect(slot: index, state.connectionDraining(slot: index, hasDelivered: connection.hasDelivered))
    }

    func connectionClosed(_ connection: APNsConnectionHandler, setupError: (any Error)?) {
        draining[ObjectIdentifier(connection)] = nil
        guard let index = slotIndex(of: connection) else { return }
        handlers[index] = nil
        if let setupError {
            logger.warning("APNs connection setup failed", metadata: ["error": "\(setupError)"])
        }
        let change = state.connectionClosed(
            slot: index, setupError: setupError.map { "\($0)" }, hasDelivered: connection.hasDelivered,
            connections: self
        )
        perform(change, slot: index)
    }

    func connection(
        _ connection: APNsConnectionHandler,
        finished request: PendingRequest,
        with result: Result<APNsResponse, APNsTransportFailure>,
        now: NIODeadline
    ) {
        let action = state.requestFinished(
            request, result, slot: slotIndex(of: connection), connections: self, now: now
        )
        perform(action, request)
    }
}

extension APNsPool: PoolConnections {
    func availableStreams(slot index: Int) -> Int {
        handlers[index]?.availableStreams ?? 0
    }

    func isReady(slot index: Int) -> Bool {
        handlers[index]?.isReady ?? false
    }

    var streamsInFlight: Int {
        handlers.reduce(0) { $0 + ($1?.streamsInFlight ?? 0) } + draining.values.reduce(0) { $0 + $1.streamsInFlight }
    }

    func streamsInFlight(slot index: Int) -> Int {
        handlers[index]?.streamsInFlight ?? 0
    }

    func streamsOpened(slot index: Int) -> Int {
        handlers[index]?.streamsOpened ?? 0
    }

    func streamLimit(slot index: Int) -> Int {
        handlers[index]?.streamLimit ?? 0
    }
}

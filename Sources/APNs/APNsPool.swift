public import Logging
public import NIOCore
import NIOPosix
import NIOSSL

/// What became of one notification, after every attempt the pool made.
public struct APNsDeliveryReport: Sendable, Hashable {
    /// The outcome class of the last attempt.
    public var outcome: APNsOutcomeClass
    /// APNs's last answer, when there was one.
    public var response: APNsResponse?
    /// Why there was no answer, when there was none.
    public var failure: APNsTransportFailure?
    /// How many times the request was sent (0 when it never left the queue).
    public var attempts: Int

    /// A report with these fields.
    public init(
        outcome: APNsOutcomeClass, response: APNsResponse? = nil, failure: APNsTransportFailure? = nil,
        attempts: Int
    ) {
        self.outcome = outcome
        self.response = response
        self.failure = failure
        self.attempts = attempts
    }

    /// The reason to show: APNs's reason, or the transport failure.
    public var reasonText: String {
        if let reason = response?.reason { return reason.rawValue }
        if let failure { return "\(failure)" }
        return response.map { "HTTP \($0.status)" } ?? "unknown"
    }
}

/// Why the pool refused a request.
public enum APNsPoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The wait queue is full and the pool was told to fail fast.
    case queueFull(capacity: Int)
    /// The pool is shut down (or shutting down).
    case shutdown
    /// No connection could be made at start.
    case connectFailed(String)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case .queueFull(let capacity): "APNs pool is full: \(capacity) requests are already waiting"
        case .shutdown: "APNs pool is shut down"
        case .connectFailed(let why): "could not connect to APNs: \(why)"
        }
    }
}

/// A snapshot of a pool: its connections and queues.
public struct APNsPoolSnapshot: Sendable, Hashable {
    /// The current connection of each slot (nil while a slot reconnects).
    public var connections: [APNsConnectionSnapshot]
    /// Connections made since the pool started.
    public var connectionsOpened: Int
    /// Requests waiting for a stream.
    public var queued: Int
    /// Callers waiting for room in the queue.
    public var waiting: Int
    /// Streams in flight over all connections, draining ones included.
    public var streamsInFlight: Int
}

/// A pool of warm HTTP/2 connections to one APNs endpoint with one credential
/// (one pool per signing key and environment).
///
/// All state lives on one event loop; the public methods may be called from anywhere. Requests are
/// spread over the connections with free streams; when none has one, they wait in a bounded queue.
/// Retryable failures are retried with exponential backoff and jitter within the attempt bound and
/// the request's deadline; requests APNs did not process (GOAWAY, REFUSED_STREAM) and requests on
/// a connection whose provider token was refused go out again at once on another connection.
public final class APNsPool: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on `eventLoop`.

    /// The event loop that owns the pool and its connections.
    public let eventLoop: any EventLoop
    private let configuration: APNsPoolConfiguration
    private let clock: any APNsClock
    private let logger: Logger
    private let sslContext: NIOSSLContext
    private let serverHostname: String?

    private struct Slot {
        /// The slot's connection once TCP is up (while it does TLS and HTTP/2 setup, and after).
        var connection: APNsConnectionHandler?
        /// The id of the connection attempt in progress, until its TCP connect ends.
        var attempt: Int?
        /// Connection attempts in a row that ended before a notification was delivered.
        var failures = 0
        var reconnect: Scheduled<Void>?
        /// Whether `start()` still waits for this slot's first attempt.
        var startPending = false
    }

    private var slots: [Slot]
    private var draining: [ObjectIdentifier: APNsConnectionHandler] = [:]
    private var queue = CircularBuffer<PendingRequest>()
    private var waiters = CircularBuffer<PendingRequest>()
    private var retries: [ObjectIdentifier: (task: Scheduled<Void>, request: PendingRequest)] = [:]
    private var connectionsOpened = 0
    private var isShutdown = false
    private var lastConnectError: String?
    private var startWaiters: [EventLoopPromise<Void>] = []
    private var started = false
    private var housekeeping: RepeatedTask?
    private var rng = SystemRandomNumberGenerator()

    /// A pool for `configuration`; call ``start()`` to connect.
    public init(
        configuration: APNsPoolConfiguration,
        eventLoop: any EventLoop,
        clock: any APNsClock = SystemClock(),
        logger: Logger = Logger(label: "pushrelay.apns")
    ) throws {
        precondition(configuration.connections >= 1, "a pool needs at least one connection")
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.clock = clock
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        self.logger = logger
        self.sslContext = try NIOSSLContext(configuration: configuration.makeTLSConfiguration())
        let host = configuration.endpoint.host
        self.serverHostname = (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
        self.slots = Array(repeating: Slot(), count: configuration.connections)
        let interval = configuration.housekeepingInterval
        self.housekeeping = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) {
            [weak self] _ in self?.expireQueued()
        }
    }

    // MARK: Public API

    /// Opens every connection (TCP, TLS with ALPN h2, the peer's first SETTINGS) and returns when
    /// each has either become ready or failed; throws only when none could be made.
    public func start() async throws {
        try await startFuture().get()
    }

    /// ``start()`` as a future.
    public func startFuture() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            let promise = self.eventLoop.makePromise(of: Void.self)
            guard !self.isShutdown else {
                promise.fail(APNsPoolError.shutdown)
                return promise.futureResult
            }
            self.startWaiters.append(promise)
            if !self.started {
                self.started = true
                for index in self.slots.indices {
                    self.slots[index].startPending = true
                    self.connect(slot: index)
                }
            } else if !self.slots.contains(where: \.startPending) {
                self.finishStart()
            }
            return promise.futureResult
        }
    }

    /// Sends one notification and returns what became of it. Throws ``APNsValidationError`` when the
    /// notification is invalid (nothing is sent) and ``APNsPoolError`` when the pool refuses it.
    /// `whenFull` overrides the pool's ``APNsPoolConfiguration/backPressure`` for this call.
    public func send(
        _ notification: APNsNotification, whenFull: APNsBackPressure? = nil
    ) async throws -> APNsDeliveryReport {
        try await sendFuture(notification, whenFull: whenFull).get()
    }

    /// ``send(_:whenFull:)`` as a future, for callers that drive many sends from the event loop.
    public func sendFuture(
        _ notification: APNsNotification, whenFull: APNsBackPressure? = nil
    ) -> EventLoopFuture<APNsDeliveryReport> {
        sendFutures([notification], whenFull: whenFull)[0]
    }

    /// ``sendFuture(_:whenFull:)`` for several notifications at once, in order: one hop to the pool's event
    /// loop for all of them instead of one each. An invalid notification's future fails at once with its
    /// ``APNsValidationError``; the others are sent.
    public func sendFutures(
        _ notifications: [APNsNotification], whenFull: APNsBackPressure? = nil
    ) -> [EventLoopFuture<APNsDeliveryReport>] {
        var futures: [EventLoopFuture<APNsDeliveryReport>] = []
        futures.reserveCapacity(notifications.count)
        let completions = notifications.map { _ -> PendingRequest.Completion in
            let promise = eventLoop.makePromise(of: APNsDeliveryReport.self)
            futures.append(promise.futureResult)
            return .promise(promise)
        }
        submit(notifications, completions, whenFull: whenFull)
        return futures
    }

    /// ``sendFutures(_:whenFull:)`` without a future per notification, for a caller that takes many reports at
    /// once: `answers` gets each notification's report with its position in `notifications`, once each, on the
    /// pool's event loop (an invalid notification's ``APNsValidationError`` or the pool's refusal may come on
    /// the calling thread, before this returns). A future per notification and a callback on it were about a
    /// twentieth of the relay's CPU samples in a fan-out's profile.
    public func send(
        _ notifications: [APNsNotification], whenFull: APNsBackPressure? = nil,
        answers: @escaping @Sendable (Int, Result<APNsDeliveryReport, any Error>) -> Void
    ) {
        submit(notifications, notifications.indices.map { .answers(answers, position: $0) }, whenFull: whenFull)
    }

    /// Validates `notifications` and submits the valid ones with their completions, on the pool's event loop.
    private func submit(
        _ notifications: [APNsNotification], _ completions: [PendingRequest.Completion], whenFull: APNsBackPressure?
    ) {
        let deadline = NIODeadline.now() + configuration.requestTimeout
        let backPressure = whenFull ?? configuration.backPressure
        var valid: [(APNsNotification, PendingRequest.Completion)] = []
        valid.reserveCapacity(notifications.count)
        for (notification, completion) in zip(notifications, completions) {
            do {
                try notification.validate()
                valid.append((notification, completion))
            } catch {
                completion.finish(.failure(error))
            }
        }
        guard !valid.isEmpty else { return }
        if eventLoop.inEventLoop {
            for (notification, completion) in valid {
                submit(
                    PendingRequest(notification: notification, deadline: deadline, completion: completion), backPressure
                )
            }
        } else {
            eventLoop.execute { [valid] in
                for (notification, completion) in valid {
                    self.submit(
                        PendingRequest(notification: notification, deadline: deadline, completion: completion),
                        backPressure)
                }
            }
        }
    }

    /// The state of the pool's connections and queues.
    public func snapshot() async throws -> APNsPoolSnapshot {
        try await eventLoop.submit { self.makeSnapshot() }.get()
    }

    /// Stops taking requests, fails those still queued with ``APNsPoolError/shutdown``, waits up to
    /// `gracePeriod` for streams in flight, then closes every connection.
    public func shutdown(gracePeriod: TimeAmount = .seconds(5)) async {
        let drained = eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.beginShutdown()
            return self.waitForStreams(until: .now() + gracePeriod)
        }
        try? await drained.get()
        try? await eventLoop.submit { self.closeAll() }.get()
    }

    // MARK: Connections

    private func connect(slot index: Int) {
        guard !isShutdown else { return }
        connectionsOpened += 1
        let id = connectionsOpened
        slots[index].attempt = id
        slots[index].reconnect = nil
        let configuration = self.configuration
        let clock = self.clock
        let logger = self.logger
        let sslContext = self.sslContext
        let serverHostname = self.serverHostname
        let connectTimeout = configuration.connectTimeout
        ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
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
            slots[index].attempt == id, !isShutdown
        else {
            channel.close(promise: nil)
            return
        }
        slots[index].attempt = nil
        slots[index].connection = handler
        // The handshake and the first SETTINGS must also come within the connect timeout.
        let bound = NIOLoopBound(handler, eventLoop: eventLoop)
        eventLoop.assumeIsolated().scheduleTask(in: configuration.connectTimeout) {
            if bound.value.isConnecting {
                bound.value.lastError = APNsTransportFailure.connectFailed("no TLS and HTTP/2 setup in time")
                bound.value.close()
            }
        }
    }

    private func slotIndex(of connection: APNsConnectionHandler) -> Int? {
        slots.firstIndex { $0.connection === connection }
    }

    private func connectFailed(slot index: Int, attempt id: Int, error: String) {
        lastConnectError = error
        guard slots[index].attempt == id else { return }
        logger.warning("APNs connection failed", metadata: ["error": "\(error)"])
        slots[index].attempt = nil
        slots[index].failures += 1
        startAttemptEnded(slot: index)
        scheduleReconnect(slot: index)
    }

    private func scheduleReconnect(slot index: Int) {
        guard !isShutdown else { return }
        let failures = slots[index].failures
        guard failures > 0 else {
            connect(slot: index)
            return
        }
        let delay = configuration.reconnectBackoff.delay(attempt: failures, using: &rng)
        logger.debug("APNs reconnect scheduled", metadata: ["in_ms": "\(delay.nanoseconds / 1_000_000)"])
        slots[index].reconnect = eventLoop.assumeIsolated().scheduleTask(in: delay) { [weak self] in
            self?.connect(slot: index)
        }
    }

    private func startAttemptEnded(slot index: Int) {
        guard slots[index].startPending else { return }
        slots[index].startPending = false
        if !slots.contains(where: \.startPending) { finishStart() }
    }

    private func finishStart() {
        let waiters = startWaiters
        startWaiters.removeAll()
        let anyReady = slots.contains { $0.connection?.isReady == true }
        for promise in waiters {
            if anyReady {
                promise.succeed()
            } else {
                promise.fail(APNsPoolError.connectFailed(lastConnectError ?? "no connection became ready"))
            }
        }
    }

    // MARK: Dispatch

    private func submit(_ request: PendingRequest, _ backPressure: APNsBackPressure) {
        guard !isShutdown else {
            request.finish(.failure(APNsPoolError.shutdown))
            return
        }
        if queue.isEmpty, let connection = connectionWithMostFreeStreams() {
            connection.send(request)
            return
        }
        if queue.count < configuration.waitQueueCapacity {
            queue.append(request)
        } else if backPressure == .wait && waiters.count < configuration.waiterCapacity {
            waiters.append(request)
        } else {
            request.finish(.failure(APNsPoolError.queueFull(capacity: configuration.waitQueueCapacity)))
        }
    }

    private func connectionWithMostFreeStreams() -> APNsConnectionHandler? {
        var best: APNsConnectionHandler?
        var bestFree = 0
        for slot in slots {
            guard let connection = slot.connection else { continue }
            let free = connection.availableStreams
            if free > bestFree {
                best = connection
                bestFree = free
            }
        }
        return best
    }

    private func dispatchQueued(to connection: APNsConnectionHandler) {
        let now = NIODeadline.now()
        while connection.availableStreams > 0 {
            if queue.isEmpty { admitWaiters() }
            guard let request = queue.popFirst() else { break }
            if request.deadline <= now {
                complete(request, .failure(.deadlineExceeded))
            } else {
                connection.send(request)
            }
        }
        admitWaiters()
    }

    private func admitWaiters() {
        while queue.count < configuration.waitQueueCapacity, let waiter = waiters.popFirst() {
            queue.append(waiter)
        }
    }

    private func expireQueued() {
        let now = NIODeadline.now()
        while let first = queue.first, first.deadline <= now {
            queue.removeFirst()
            complete(first, .failure(queueTimeoutFailure()))
        }
        while let first = waiters.first, first.deadline <= now {
            waiters.removeFirst()
            complete(first, .failure(queueTimeoutFailure()))
        }
        admitWaiters()
        for slot in slots {
            guard !queue.isEmpty else { break }
            if let connection = slot.connection { dispatchQueued(to: connection) }
        }
    }

    private func queueTimeoutFailure() -> APNsTransportFailure {
        let anyReady = slots.contains { $0.connection?.isReady == true }
        if !anyReady, let lastConnectError { return .connectFailed(lastConnectError) }
        return .deadlineExceeded
    }

    // MARK: Results

    private func complete(_ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>) {
        switch result {
        case .success(let response):
            request.finish(
                .success(
                    APNsDeliveryReport(outcome: response.outcomeClass, response: response, attempts: request.attempts)))
        case .failure(let failure):
            request.finish(
                .success(APNsDeliveryReport(outcome: .retryLater, failure: failure, attempts: request.attempts)))
        }
    }

    private func handle(_ request: PendingRequest, _ result: Result<APNsResponse, APNsTransportFailure>) {
        let canRetry = !isShutdown && request.deadline > .now()
        switch result {
        case .success(let response) where response.invalidatesConnection:
            // The connection's token is refused: the connection is replaced and the request goes
            // out at once on another one.
            if canRetry && request.attempts < configuration.maximumAttempts {
                requeueNow(request)
            } else {
                complete(request, result)
            }
        case .success(let response) where response.outcomeClass == .retryLater:
            retryLater(request, result, canRetry: canRetry)
        case .success:
            complete(request, result)
        case .failure(.notProcessed), .failure(.connectionLost):
            // Never processed by APNs, or lost with its connection (APNs may or may not have it, and
            // a connection taking hundreds of streams with it must not use up their attempts): sent
            // again at once on another connection without using an attempt, within a bound.
            request.attempts -= 1
            request.requeues += 1
            if canRetry && request.requeues <= configuration.maximumResends {
                requeueNow(request)
            } else {
                complete(request, result)
            }
        case .failure(.deadlineExceeded):
            complete(request, result)
        case .failure:
            retryLater(request, result, canRetry: canRetry)
        }
    }

    private func requeueNow(_ request: PendingRequest) {
        if let connection = connectionWithMostFreeStreams() {
            connection.send(request)
        } else {
            queue.prepend(request)
        }
    }

    private func retryLater(
        _ request: PendingRequest,
        _ result: Result<APNsResponse, APNsTransportFailure>,
        canRetry: Bool
    ) {
        guard canRetry, request.attempts < configuration.maximumAttempts else {
            complete(request, result)
            return
        }
        let delay = configuration.retryBackoff.delay(attempt: request.attempts, using: &rng)
        guard .now() + delay < request.deadline else {
            complete(request, result)
            return
        }
        let key = ObjectIdentifier(request)
        let box = NIOLoopBound(request, eventLoop: eventLoop)
        let task = eventLoop.assumeIsolated().scheduleTask(in: delay) { [weak self] in
            guard let self else { return }
            self.retries[key] = nil
            self.requeueNow(box.value)
        }
        retries[key] = (task, request)
    }

    // MARK: Shutdown

    private func beginShutdown() {
        guard !isShutdown else { return }
        isShutdown = true
        housekeeping?.cancel()
        for index in slots.indices { slots[index].reconnect?.cancel() }
        for (_, retry) in retries {
            retry.task.cancel()
            retry.request.finish(.failure(APNsPoolError.shutdown))
        }
        retries.removeAll()
        let pending = Array(queue) + Array(waiters)
        queue.removeAll()
        waiters.removeAll()
        for request in pending { request.finish(.failure(APNsPoolError.shutdown)) }
        for index in slots.indices { slots[index].startPending = false }
        finishStart()
    }

    private func streamsInFlight() -> Int {
        slots.reduce(0) { $0 + ($1.connection?.streamsInFlight ?? 0) }
            + draining.values.reduce(0) { $0 + $1.streamsInFlight }
    }

    private func waitForStreams(until deadline: NIODeadline) -> EventLoopFuture<Void> {
        if streamsInFlight() == 0 || .now() >= deadline { return eventLoop.makeSucceededVoidFuture() }
        return eventLoop.flatScheduleTask(in: .milliseconds(20)) {
            self.waitForStreams(until: deadline)
        }.futureResult
    }

    private func closeAll() {
        for slot in slots { slot.connection?.close() }
        for connection in draining.values { connection.close() }
    }

    private func makeSnapshot() -> APNsPoolSnapshot {
        APNsPoolSnapshot(
            connections: slots.compactMap { $0.connection?.snapshot },
            connectionsOpened: connectionsOpened,
            queued: queue.count,
            waiting: waiters.count,
            streamsInFlight: streamsInFlight()
        )
    }
}

extension APNsPool: APNsConnectionDelegate {
    func connectionBecameReady(_ connection: APNsConnectionHandler) {
        guard let index = slotIndex(of: connection) else { return }
        guard !isShutdown else {
            connection.close()
            return
        }
        logger.debug("APNs connection ready", metadata: ["connection": "\(connection.id)"])
        startAttemptEnded(slot: index)
        dispatchQueued(to: connection)
    }

    func connectionHasCapacity(_ connection: APNsConnectionHandler) {
        if !queue.isEmpty || !waiters.isEmpty { dispatchQueued(to: connection) }
    }

    func connectionIsDraining(_ connection: APNsConnectionHandler) {
        guard let index = slotIndex(of: connection) else { return }
        draining[ObjectIdentifier(connection)] = connection
        slots[index].connection = nil
        // A connection replaced before it delivered anything counts as a failed attempt, so that a
        // peer that accepts and then refuses every connection is not hammered.
        if !connection.hasDelivered { slots[index].failures += 1 }
        scheduleReconnect(slot: index)
    }

    func connectionClosed(_ connection: APNsConnectionHandler, setupError: (any Error)?) {
        draining[ObjectIdentifier(connection)] = nil
        guard let index = slotIndex(of: connection) else { return }
        slots[index].connection = nil
        if let setupError {
            lastConnectError = "\(setupError)"
            logger.warning("APNs connection setup failed", metadata: ["error": "\(setupError)"])
            startAttemptEnded(slot: index)
        }
        if !connection.hasDelivered { slots[index].failures += 1 }
        scheduleReconnect(slot: index)
    }

    func connection(
        _ connection: APNsConnectionHandler,
        finished request: PendingRequest,
        with result: Result<APNsResponse, APNsTransportFailure>
    ) {
        if case .success(let response) = result {
            if response.status == 200, let index = slotIndex(of: connection) { slots[index].failures = 0 }
            if response.invalidatesConnection {
                connection.beginDraining(reason: response.reason?.rawValue ?? "provider token refused")
            }
        }
        handle(request, result)
    }
}

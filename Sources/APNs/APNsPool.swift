public import Logging
public import NIOCore
import NIOPosix
import NIOSSL

/// A pool of warm HTTP/2 connections to one APNs endpoint with one credential
/// (one pool per signing key and environment).
///
/// All state lives on one event loop; the public methods may be called from anywhere. Requests are
/// spread over the connections with free streams; when none has one, they wait in a bounded queue.
/// Retryable failures are retried with exponential backoff and jitter within the attempt bound and
/// the request's deadline; requests APNs did not process (GOAWAY, REFUSED_STREAM) and requests on
/// a connection whose provider token was refused go out again at once on another connection.
///
/// The decisions are a ``PoolStateMachine``'s, and each connection's a ``ConnectionStateMachine``'s: the pool
/// carries out what its state machine answers (it opens connections, sends requests on them, completes requests,
/// runs the timers) and tells it what happened, with the time by its clock.
public final class APNsPool: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on `eventLoop`.

    /// The event loop that owns the pool and its connections.
    public let eventLoop: any EventLoop
    let configuration: APNsPoolConfiguration
    let clock: any APNsClock
    let logger: Logger
    let sslContext: NIOSSLContext
    let serverHostname: String?

    /// The decisions: slots, queues, retries, start and shutdown.
    var state: PoolStateMachine
    /// The current connection of each slot, as the state machine's slots say.
    var handlers: [APNsConnectionHandler?]
    /// Connections that left their slot and finish their streams.
    var draining: [ObjectIdentifier: APNsConnectionHandler] = [:]
    /// The reconnect timer of each slot.
    var reconnectTasks: [Scheduled<Void>?]
    /// The timers of requests waiting for a retry.
    var retryTasks: [ObjectIdentifier: Scheduled<Void>] = [:]
    /// Callers of ``start()`` waiting for the slots' first attempts.
    var startWaiters: [EventLoopPromise<Void>] = []
    private var housekeeping: RepeatedTask?

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
        self.state = PoolStateMachine(configuration: .init(configuration))
        self.handlers = Array(repeating: nil, count: state.slots.count)
        self.reconnectTasks = Array(repeating: nil, count: state.slots.count)
        let interval = configuration.housekeepingInterval
        self.housekeeping = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) {
            [weak self] _ in self?.houseKeep()
        }
    }

    // MARK: Public API

    /// Opens the floor's connections (TCP, TLS with ALPN h2, the peer's first SETTINGS) and returns when
    /// each has either become ready or failed; throws only when none could be made. More connections are
    /// opened while the streams stay near the peers' limits, up to ``APNsPoolConfiguration/maximumConnections``,
    /// and those above the floor close after ``APNsPoolConfiguration/idleConnectionTimeout`` without a stream.
    public func start() async throws {
        try await eventLoop.flatSubmit { self.startOnLoop() }.get()
    }

    private func startOnLoop() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        switch state.start(connections: self) {
        case .refuse(let error):
            promise.fail(error)
        case .connectFloor:
            startWaiters.append(promise)
            for slot in state.slots.indices where state.slots[slot].inUse {
                if let id = state.beginConnect(slot: slot) { connect(slot: slot, attempt: id) }
            }
        case .wait:
            startWaiters.append(promise)
        case .finish(let outcome):
            startWaiters.append(promise)
            finishStart(outcome)
        }
        return promise.futureResult
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
        let promise = eventLoop.makePromise(of: APNsDeliveryReport.self)
        submit(.notification(notification), .promise(promise), whenFull: whenFull)
        return promise.futureResult
    }

    /// Sends one request to another HTTP/2 API through the pool and returns what became of it: the report's
    /// outcome is the HTTP status's (``HTTP2Request``), its response has the answer's body. Throws
    /// ``APNsValidationError`` when the request is invalid (nothing is sent) and ``APNsPoolError`` when the pool
    /// refuses it.
    public func send(_ request: HTTP2Request, whenFull: APNsBackPressure? = nil) async throws -> APNsDeliveryReport {
        let promise = eventLoop.makePromise(of: APNsDeliveryReport.self)
        submit(.request(request), .promise(promise), whenFull: whenFull)
        return try await promise.futureResult.get()
    }

    /// ``sendFuture(_:whenFull:)`` for several notifications at once, in order: one hop to the pool's event
    /// loop for all of them instead of one each. An invalid notification's future fails at once with its
    /// ``APNsValidationError``; the others are sent.
    package func sendFutures(
        _ notifications: [APNsNotification], whenFull: APNsBackPressure? = nil
    ) -> [EventLoopFuture<APNsDeliveryReport>] {
        var futures: [EventLoopFuture<APNsDeliveryReport>] = []
        futures.reserveCapacity(notifications.count)
        let completions = notifications.map { _ -> PendingRequest.Completion in
            let promise = eventLoop.makePromise(of: APNsDeliveryReport.self)
            futures.append(promise.futureResult)
            return .promise(promise)
        }
        submit(notifications.map { .notification($0) }, completions, whenFull: whenFull)
        return futures
    }

    /// Sends several notifications at once, with one hop to the pool's event loop, and no future per
    /// notification, for a caller that takes many reports at once: `answers` gets each notification's report
    /// with its position in `notifications`, once each, on the pool's event loop (an invalid notification's
    /// ``APNsValidationError`` or the pool's refusal may come on the calling thread, before this returns).
    public func send(
        _ notifications: [APNsNotification], whenFull: APNsBackPressure? = nil,
        answers: @escaping @Sendable (Int, Result<APNsDeliveryReport, any Error>) -> Void
    ) {
        submit(
            notifications.map { .notification($0) }, notifications.indices.map { .answers(answers, position: $0) },
            whenFull: whenFull)
    }

    /// ``send(_:whenFull:answers:)`` for requests to another HTTP/2 API (``HTTP2Request``).
    public func send(
        _ requests: [HTTP2Request], whenFull: APNsBackPressure? = nil,
        answers: @escaping @Sendable (Int, Result<APNsDeliveryReport, any Error>) -> Void
    ) {
        submit(
            requests.map { .request($0) }, requests.indices.map { .answers(answers, position: $0) },
            whenFull: whenFull)
    }

    /// Validates `content` and submits it with its completion, on the pool's event loop.
    private func submit(
        _ content: PendingRequest.Content, _ completion: PendingRequest.Completion, whenFull: APNsBackPressure?
    ) {
        do {
            try validate(content)
        } catch {
            completion.finish(.failure(error))
            return
        }
        let deadline = clock.uptime() + configuration.requestTimeout
        let backPressure = whenFull ?? configuration.backPressure
        // The request is made on the loop: it belongs to it.
        if eventLoop.inEventLoop {
            submit(PendingRequest(content, deadline: deadline, completion: completion), backPressure)
        } else {
            eventLoop.execute {
                self.submit(PendingRequest(content, deadline: deadline, completion: completion), backPressure)
            }
        }
    }

    /// Validates `contents` and submits the valid ones with their completions, on the pool's event loop.
    private func submit(
        _ contents: [PendingRequest.Content], _ completions: [PendingRequest.Completion],
        whenFull: APNsBackPressure?
    ) {
        let deadline = clock.uptime() + configuration.requestTimeout
        let backPressure = whenFull ?? configuration.backPressure
        var valid: [(PendingRequest.Content, PendingRequest.Completion)] = []
        valid.reserveCapacity(contents.count)
        for (content, completion) in zip(contents, completions) {
            do {
                try validate(content)
                valid.append((content, completion))
            } catch {
                completion.finish(.failure(error))
            }
        }
        guard !valid.isEmpty else { return }
        if eventLoop.inEventLoop {
            for (content, completion) in valid {
                submit(PendingRequest(content, deadline: deadline, completion: completion), backPressure)
            }
        } else {
            eventLoop.execute { [valid] in
                for (content, completion) in valid {
                    self.submit(PendingRequest(content, deadline: deadline, completion: completion), backPressure)
                }
            }
        }
    }

    /// Checks a request before it is queued. Throws ``APNsValidationError``.
    private func validate(_ content: PendingRequest.Content) throws(APNsValidationError) {
        switch content {
        case .notification(let notification):
            try notification.validate()
        case .request(let request):
            try request.validate()
            let limit = min(configuration.largestBody, HTTP2Request.maximumBodySize)
            if request.body.count > limit {
                throw .payloadTooLarge(size: request.body.count, limit: limit)
            }
        }
    }

    /// The state of the pool's connections and queues.
    public func snapshot() async throws -> APNsPoolSnapshot {
        try await eventLoop.submit {
            APNsPoolSnapshot(
                connections: self.handlers.compactMap { $0?.snapshot },
                connectionsOpened: self.state.connectionsOpened,
                queued: self.state.queue.count,
                waiting: self.state.waiters.count,
                streamsInFlight: self.streamsInFlight
            )
        }.get()
    }

    /// Stops taking requests, fails those still queued with ``APNsPoolError/shutdown``, waits up to
    /// `gracePeriod` for streams in flight, then closes every connection.
    public func shutdown(gracePeriod: TimeAmount = .seconds(5)) async {
        let drained = eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.beginShutdown()
            return self.waitForStreams(until: self.clock.uptime() + gracePeriod)
        }
        try? await drained.get()
        try? await eventLoop.submit { self.closeAll() }.get()
    }

    // MARK: Requests

    /// Submits `request` on the event loop.
    private func submit(_ request: PendingRequest, _ backPressure: APNsBackPressure) {
        switch state.submit(request, backPressure: backPressure, connections: self) {
        case .send(let slot): send(request, slot: slot)
        case .queued: if state.queue.count == 1 { grow() }
        case .refuse(let error): request.finish(.failure(error))
        }
    }

    /// Expires requests that waited past their deadline, sizes the pool to its load, and dispatches the queue to
    /// connections with free streams.
    private func houseKeep() {
        let now = clock.uptime()
        grow()
        for slot in state.shrink(now: now, connections: self) { retire(slot: slot) }
        while let (request, report) = state.expireQueued(now: now, connections: self) {
            request.finish(.success(report))
        }
        state.admitWaiters()
        for slot in handlers.indices {
            guard !state.queue.isEmpty else { break }
            if handlers[slot] != nil { dispatch(slot: slot, now: now) }
        }
    }

    // MARK: Shutdown

    private func beginShutdown() {
        guard let shutdown = state.shutdown(connections: self) else { return }
        housekeeping?.cancel()
        for task in reconnectTasks { task?.cancel() }
        for task in retryTasks.values { task.cancel() }
        retryTasks.removeAll()
        for request in shutdown.refused { request.finish(.failure(APNsPoolError.shutdown)) }
        finishStart(shutdown.finishStart)
    }

    private func waitForStreams(until deadline: NIODeadline) -> EventLoopFuture<Void> {
        switch state.shutdownWait(until: deadline, now: clock.uptime(), connections: self) {
        case .closeConnections:
            return eventLoop.makeSucceededVoidFuture()
        case .checkAgain(let delay):
            return eventLoop.flatScheduleTask(in: delay) { self.waitForStreams(until: deadline) }.futureResult
        }
    }

    private func closeAll() {
        for handler in handlers { handler?.close() }
        for connection in draining.values { connection.close() }
    }
}

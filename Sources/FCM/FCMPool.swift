public import APNs
import Foundation
public import Logging
public import NIOCore

/// Warm HTTP/2 connections to FCM for one service account, and the account's access token: the FCM HTTP v1
/// engine.
///
/// `messages:send` goes through the house engine (an ``APNs/APNsPool`` of ``APNs/HTTP2Request``s: self-sizing,
/// stream limits, GOAWAY, PINGs, deadlines, retries of 429 and 5xx honouring `Retry-After`). The access token is
/// an ``AccessTokenStateMachine``'s: fetched once for the account (never per message) by a POST of a signed
/// assertion to its `token_uri`, used until shortly before it expires, refreshed while the old one is still in
/// use, and dropped when FCM answers 401, after which the refused message goes once more with a new token.
///
/// All state lives on `eventLoop`; the public methods may be called from anywhere.
public final class FCMPool: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on `eventLoop`.

    /// Why a request has no access token.
    struct TokenFailure: Error {
        var reason: String
        var isConfiguration: Bool
    }

    /// The event loop that owns the pool.
    public let eventLoop: any EventLoop
    private let account: FCMServiceAccount
    private let tokenEndpoint: AccessTokenGrant.Endpoint
    private let caFile: String?
    private let messagesPath: String
    private let messages: APNsPool
    private let logger: Logger
    private let clock = ContinuousClock()

    private var tokens = AccessTokenStateMachine<ContinuousClock.Instant>()
    private var quota: ProjectQuota<ContinuousClock.Instant>
    /// Requests waiting for the fetch under way.
    private var tokenWaiters: [(Result<String, TokenFailure>) -> Void] = []
    /// The last failed fetch, for the requests the state machine fails until the next one may start.
    private var lastFailure = TokenFailure(reason: "no access token yet", isConfiguration: false)
    private var tokensFetched = 0

    /// A pool for `configuration`; call ``start()`` to connect and fetch the first token.
    ///
    /// - Throws: ``FCMCredentialError`` when the account's `token_uri` is not an `https` URL; what the engine
    ///   throws for a TLS configuration it cannot make.
    public init(
        configuration: FCMPoolConfiguration, eventLoop: any EventLoop,
        logger: Logger = Logger(label: "pushrelay.fcm")
    ) throws {
        guard let tokenEndpoint = AccessTokenGrant.Endpoint(tokenURI: configuration.account.tokenURI) else {
            throw FCMCredentialError(.missingField, "its token_uri is not an https URL")
        }
        self.account = configuration.account
        self.tokenEndpoint = tokenEndpoint
        self.caFile = configuration.messages.caFile
        self.messagesPath = "/v1/projects/\(configuration.account.projectID)/messages:send"
        self.eventLoop = eventLoop
        var logger = logger
        logger[metadataKey: "fcm.project"] = "\(configuration.account.projectID)"
        self.logger = logger
        self.messages = try APNsPool(configuration: configuration.messages, eventLoop: eventLoop, logger: logger)
        self.quota = ProjectQuota(messagesPerMinute: configuration.messagesPerMinute)
    }

    /// Opens the floor's connections to FCM and fetches the account's first access token.
    ///
    /// - Throws: ``APNs/APNsPoolError`` when FCM cannot be reached; an ``FCMCredentialError`` of code
    ///   ``FCMCredentialError/Code/tokenRefused`` when the token endpoint refuses the account (a revoked key, an
    ///   unknown account), or ``FCMCredentialError/Code/tokenUnavailable`` when it cannot be reached.
    public func start() async throws {
        try await messages.start()
        let token = eventLoop.makePromise(of: String.self)
        eventLoop.execute {
            self.withToken { result in
                switch result {
                case .success(let value): token.succeed(value)
                case .failure(let failure):
                    token.fail(
                        FCMCredentialError(
                            failure.isConfiguration ? .tokenRefused : .tokenUnavailable, failure.reason))
                }
            }
        }
        _ = try await token.futureResult.get()
    }

    /// Sends one `messages:send` request per body (``FCMMessage``'s, for one token each: a
    /// ``FCMMessage/BodyTemplate``'s share their bytes), within the project's quota, and calls `answers` once for
    /// each with its position in `bodies`, on the pool's event loop.
    public func send(
        _ bodies: [HTTP2Request.Body], answers: @escaping @Sendable (Int, FCMDeliveryReport) -> Void
    ) {
        eventLoop.execute {
            self.sendWithinQuota(bodies, answers: answers)
        }
    }

    /// The engine's connections and requests now.
    public func snapshot() async throws -> APNsPoolSnapshot {
        try await messages.snapshot()
    }

    /// How many access tokens the pool fetched since it began: one per hour or so, never one per message.
    public func accessTokensFetched() async throws -> Int {
        try await eventLoop.submit { self.tokensFetched }.get()
    }

    /// Stops taking messages and closes, after answering those in flight (at most `gracePeriod`).
    public func shutdown(gracePeriod: TimeAmount) async {
        await messages.shutdown(gracePeriod: gracePeriod)
    }

    // MARK: On the event loop

    /// Sends `bodies` when the project's quota lets them go: now, or after the wait it says.
    private func sendWithinQuota(
        _ bodies: [HTTP2Request.Body], answers: @escaping @Sendable (Int, FCMDeliveryReport) -> Void
    ) {
        let now = clock.now
        let delay = quota.delay(now: now)
        guard delay == .zero else {
            eventLoop.scheduleTask(in: TimeAmount(delay)) { self.sendWithinQuota(bodies, answers: answers) }
            return
        }
        quota.take(bodies.count, now: now)
        send(bodies, positions: Array(bodies.indices), resent: false, answers: answers)
    }

    private func send(
        _ bodies: [HTTP2Request.Body], positions: [Int], resent: Bool,
        answers: @escaping @Sendable (Int, FCMDeliveryReport) -> Void
    ) {
        withToken { result in
            switch result {
            case .failure(let failure):
                let report = FCMDeliveryReport(
                    outcome: .notSent(reason: failure.reason, isConfiguration: failure.isConfiguration),
                    attempts: resent ? 1 : 0)
                for position in positions { answers(position, report) }
            case .success(let token):
                let headers: [HTTP2Request.Header] = [
                    .init(name: "authorization", value: "Bearer " + token),
                    .init(name: "content-type", value: "application/json"),
                ]
                let requests = bodies.map { HTTP2Request(path: self.messagesPath, headers: headers, body: $0) }
                self.messages.send(requests) { index, result in
                    var report = Self.report(result)
                    if case .answered(.retryLater(_, let retryAfter?)) = report.outcome {
                        self.eventLoop.execute { self.quota.pause(for: retryAfter, now: self.clock.now) }
                    }
                    if resent {
                        report.attempts += 1
                    } else if case .answered(.unauthenticated) = report.outcome {
                        self.eventLoop.execute {
                            self.tokenRefused(token, body: bodies[index], position: positions[index], answers)
                        }
                        return
                    }
                    answers(positions[index], report)
                }
            }
        }
    }

    /// FCM answered 401 to a message sent with `token`: the token is dropped, and the message goes once more.
    private func tokenRefused(
        _ token: String, body: HTTP2Request.Body, position: Int,
        _ answers: @escaping @Sendable (Int, FCMDeliveryReport) -> Void
    ) {
        logger.info("FCM refused the access token; fetching another")
        _ = tokens.refused(token)
        send([body], positions: [position], resent: true, answers: answers)
    }

    /// Calls `body` with the access token to use, at once or when the fetch under way ends.
    private func withToken(_ body: @escaping (Result<String, TokenFailure>) -> Void) {
        switch tokens.tokenNeeded(now: clock.now) {
        case .use(let token):
            body(.success(token))
        case .useAndRefresh(let token):
            fetchToken()
            body(.success(token))
        case .fetchAndWait:
            tokenWaiters.append(body)
            fetchToken()
        case .wait:
            tokenWaiters.append(body)
        case .fail:
            body(.failure(lastFailure))
        }
    }

    /// Posts a new assertion to the account's `token_uri`, through a pool of one connection made for it (once an
    /// hour or so: no connection is kept).
    private func fetchToken() {
        let request = AccessTokenGrant.request(for: account, to: tokenEndpoint, now: Date())
        var configuration = APNsPoolConfiguration(endpoint: tokenEndpoint.endpoint, credential: .none, caFile: caFile)
        configuration.connections = 1
        configuration.maximumConnections = 1
        configuration.largestBody = HTTP2Request.maximumBodySize
        configuration.requestTimeout = .seconds(15)
        configuration.maximumAttempts = 3
        let (eventLoop, logger) = (self.eventLoop, self.logger)
        Task {
            let answer = await Self.post(request, configuration: configuration, eventLoop: eventLoop, logger: logger)
            eventLoop.execute { self.tokenFetchEnded(answer) }
        }
    }

    private static func post(
        _ request: HTTP2Request, configuration: APNsPoolConfiguration, eventLoop: any EventLoop, logger: Logger
    ) async -> AccessTokenGrant.Answer {
        let pool: APNsPool
        do {
            pool = try APNsPool(configuration: configuration, eventLoop: eventLoop, logger: logger)
        } catch {
            return .unavailable("the token endpoint's TLS configuration: \(error)")
        }
        defer { Task { await pool.shutdown(gracePeriod: .zero) } }
        do {
            try await pool.start()
            let report = try await pool.send(request)
            guard let response = report.response else { return .unavailable(report.reasonText) }
            let body = response.body.map { Data($0.readableBytesView) } ?? Data()
            return AccessTokenGrant.answer(status: response.status, body: body)
        } catch {
            return .unavailable("the token endpoint \(configuration.endpoint): \(error)")
        }
    }

    private func tokenFetchEnded(_ answer: AccessTokenGrant.Answer) {
        let now = clock.now
        switch answer {
        case .token(let token, let expiresIn):
            tokensFetched += 1
            _ = tokens.fetched(token, expiresIn: expiresIn, now: now)
        case .refused(let reason):
            logger.error("the token endpoint refused the service account", metadata: ["reason": "\(reason)"])
            lastFailure = TokenFailure(reason: "access token refused: \(reason)", isConfiguration: true)
            _ = tokens.fetchFailed(reason, now: now)
        case .unavailable(let reason):
            logger.warning("no access token", metadata: ["reason": "\(reason)"])
            lastFailure = TokenFailure(reason: "no access token: \(reason)", isConfiguration: false)
            _ = tokens.fetchFailed(reason, now: now)
        }
        // The waiters ask again: the new token, the old one still valid, or the failure.
        let waiters = tokenWaiters
        tokenWaiters = []
        for waiter in waiters { withToken(waiter) }
    }

    /// The report of the engine's answer to one message.
    static func report(_ result: Result<APNsDeliveryReport, any Error>) -> FCMDeliveryReport {
        switch result {
        case .success(let report):
            guard let response = report.response else {
                return FCMDeliveryReport(
                    outcome: .notSent(reason: report.reasonText, isConfiguration: false), attempts: report.attempts)
            }
            let answer = FCMAnswer(status: response.status, body: response.body, retryAfter: response.retryAfter)
            return FCMDeliveryReport(outcome: .answered(answer), attempts: report.attempts)
        case .failure(let error as APNsPoolError):
            return FCMDeliveryReport(outcome: .notSent(reason: "\(error)", isConfiguration: false), attempts: 0)
        case .failure(let error):
            return FCMDeliveryReport(outcome: .invalid("\(error)"), attempts: 0)
        }
    }
}

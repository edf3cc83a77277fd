import APNs
import ArgumentParser
import FCM
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayProtocol

/// `pushrelay fcm push`: sends FCM messages straight through one ``FCM/FCMPool`` (no relay, no database) and counts
/// the outcomes: the FCM engine alone, as `pushrelay apns push` is the APNs engine alone (`bench-engine.sh`
/// measures both against h2load on one sink).
struct FCMPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Send messages directly through the FCM engine; print outcomes and messages/s.",
        discussion: """
            One `messages:send` per message, with the service account's access token (fetched once from its \
            token_uri, which --ca is trusted for too). Exit status is 0 only when every message was delivered.
            """
    )

    @Option(help: "FCM endpoint HOST:PORT (the simulator, a sink, a proxy); default Google's.")
    var endpoint: String?
    @Option(help: "PEM file of CA certificates to trust instead of the system's, for FCM and the token endpoint.")
    var ca: String?
    @Option(help: "The service account's JSON file (its project is the messages' project).")
    var account: String
    @Option(help: "A registration token (repeatable).")
    var token: [String] = []
    @Option(help: "A file with one registration token per line.")
    var tokensFile: String?
    @Option(help: "The notification's title.")
    var title = "Benchmark"
    @Option(help: "The notification's text.")
    var body = "Hello from the pushrelay engine benchmark: a typical message of about 150 bytes."
    @Option(help: "A data entry KEY=VALUE (repeatable).")
    var data: [String] = []
    @Option(help: "android.priority: HIGH or NORMAL (default: FCM's).")
    var androidPriority: String?
    @Option(help: "android.notification.channel_id.")
    var channelId: String?
    @Option(help: "How many messages to send, cycling through the tokens (default: one per token).")
    var count: Int?
    @Option(help: "Messages in flight at once.")
    var concurrency = 1000
    @Option(help: "HTTP/2 connections the pool keeps open (its floor).")
    var connections = 1
    @Option(help: "HTTP/2 connections the pool may open under load (its cap; default: --connections, a fixed size).")
    var maxConnections: Int?
    @Option(help: "Streams the pool uses a connection at most, below the peer's limit (Google announces 100).")
    var maxStreams = FCMPoolConfiguration.streamsPerConnection
    @Option(help: "Messages a minute the pool sends at most (Google's default quota is 600000; default: no pacing).")
    var messagesPerMinute = 1_000_000_000
    @Option(help: "Per-message deadline in seconds, retries included.")
    var timeout: Double = 30

    /// Sends the messages and prints each outcome class with its count, then messages/s.
    func run() async throws {
        let tokens = try loadTokens()
        let total = count ?? tokens.count
        guard total > 0, concurrency > 0, connections > 0, maxStreams > 0, messagesPerMinute > 0 else {
            throw ValidationError(
                "--count, --concurrency, --connections, --max-streams and --messages-per-minute must be positive")
        }
        let message = try makeMessage()
        if let problem = message.problem() { throw ValidationError("FCM would refuse the message: \(problem)") }
        let bodies = tokens.map { HTTP2Request.Body(ByteBuffer(bytes: message.body(to: $0))) }
        let serviceAccount: FCMServiceAccount
        do {
            serviceAccount = try FCMServiceAccount(json: try Data(contentsOf: URL(fileURLWithPath: account)))
        } catch {
            throw ValidationError("--account \(account): \(error)")
        }
        var configuration = FCMPoolConfiguration(account: serviceAccount, caFile: ca)
        if let endpoint {
            do {
                let parsed = try HostAndPort(parsing: endpoint)
                configuration.messages.endpoint = APNsEndpoint(host: parsed.host, port: parsed.port)
            } catch {
                throw ValidationError("--endpoint must be HOST:PORT, got '\(endpoint)': \(error.reason)")
            }
        }
        configuration.messages.maximumStreamsPerConnection = maxStreams
        configuration.messages.connections = connections
        configuration.messages.maximumConnections = maxConnections ?? connections
        configuration.messages.requestTimeout = .nanoseconds(Int64(timeout * 1e9))
        configuration.messages.waitQueueCapacity = max(concurrency, 1)
        configuration.messagesPerMinute = messagesPerMinute
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "pushrelay.fcm")
        logger.logLevel = .warning
        let pool = try FCMPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        do {
            try await pool.start()
        } catch {
            await pool.shutdown(gracePeriod: .zero)
            try await group.shutdownGracefully()
            throw ValidationError("the FCM pool did not start: \(error)")
        }

        let started = ContinuousClock.now
        let tally = try await FCMPushDriver.run(pool: pool, bodies: bodies, total: total, concurrency: concurrency)
        let seconds = (ContinuousClock.now - started).seconds
        let snapshot = try await pool.snapshot()
        let accessTokens = try await pool.accessTokensFetched()
        await pool.shutdown(gracePeriod: .seconds(5))
        try await group.shutdownGracefully()

        for (key, value) in tally.sorted(by: { $0.key < $1.key }) {
            print("\(key.padding(toLength: max(44, key.count), withPad: " ", startingAt: 0)) \(value)")
        }
        print("connections opened: \(snapshot.connectionsOpened); access tokens fetched: \(accessTokens)")
        print("message body: \(bodies[0].count) bytes")
        print(String(format: "sent %d in %.3f s", total, seconds))
        print(String(format: "messages/s: %.1f", Double(total) / seconds))
        if tally.count != 1 || tally["delivered"] != total { throw ExitCode(1) }
    }

    /// The tokens of `--token` and `--tokens-file`, each checked as an FCM token (opaque, no spaces).
    private func loadTokens() throws -> [String] {
        let tokens = try tokenList(token, file: tokensFile)
        for token in tokens {
            if case .failure(let refusal) = PushProvider.fcm.storedToken(token) {
                throw ValidationError("not an FCM token (\(token.prefix(12))…): \(refusal.message)")
            }
        }
        return tokens
    }

    /// The message of the options: the notification, the data, Android's priority and channel.
    private func makeMessage() throws -> FCMMessage {
        var entries: [String: String] = [:]
        for entry in data {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else { throw ValidationError("--data takes KEY=VALUE") }
            entries[String(parts[0])] = String(parts[1])
        }
        var priority: FCMMessage.Android.Priority?
        if let androidPriority {
            guard let value = FCMMessage.Android.Priority(rawValue: androidPriority.uppercased()) else {
                throw ValidationError("--android-priority is HIGH or NORMAL")
            }
            priority = value
        }
        let android =
            priority != nil || channelId != nil ? FCMMessage.Android(priority: priority, channelID: channelId) : nil
        return FCMMessage(notification: .init(title: title, body: body), data: entries, android: android)
    }
}

/// Keeps `concurrency` messages in flight through an FCM pool until `total` are answered, handing them over in
/// batches (the pool takes a batch in one hop to its event loop, as the relay hands it a page's devices): a batch
/// of a tenth of `concurrency` goes as soon as that many have come back. Counts the outcomes by class.
final class FCMPushDriver: @unchecked Sendable {
    // @unchecked: every mutable property below is touched only on the pool's event loop.
    /// The pool the messages go through.
    private let pool: FCMPool
    /// One body per token, sent in turn.
    private let bodies: [HTTP2Request.Body]
    /// Messages to send in all.
    private let total: Int
    /// Messages handed to the pool at once.
    private let batch: Int
    /// Messages in flight at most.
    private let concurrency: Int
    /// Messages handed to the pool so far.
    private var started = 0
    /// Messages answered so far.
    private var finished = 0
    /// Handed over and not yet answered.
    private var inFlight = 0
    /// Answers by outcome class.
    private var tally: [String: Int] = [:]
    /// Succeeded with the tally when the last answer came.
    private let done: EventLoopPromise<[String: Int]>

    /// A driver of `total` messages of `bodies` through `pool`, `concurrency` in flight.
    private init(pool: FCMPool, bodies: [HTTP2Request.Body], total: Int, concurrency: Int) {
        self.pool = pool
        self.bodies = bodies
        self.total = total
        self.concurrency = concurrency
        self.batch = max(1, concurrency / 10)
        self.done = pool.eventLoop.makePromise()
    }

    /// Sends `total` messages (the bodies in turn) and returns the count of each outcome class.
    static func run(
        pool: FCMPool, bodies: [HTTP2Request.Body], total: Int, concurrency: Int
    ) async throws -> [String: Int] {
        try await pool.eventLoop.flatSubmit {
            let driver = FCMPushDriver(pool: pool, bodies: bodies, total: total, concurrency: concurrency)
            driver.refill()
            return driver.done.futureResult
        }.get()
    }

    /// Hands the pool batches while there is room for a whole one (or for the last, smaller one).
    private func refill() {
        while started < total, concurrency - inFlight >= min(batch, total - started) {
            let count = min(batch, total - started, concurrency - inFlight)
            let batchBodies = (started..<started + count).map { bodies[$0 % bodies.count] }
            started += count
            inFlight += count
            pool.send(batchBodies) { _, report in
                // Answers come on the pool's event loop.
                self.answered(report)
            }
        }
    }

    /// Counts one answer, and refills or finishes.
    private func answered(_ report: FCMDeliveryReport) {
        tally[Self.outcomeClass(report), default: 0] += 1
        finished += 1
        inFlight -= 1
        if finished == total {
            done.succeed(tally)
        } else {
            refill()
        }
    }

    /// `delivered`, or what FCM answered, or why the message was not sent.
    private static func outcomeClass(_ report: FCMDeliveryReport) -> String {
        switch report.outcome {
        case .answered(.delivered): "delivered"
        case .answered(.tokenDead(let code)): "token dead \(code)"
        case .answered(.configurationFault(let code)): "configuration fault \(code)"
        case .answered(.retryLater(let code, _)): "retry later \(code)"
        case .answered(.unauthenticated): "unauthenticated"
        case .answered(.rejected(let code, let message)): "rejected \(code): \(message)"
        case .notSent(let reason, _): "not sent: \(reason)"
        case .invalid(let reason): "invalid: \(reason)"
        }
    }
}

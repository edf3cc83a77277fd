public import APNs
public import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayProtocol

/// `pushrelay apns push`: sends notifications straight through an APNs pool and counts the outcomes.
struct APNsPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Send notifications directly through the APNs engine; print outcomes and notifications/s.",
        discussion: "Exit status is 0 only when every notification was delivered."
    )

    @Option(help: "APNs endpoint HOST:PORT (the simulator, or a proxy). Overrides --environment.")
    var endpoint: String?
    @Option(help: "production or development: Apple's endpoint for that environment.")
    var environment: APNsEnvironment = .development
    @Flag(help: "Use port 2197 instead of 443 with --environment.")
    var alternatePort = false
    @Option(help: "PEM file of CA certificates to trust instead of the system's.")
    var caFile: String?
    @Option(help: "Apple's .p8 signing key (token authentication).")
    var p8: String?
    @Option(help: "The key's 10-character key id.")
    var keyId: String?
    @Option(help: "The 10-character team id.")
    var teamId: String?
    @Option(help: "TLS client certificate (PEM), for certificate authentication instead of --p8.")
    var certificate: String?
    @Option(help: "The client certificate's private key (PEM).")
    var certificateKey: String?
    @Option(help: "The app's bundle id; the push type's suffix is added.")
    var topic: String
    @Option(help: "A device token in hex (repeatable).")
    var token: [String] = []
    @Option(help: "A file with one hex device token per line.")
    var tokensFile: String?
    @Option(help: "The payload as JSON.")
    var payload: String?
    @Option(help: "Alert text, instead of --payload.")
    var alert: String?
    @Option(help: "apns-push-type.")
    var pushType: APNsPushType = .alert
    @Option(help: "apns-priority: 10, 5 or 1 (default: by push type).")
    var priority: Int?
    @Option(help: "apns-expiration in seconds since 1970.")
    var expiration: Int64?
    @Option(help: "apns-collapse-id.")
    var collapseId: String?
    @Option(help: "How many notifications to send, cycling through the tokens (default: one per token).")
    var count: Int?
    @Option(help: "Notifications in flight at once.")
    var concurrency = 1000
    @Option(help: "HTTP/2 connections the pool keeps open (its floor).")
    var connections = 1
    @Option(
        help:
            "HTTP/2 connections the pool may open while its streams stay near the peer's limit (its cap; default: --connections, a pool of a fixed size)."
    )
    var maxConnections: Int?
    @Option(help: "Per-notification deadline in seconds, retries included.")
    var timeout: Double = 30

    func run() async throws {
        let tokens = try tokenList(token, file: tokensFile)
        let payloadBytes = try makePayload()
        let credential = try makeCredential()
        let target: APNsEndpoint
        if let endpoint {
            let parsed: HostAndPort
            do {
                parsed = try HostAndPort(parsing: endpoint)
            } catch {
                throw ValidationError("--endpoint must be HOST:PORT, got '\(endpoint)': \(error.reason)")
            }
            target = APNsEndpoint(host: parsed.host, port: parsed.port)
        } else {
            target = .apple(environment, alternatePort: alternatePort)
        }
        var priorityValue: APNsPriority?
        if let priority {
            guard let p = APNsPriority(rawValue: priority) else {
                throw ValidationError("--priority must be 10, 5 or 1")
            }
            priorityValue = p
        }
        let total = count ?? tokens.count
        guard total > 0, concurrency > 0, connections > 0 else {
            throw ValidationError("--count, --concurrency and --connections must be positive")
        }
        let buffer = ByteBuffer(bytes: payloadBytes)
        let notifications = try tokens.map { token in
            let n = APNsNotification(
                deviceToken: token, bundleID: topic, pushType: pushType, priority: priorityValue,
                expiration: expiration, collapseID: collapseId, payload: buffer
            )
            do {
                try n.validate()
            } catch {
                throw ValidationError("invalid notification for token \(token.prefix(8))…: \(error)")
            }
            return n
        }

        var configuration = APNsPoolConfiguration(endpoint: target, credential: credential, caFile: caFile)
        configuration.connections = connections
        configuration.maximumConnections = maxConnections ?? connections
        configuration.requestTimeout = .nanoseconds(Int64(timeout * 1e9))
        configuration.waitQueueCapacity = max(concurrency, 1)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "pushrelay.apns")
        logger.logLevel = .warning
        let pool = try APNsPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        try await pool.start()

        let started = ContinuousClock.now
        let tally = try await PushDriver.run(
            pool: pool, notifications: notifications, total: total, concurrency: concurrency
        )
        let elapsed = ContinuousClock.now - started
        let snapshot = try await pool.snapshot()
        await pool.shutdown()
        try await group.shutdownGracefully()

        let seconds = elapsed.seconds
        for (key, value) in tally.sorted(by: { $0.key < $1.key }) {
            print("\(key.padding(toLength: 44, withPad: " ", startingAt: 0)) \(value)")
        }
        for connection in snapshot.connections {
            print(
                "connection \(connection.id): \(connection.streamsOpened) streams, peer max concurrent streams "
                    + "\(connection.peerMaxConcurrentStreams), most in flight \(connection.peakStreamsPerLimit.values.max() ?? 0)"
            )
        }
        print("connections opened: \(snapshot.connectionsOpened)")
        print(String(format: "sent %d in %.3f s", total, seconds))
        print(String(format: "notifications/s: %.1f", Double(total) / seconds))
        if tally.count != 1 || tally["delivered"] != total { throw ExitCode(1) }
    }

    private func makePayload() throws -> [UInt8] {
        switch (payload, alert) {
        case (let json?, nil):
            let bytes = Array(json.utf8)
            do {
                try APNsNotification.validateJSONPayload(bytes)
            } catch {
                throw ValidationError("--payload: \(error)")
            }
            return bytes
        case (nil, let text?):
            return try APNsPayload(aps: .init(alert: .text(text))).jsonBytes()
        case (nil, nil):
            throw ValidationError("give --payload JSON or --alert TEXT")
        default:
            throw ValidationError("give either --payload or --alert, not both")
        }
    }

    private func makeCredential() throws -> APNsCredential {
        if let p8 {
            guard let keyId, let teamId else { throw ValidationError("--p8 needs --key-id and --team-id") }
            return .token(try APNsSigningKey(p8File: p8, keyID: keyId, teamID: teamId))
        }
        if let certificate, let certificateKey {
            return try .certificate(certificateFile: certificate, keyFile: certificateKey)
        }
        throw ValidationError("give --p8 with --key-id and --team-id, or --certificate with --certificate-key")
    }
}

extension APNsPushType: ExpressibleByArgument {}
extension APNsEnvironment: ExpressibleByArgument {}

/// Keeps `concurrency` sends in flight on the pool's event loop until `total` have finished,
/// counting outcomes by class and reason.
final class PushDriver {
    private let pool: APNsPool
    private let notifications: [APNsNotification]
    private let total: Int
    private let onReport: (@Sendable (APNsNotification, APNsDeliveryReport) -> Void)?
    private var started = 0
    private var finished = 0
    private var tally: [String: Int] = [:]
    private let done: EventLoopPromise<[String: Int]>

    private init(
        pool: APNsPool, notifications: [APNsNotification], total: Int,
        onReport: (@Sendable (APNsNotification, APNsDeliveryReport) -> Void)?
    ) {
        self.pool = pool
        self.notifications = notifications
        self.total = total
        self.onReport = onReport
        self.done = pool.eventLoop.makePromise()
    }

    /// Runs the sends and returns the count of each "class reason" line; `onReport` sees each result.
    static func run(
        pool: APNsPool, notifications: [APNsNotification], total: Int, concurrency: Int,
        onReport: (@Sendable (APNsNotification, APNsDeliveryReport) -> Void)? = nil
    ) async throws -> [String: Int] {
        try await pool.eventLoop.flatSubmit {
            let driver = PushDriver(pool: pool, notifications: notifications, total: total, onReport: onReport)
            for _ in 0..<min(concurrency, total) { driver.sendNext() }
            return driver.done.futureResult
        }.get()
    }

    private func sendNext() {
        guard started < total else { return }
        let notification = notifications[started % notifications.count]
        started += 1
        pool.sendFuture(notification).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let report):
                self.onReport?(notification, report)
                let key =
                    report.outcome == .delivered
                    ? "delivered" : "\(report.outcome.rawValue) \(report.reasonText)"
                self.tally[key, default: 0] += 1
            case .failure(let error):
                self.tally["error \(error)", default: 0] += 1
            }
            self.finished += 1
            if self.finished == self.total {
                self.done.succeed(self.tally)
            } else {
                self.sendNext()
            }
        }
    }
}

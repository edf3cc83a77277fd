import APNs
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayProtocol
import RelayStore
import Synchronization

/// `pushrelay demo`: the main job on embedded defaults. Today: start (or reuse) the embedded PostgreSQL
/// cluster and apply the tenant files, start the APNs simulator, send a few notifications of every kind
/// through the engine's warm pool, then a fan-out whose every delivery is recorded in PostgreSQL.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the main job on embedded defaults: PostgreSQL, tenants, APNs simulator, engine.",
        discussion: """
            The database is --database-url, PUSHRELAY_DATABASE_URL, or the embedded cluster in --data-dir; \
            it is migrated and the tenant files in --tenants are applied. A fresh P-256 signing key is made \
            in memory and given to the simulator, which listens on 127.0.0.1 with its CA in --sim-dir. The \
            fan-out goes to circl's bundle id; one of its tokens is registered as dead in the simulator, to \
            show a 410 with Apple's timestamp. Every delivery is written to the deliveries table in batches.
            """
    )

    @Option(help: "Folder for the simulator's CA.")
    var simDir = ".pushrelay/apns-sim"
    @Option(help: "Folder of tenant files to apply.")
    var tenants = "Tenants"
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Devices in the fan-out.")
    var count = 20_000
    @Option(help: "HTTP/2 connections in the pool.")
    var connections = 2

    func run() async throws {
        let configurations = try TenantConfiguration.loadFolder(tenants)
        let (count, connections, simDir) = (self.count, self.connections, self.simDir)
        try await database.withStore(access: .create) { store in
            let report = try await store.syncTenants(configurations)
            print(
                "database ready; tenants: \(report.created.count) created, \(report.updated.count) updated, "
                    + "\(report.unchanged.count) unchanged"
            )
            try await Self.send(count: count, connections: connections, simDir: simDir, store: store)
        }
    }

    private static func send(count: Int, connections: Int, simDir: String, store: RelayStore) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let key = try APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "DEMOKEY001", teamID: "DEMOTEAM01")
        let bundleID = "com.fragne.circl"
        let deadToken = String(repeating: "de", count: 32)
        var simulatorConfiguration = APNsSimulatorConfiguration(certificateDirectory: simDir)
        simulatorConfiguration.keys = [APNsSimulatorKey(key)]
        simulatorConfiguration.topics = [bundleID]
        simulatorConfiguration.faults.unregisteredTokens = [deadToken: Int64(Date().timeIntervalSince1970 * 1000)]
        let simulator = try await APNsSimulator.start(configuration: simulatorConfiguration, group: group.next())
        print("APNs simulator on 127.0.0.1:\(simulator.port), CA \(simulator.caFile)")

        var configuration = APNsPoolConfiguration(
            endpoint: APNsEndpoint(host: "127.0.0.1", port: simulator.port), credential: .token(key),
            caFile: simulator.caFile
        )
        configuration.connections = connections
        configuration.maximumConnections = connections
        var logger = Logger(label: "pushrelay.demo")
        logger.logLevel = .warning
        let pool = try APNsPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        try await pool.start()
        let warm = try await pool.snapshot()
        print("pool warm: \(warm.connections.filter(\.isReady).count) of \(connections) connections ready")

        for (label, notification) in try samples(bundleID: bundleID) {
            let report = try await pool.send(notification)
            print("\(label.padding(toLength: 34, withPad: " ", startingAt: 0)) \(describe(report))")
        }

        let payload = ByteBuffer(bytes: try APNsPayload(aps: .init(alert: .text("Fan-out"))).jsonBytes())
        let tokens = (0..<count).map { index in
            index == count / 2 ? deadToken : String(format: "%064x", index + 1)
        }
        let jobID = "demo-\(UUID().uuidString.prefix(8).lowercased())"
        let sentAt = Date()
        let records = Mutex<[DeliveryRecord]>([])
        let started = ContinuousClock.now
        let reports = try await PushDriver.run(
            pool: pool,
            notifications: tokens.map {
                APNsNotification(deviceToken: $0, bundleID: bundleID, payload: payload)
            },
            total: tokens.count, concurrency: 2000
        ) { notification, report in
            let record = DeliveryRecord(
                tenantID: "circl", jobID: jobID, token: notification.deviceToken,
                providerMessageID: report.response?.apnsID, outcome: DeliveryOutcome(report.outcome),
                reason: report.response?.reason?.rawValue, attempt: max(report.attempts, 1), sentAt: sentAt,
                answeredAt: Date()
            )
            records.withLock { $0.append(record) }
        }
        let elapsed = ContinuousClock.now - started
        let seconds = elapsed.seconds
        print(
            "fan-out of \(count) in \(String(format: "%.2f", seconds)) s "
                + "(\(Int(Double(count) / seconds)) notifications/s, simulator in the same process):"
        )
        for (line, n) in reports.sorted(by: { $0.key < $1.key }) { print("  \(line): \(n)") }
        let statistics = simulator.statistics()
        print(
            "simulator: \(statistics.requestsReceived) requests on \(statistics.connectionsAccepted) connections; "
                + "by status \(statistics.responsesByStatus.sorted { $0.key < $1.key })"
        )
        let rows = records.withLock { $0 }
        let written = try await store.recordDeliveries(rows, batchSize: 5_000)
        let readBack = try await store.deliveries(tenant: "circl", job: jobID, limit: rows.count + 1)
        print(
            "recorded \(written.rows) deliveries of job \(jobID) in \(written.statements) statements; "
                + "\(readBack.count) read back"
        )
        await pool.shutdown()
        try await simulator.shutdown()
        try await group.shutdownGracefully()
    }

    private static func samples(bundleID: String) throws -> [(String, APNsNotification)] {
        let token = String(repeating: "ab", count: 32)
        var alert = APNsPayload.APS(
            alert: .fields(.init(title: "Circle", subtitle: "#general", body: "Ada: see you at 8")),
            badge: 1, sound: .named("default"), threadID: "circle-1-channel-2", category: "MESSAGE",
            mutableContent: true
        )
        alert.interruptionLevel = .active
        var live = APNsPayload.APS()
        live.timestamp = Int64(Date().timeIntervalSince1970)
        live.event = .update
        live.contentState = ["score": "2-1"]
        return [
            (
                "alert (circl message)",
                try APNsNotification(
                    deviceToken: token, bundleID: bundleID,
                    payload: APNsPayload(aps: alert, custom: ["type": "message", "payload": ["circle_id": 1]])
                )
            ),
            (
                "background (content-available)",
                try APNsNotification(
                    deviceToken: token, bundleID: bundleID, pushType: .background,
                    payload: APNsPayload(aps: .init(contentAvailable: true))
                )
            ),
            (
                "time-sensitive (argus person)",
                try APNsNotification(
                    deviceToken: token, bundleID: bundleID, collapseID: "camera-3",
                    payload: APNsPayload(
                        aps: .init(alert: .text("Person at the front door"), interruptionLevel: .timeSensitive)
                    )
                )
            ),
            (
                "voip",
                try APNsNotification(
                    deviceToken: token, bundleID: bundleID, pushType: .voip, payload: APNsPayload(custom: ["call": "1"])
                )
            ),
            (
                "liveactivity",
                try APNsNotification(
                    deviceToken: token, bundleID: bundleID, pushType: .liveactivity, payload: APNsPayload(aps: live)
                )
            ),
            (
                "wrong topic (configuration fault)",
                try APNsNotification(
                    deviceToken: token, bundleID: "com.not.allowed", payload: APNsPayload(aps: .init(alert: .text("x")))
                )
            ),
            (
                "dead token (410)",
                try APNsNotification(
                    deviceToken: String(repeating: "de", count: 32), bundleID: bundleID,
                    payload: APNsPayload(aps: .init(alert: .text("x")))
                )
            ),
        ]
    }

    private static func describe(_ report: APNsDeliveryReport) -> String {
        var text = report.outcome.rawValue
        if let response = report.response {
            text += " \(response.status)"
            if let reason = response.reason { text += " \(reason)" }
            if let timestamp = response.timestampMilliseconds { text += " timestamp=\(timestamp)" }
        }
        if let failure = report.failure { text += " \(failure)" }
        return text + " (attempts: \(report.attempts))"
    }
}

import APNs
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import NIOCore
import NIOPosix

/// `pushrelay demo`: the main job on embedded defaults. Today: start the APNs simulator, send a few
/// notifications of every kind through the engine's warm pool, then a fan-out, and report.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start the APNs simulator and send through the engine (no real keys needed).",
        discussion: """
            A fresh P-256 signing key is made in memory and given to the simulator, which listens on \
            127.0.0.1 with its CA in --data-dir. One of the fan-out's tokens is registered as dead in the \
            simulator, to show a 410 with Apple's timestamp.
            """
    )

    @Option(help: "Folder for the simulator's CA.")
    var dataDir = ".pushrelay/apns-sim"
    @Option(help: "Devices in the fan-out.")
    var count = 20_000
    @Option(help: "HTTP/2 connections in the pool.")
    var connections = 2

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let key = try APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "DEMOKEY001", teamID: "DEMOTEAM01")
        let bundleID = "com.example.demo"
        let deadToken = String(repeating: "de", count: 32)
        var simulatorConfiguration = APNsSimulatorConfiguration(certificateDirectory: dataDir)
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
        let started = ContinuousClock.now
        let reports = try await PushDriver.run(
            pool: pool,
            notifications: tokens.map {
                APNsNotification(deviceToken: $0, bundleID: bundleID, payload: payload)
            },
            total: tokens.count, concurrency: 2000
        )
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
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
        await pool.shutdown()
        try await simulator.shutdown()
        try await group.shutdownGracefully()
    }

    private func samples(bundleID: String) throws -> [(String, APNsNotification)] {
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

    private func describe(_ report: APNsDeliveryReport) -> String {
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

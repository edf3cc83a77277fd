import APNs
import APNsSimulator
import Crypto
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A clock that only moves when a test moves it: its wall-clock time stands still, and its monotonic time runs
/// with the system's, ahead by what the test adds.
final class TestClock: APNsClock {
    private let date: Mutex<Date>
    private let uptimeOffset = Mutex(TimeAmount.zero)

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        date = Mutex(start)
    }

    func now() -> Date { date.withLock { $0 } }

    func uptime() -> NIODeadline { .now() + uptimeOffset.withLock { $0 } }

    func advance(minutes: Double) {
        date.withLock { $0 += minutes * 60 }
    }

    /// Moves the monotonic time on by `amount`, at once.
    func advanceUptime(_ amount: TimeAmount) {
        uptimeOffset.withLock { $0 = $0 + amount }
    }
}

/// A simulator with one signing key and topic, and pools pointed at it.
struct Harness {
    static let topic = "com.example.app"
    let key: APNsSigningKey
    let simulator: APNsSimulator
    let directory: String

    /// Starts a simulator configured by `configure`, runs `body`, and shuts the simulator down.
    static func run(
        configure: (inout APNsSimulatorConfiguration) -> Void = { _ in },
        _ body: (Harness) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushrelay-tests-\(UUID().uuidString)").path
        let key = try APNsSigningKey(privateKey: .init(), keyID: "KEY1234567", teamID: "TEAM123456")
        var configuration = APNsSimulatorConfiguration(certificateDirectory: directory)
        configuration.keys = [APNsSimulatorKey(key)]
        configuration.topics = [topic, "com.example.other"]
        configuration.seed = 42
        // Debug builds of NIOHTTP2 check their stream maps in O(streams) per frame; 100 streams keep
        // the suite quick while still exercising many concurrent streams.
        configuration.maxConcurrentStreams = 100
        configure(&configuration)
        let simulator = try await APNsSimulator.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton
        )
        let harness = Harness(key: key, simulator: simulator, directory: directory)
        do {
            try await body(harness)
        } catch {
            try? await simulator.shutdown()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        try await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var endpoint: APNsEndpoint { APNsEndpoint(host: "127.0.0.1", port: simulator.port) }

    /// A started pool with fast retries, configured further by `configure`.
    func pool(
        credential: APNsCredential? = nil,
        clock: any APNsClock = SystemClock(),
        configure: (inout APNsPoolConfiguration) -> Void = { _ in }
    ) async throws -> APNsPool {
        var configuration = APNsPoolConfiguration(
            endpoint: endpoint, credential: credential ?? .token(key), caFile: simulator.caFile
        )
        configuration.retryBackoff = ExponentialBackoff(first: .milliseconds(5), maximum: .milliseconds(50))
        configuration.reconnectBackoff = ExponentialBackoff(first: .milliseconds(20), maximum: .milliseconds(200))
        configuration.requestTimeout = .seconds(60)
        configuration.maximumStreamsPerConnection = 100
        configure(&configuration)
        let pool = try APNsPool(
            configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), clock: clock
        )
        try await pool.start()
        return pool
    }

    static func randomToken(bytes: Int = 32) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func notification(
        token: String = randomToken(), topic: String = topic, pushType: APNsPushType = .alert
    ) -> APNsNotification {
        APNsNotification(
            deviceToken: token, bundleID: topic, pushType: pushType,
            payload: ByteBuffer(string: #"{"aps":{"alert":"hello"}}"#)
        )
    }

    /// Sends `count` notifications at once and returns every report, in order.
    static func sendAll(_ pool: APNsPool, count: Int) async throws -> [APNsDeliveryReport] {
        // One hop to the pool's event loop for all of them: they reach the pool together, however slow this task is.
        let futures = pool.sendFutures((0..<count).map { _ in notification() })
        var reports: [APNsDeliveryReport] = []
        for future in futures { reports.append(try await future.get()) }
        return reports
    }

    /// Polls `condition` every 20 ms for up to `seconds`; returns whether it became true.
    static func eventually(within seconds: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }
}

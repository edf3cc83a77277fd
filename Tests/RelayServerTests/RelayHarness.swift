import APNs
import APNsSimulator
import Crypto
import EmbeddedPostgres
import FCM
import FCMSimulator
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import ServiceLifecycle
import Testing

/// A logger that drops everything.
let quietLogger = Logger(label: "relayserver-tests") { _ in SwiftLogNoOpLogHandler() }

/// The repository's Tenants/ folder.
let tenantsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Tenants").path

/// A whole relay for one test: an embedded PostgreSQL in a fresh folder with the repository's tenants, the
/// APNs simulator (recording requests), the pools, the service and the TCP server on a free port, and a
/// credential for each tenant.
struct RelayHarness: Sendable {
    /// A token the simulator answers with 410 Unregistered and Apple's timestamp.
    static let deadToken = String(repeating: "de", count: 32)
    /// The timestamp the simulator gives for ``deadToken``: a day after the first relay of the test process
    /// starts, so the tests' registrations are older than APNs' verdict however long the run takes (a
    /// registration newer than it keeps the token active; a minute was too short once the relay suites took
    /// longer than that).
    static let deadTokenTimestamp = Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000

    /// The relay under test, built as `serve` builds it.
    let relay: Relay
    let simulator: APNsSimulator
    /// The FCM simulator, when the test asked for one (`fcm: true`): each tenant with a Firebase project sends
    /// there with an account of its own.
    let fcm: FCMSimulator?
    /// The simulator's configuration, to start it again on the same port after an outage.
    let simulatorConfiguration: APNsSimulatorConfiguration
    let group: any EventLoopGroup
    let credentials: [String: String]
    /// The master key the relay unseals stored signing keys with.
    let masterKey: MasterKey
    /// The relay's parts running as a service group, unless the test runs them itself (`runsParts: false`).
    private let parts: ServiceGroup?

    var store: RelayStore { relay.store }
    var listener: RelayListener { relay.listener }
    var service: RelayService { relay.service }
    var pools: PoolRegistry { relay.pools }
    var readiness: Readiness { relay.readiness }

    /// Runs `body` with a fresh relay, then shuts everything down. `logger` is given to the store, the
    /// pools, the service and the server (the embedded PostgreSQL and the simulator stay quiet). Without
    /// `fanOut`, accepted jobs stay unplanned. A credential's request limit is `requestsPerSecond` with a burst of
    /// `requestBurst` (by default as many as a second's rate). The relay's parts run as a service group (the
    /// background parts only with `backgroundParts`), stopped by a graceful shutdown at the end; with
    /// `runsParts: false` the test runs them itself (``Relay/serviceGroup(stopped:)``).
    static func with(
        configure: (inout RelayListenerConfiguration) -> Void = { _ in },
        configureRelay: @escaping @Sendable (inout Relay.Configuration) -> Void = { _ in },
        simulatorKeys: [APNsSigningKey] = [],
        fcm: Bool = false,
        requestsPerSecond: Double = 1_000,
        requestBurst: Int? = nil,
        fanOut: Bool = true,
        backgroundParts: Bool = false,
        runsParts: Bool = true,
        logger: Logger = quietLogger,
        _ body: @Sendable (RelayHarness) async throws -> Void
    ) async throws {
        var configuration = RelayListenerConfiguration(port: 0)
        configure(&configuration)
        let serverConfiguration = configuration
        let folder = "/tmp/relayserver-tests-\(UUID().uuidString.prefix(13))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let postgres = EmbeddedPostgres(dataFolder: folder + "/pg", logger: quietLogger)
        try await postgres.start()
        do {
            let endpoint = try #require(await postgres.endpoint)
            try await RelayStore.withStore(configuration: .init(embedded: endpoint), logger: logger) { store in
                try await store.migrate()
                let options = Options(
                    folder: folder, simulatorKeys: simulatorKeys, fcm: fcm, requestsPerSecond: requestsPerSecond,
                    requestBurst: requestBurst ?? max(1, Int(requestsPerSecond)), fanOut: fanOut,
                    backgroundParts: backgroundParts, runsParts: runsParts, configureRelay: configureRelay)
                try await run(store: store, configuration: serverConfiguration, options: options, logger: logger, body)
            }
            try await postgres.stop()
        } catch {
            try? await postgres.stop()
            throw error
        }
    }

    /// The harness's choices beyond the listener's configuration.
    private struct Options {
        var folder: String
        var simulatorKeys: [APNsSigningKey]
        var fcm: Bool
        var requestsPerSecond: Double
        var requestBurst: Int
        var fanOut: Bool
        var backgroundParts: Bool
        var runsParts: Bool
        var configureRelay: @Sendable (inout Relay.Configuration) -> Void
    }

    private static func run(
        store: RelayStore,
        configuration: RelayListenerConfiguration,
        options: Options,
        logger: Logger,
        _ body: @Sendable (RelayHarness) async throws -> Void
    ) async throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        _ = try await store.syncTenants(tenants)
        var credentials: [String: String] = [:]
        for tenant in tenants {
            credentials[tenant.id] = try await store.issueCredential(tenant: tenant.id, name: "tests").secret
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var simulatorConfiguration = APNsSimulatorConfiguration(certificateDirectory: options.folder + "/sim")
        simulatorConfiguration.recordRequests = true
        simulatorConfiguration.faults.unregisteredTokens = [deadToken: deadTokenTimestamp]
        simulatorConfiguration.keys = options.simulatorKeys.map(APNsSimulatorKey.init)
        var keys: [String: APNsSigningKey] = [:]
        for (index, tenant) in tenants.enumerated() {
            let key = try APNsSigningKey(
                privateKey: P256.Signing.PrivateKey(), keyID: "TESTKEY00\(index)", teamID: "TESTTEAM0\(index)"
            )
            keys[tenant.id] = key
            simulatorConfiguration.keys.append(APNsSimulatorKey(key))
            simulatorConfiguration.topics.append(contentsOf: tenant.bundleIDs.keys)
        }
        let simulator = try await APNsSimulator.start(configuration: simulatorConfiguration, group: group.next())
        let target = APNsTarget(
            endpointOverride: APNsEndpoint(host: "127.0.0.1", port: simulator.port), caFile: simulator.caFile,
            connectionsPerPool: 1, fallbackKeys: keys
        )
        let masterKey = MasterKey.generate()
        var relayConfiguration = Relay.Configuration(server: configuration, target: target, masterKey: masterKey)
        var fcm: FCMSimulator?
        if options.fcm {
            let simulator = try await FCMSimulator.start(
                configuration: FCMSimulatorConfiguration(certificateDirectory: options.folder + "/fcm-sim"),
                group: group.next())
            var accounts: [String: FCMServiceAccount] = [:]
            for tenant in tenants {
                guard let project = tenant.fcm?.projectID else { continue }
                accounts[tenant.id] = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: project))
            }
            relayConfiguration.fcmTarget = FCMTarget(
                endpoint: APNsEndpoint(host: "127.0.0.1", port: simulator.port), caFile: simulator.caFile,
                connectionsPerPool: 1, fallbackAccounts: accounts)
            fcm = simulator
        }
        relayConfiguration.requestsPerSecond = options.requestsPerSecond
        relayConfiguration.requestBurst = options.requestBurst
        relayConfiguration.runsFanOut = options.fanOut
        relayConfiguration.runsBackgroundParts = options.backgroundParts
        relayConfiguration.warmsPools = false
        relayConfiguration.poolShutdownGrace = .zero
        options.configureRelay(&relayConfiguration)
        let relay = try await Relay.start(configuration: relayConfiguration, store: store, group: group, logger: logger)
        let parts = options.runsParts ? relay.serviceGroup() : nil
        let running = parts.map { parts in Task { try await parts.run() } }
        var restart = simulatorConfiguration
        restart.port = simulator.port
        let harness = RelayHarness(
            relay: relay, simulator: simulator, fcm: fcm, simulatorConfiguration: restart, group: group,
            credentials: credentials, masterKey: masterKey, parts: parts
        )
        do {
            try await body(harness)
        } catch {
            await harness.shutdown(running)
            throw error
        }
        await harness.shutdown(running)
    }

    /// Stops the relay's parts in their order (or, when the test ran them itself, the listener and the pools),
    /// then the simulator and the event loops.
    private func shutdown(_ running: Task<Void, any Error>?) async {
        if let parts, let running {
            await parts.triggerGracefulShutdown()
            try? await running.value
        } else {
            await listener.shutdown()
            await pools.shutdown(gracePeriod: .zero)
        }
        try? await simulator.shutdown()
        try? await fcm?.shutdown()
        try? await group.shutdownGracefully()
    }

    /// The requests the simulator received for `token`, oldest first.
    /// A simulator like the first, on its port (the first one shut down: APNs is back after an outage). The caller
    /// shuts it down.
    func startSimulatorAgain() async throws -> APNsSimulator {
        try await APNsSimulator.start(configuration: simulatorConfiguration, group: group.next())
    }

    func requests(to token: String) -> [APNsSimulatorRequest] {
        simulator.receivedRequests().filter { $0.deviceToken == token }
    }

    /// The requests for `token` once `count` of them have arrived, polling the simulator until `deadline`
    /// passes; fewer when they did not arrive in time.
    func awaitRequests(
        to token: String,
        count: Int = 1,
        within deadline: Duration = .seconds(30)
    ) async -> [APNsSimulatorRequest] {
        let end = ContinuousClock.now + deadline
        var found = requests(to: token)
        while found.count < count, ContinuousClock.now < end {
            try? await Task.sleep(for: .milliseconds(50))
            found = requests(to: token)
        }
        return found
    }

    /// Runs the fan-out of a harness started without it until job `jobID` is completed (or 60 s pass), then stops
    /// it; returns the job as `client` last saw it.
    func runFanOut(until jobID: String, client: PushRelayClient) async throws -> Pushrelay_V1_Job {
        let fanOut = Task { await service.runFanOut() }
        defer { fanOut.cancel() }
        var status = try await client.jobStatus(jobID: jobID)
        let end = ContinuousClock.now + .seconds(60)
        while status.state != .completed, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(50))
            status = try await client.jobStatus(jobID: jobID)
        }
        fanOut.cancel()
        await fanOut.value
        return status
    }

    /// A client of `tenant` connected to this relay.
    func client(_ tenant: String, credential: String? = nil) -> PushRelayClient {
        PushRelayClient(
            configuration: .init(
                host: "127.0.0.1", port: listener.port, tenant: tenant,
                credential: credential ?? credentials[tenant] ?? "", reconnect: false
            ),
            group: group
        )
    }
}

/// A random 64-hex-digit device token.
/// Polls `condition` every 20 ms for up to `seconds` (long: a loaded CI machine is many times slower than an idle
/// one); returns whether it became true.
func eventually(within seconds: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

func randomToken() -> String {
    (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

/// A device registration for circl's or familyportal's app.
func registration(
    user: String,
    token: String,
    environment: Pushrelay_V1_Environment = .production,
    topics: [String] = []
) -> Pushrelay_V1_RegisterDevice {
    var request = Pushrelay_V1_RegisterDevice()
    request.userID = user
    request.token = token
    request.platform = "ios"
    request.environment = environment
    request.timeZone = "Europe/Zurich"
    request.topics = topics
    return request
}

/// familyportal's "Dinner?" chat message to the devices subscribed to `topic`.
func familyChat(topic: String = "chat") -> Pushrelay_V1_Send {
    var send = Pushrelay_V1_Send()
    send.notificationType = "chat_message"
    send.topic = topic
    send.alert.body = "Dinner?"
    return send
}

/// A circl chat message to `users` with the thread-id template's values.
func circlMessage(to users: [String], excluding: [String] = [], wait: Bool = true) -> Pushrelay_V1_Send {
    var send = Pushrelay_V1_Send()
    send.notificationType = "message"
    send.userIds = users
    send.excludeUserIds = excluding
    send.templateValues = ["circle_id": "7", "channel_id": "3"]
    var alert = Pushrelay_V1_Alert()
    alert.title = "Ada"
    alert.body = "See you at 8"
    send.alert = alert
    send.customJson = #"{"type":"message","circle_id":7}"#
    send.wait = wait
    return send
}

/// The error code a call failed with, or `nil` when it succeeded.
func errorCode(_ call: () async throws -> some Any) async -> Pushrelay_V1_ErrorCode? {
    do {
        _ = try await call()
        return nil
    } catch let error as PushRelayClientError {
        return error.relayError?.code ?? .unspecified
    } catch {
        return .unspecified
    }
}

/// Every relay test suite, run one test at a time: each test starts its own PostgreSQL, simulator and
/// relay, and running them side by side with the other test targets would starve the engine's timing tests
/// on a 2-core machine.
@Suite(.serialized) enum RelayServerSuites {}

import APNs
import APNsSimulator
import Crypto
import FCM
import FCMSimulator
import Logging
import NIOCore
import RelayServer
import RelayStore

extension ServeSettings {
    /// Starts the in-process APNs simulator for `serve --apns-simulator`, trusting every stored key of the
    /// enabled tenants (when the master key opens them) and an ephemeral key for each, and returns it with the
    /// target that sends there.
    func startSimulator(
        store: RelayStore,
        masterKey: MasterKey?,
        group: any EventLoopGroup,
        logger: Logger
    ) async throws -> (simulator: APNsSimulator, target: APNsTarget) {
        var configuration = APNsSimulatorConfiguration(certificateDirectory: simDir)
        // A backend's tests meet every outcome by their tokens (Protocol/README.md, "Testing your client").
        configuration.faults.scriptedTokens = true
        var fallbackKeys: [String: APNsSigningKey] = [:]
        for record in try await store.listTenants().filter(\.enabled) {
            let key = try APNsSigningKey(
                privateKey: P256.Signing.PrivateKey(), keyID: Self.appleID(prefix: "SIMK", record.id),
                teamID: Self.appleID(prefix: "SIMT", record.id)
            )
            fallbackKeys[record.id] = key
            configuration.keys.append(APNsSimulatorKey(key))
            configuration.topics.append(contentsOf: record.configuration.bundleIDs.keys)
            if let masterKey, let stored = try? await store.loadSigningKeys(tenant: record.id, masterKey: masterKey) {
                configuration.keys.append(
                    contentsOf: stored.filter { $0.kind == .apnsP8 }.compactMap {
                        try? APNsSimulatorKey($0.apnsSigningKey())
                    })
            }
        }
        let simulator = try await APNsSimulator.start(configuration: configuration, group: group.next())
        logger.info("APNs simulator started", metadata: ["port": "\(simulator.port)", "ca": "\(simulator.caFile)"])
        let target = APNsTarget(
            endpointOverride: APNsEndpoint(host: "127.0.0.1", port: simulator.port), caFile: simulator.caFile,
            connectionsPerPool: connectionsPerPool, maximumConnectionsPerPool: maxConnectionsPerPool,
            fallbackKeys: fallbackKeys
        )
        return (simulator, target)
    }

    /// Starts the in-process FCM simulator for `serve --apns-simulator` with a service account of its own for each
    /// enabled tenant with a Firebase project (used while the tenant has no stored one), and returns it with the
    /// target that sends there.
    func startFCMSimulator(
        store: RelayStore, group: any EventLoopGroup, logger: Logger
    ) async throws -> (simulator: FCMSimulator, target: FCMTarget) {
        let simulator = try await FCMSimulator.start(
            configuration: FCMSimulatorConfiguration(certificateDirectory: simDir + "/fcm"), group: group.next())
        var accounts: [String: FCMServiceAccount] = [:]
        for record in try await store.listTenants().filter(\.enabled) {
            guard let project = record.configuration.fcm?.projectID else { continue }
            accounts[record.id] = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: project))
        }
        logger.info(
            "FCM simulator started",
            metadata: ["port": "\(simulator.port)", "ca": "\(simulator.caFile)", "projects": "\(accounts.count)"])
        let target = FCMTarget(
            endpoint: APNsEndpoint(host: "127.0.0.1", port: simulator.port), caFile: simulator.caFile,
            connectionsPerPool: connectionsPerPool, maximumConnectionsPerPool: max(fcmMaxConnectionsPerPool, 2),
            messagesPerMinute: fcmMessagesPerMinute, fallbackAccounts: accounts)
        return (simulator, target)
    }

    /// A 10-character id of A-Z and 0-9, as Apple's key and team ids are: `prefix` and the tenant's letters.
    private static func appleID(prefix: String, _ tenant: String) -> String {
        let letters = tenant.uppercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber) }
        return String((prefix + letters + "0000000000").prefix(10))
    }
}

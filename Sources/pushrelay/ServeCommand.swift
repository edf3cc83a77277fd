import APNs
import APNsSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import Prometheus
import PushRelayProtocol
import RelayServer
import RelayStore
import ServiceLifecycle

/// `pushrelay serve`: the relay. Migrates the database, applies the tenant files, warms the APNs pools,
/// follows key changes, and serves the wire protocol until SIGTERM or SIGINT, then shuts down gracefully.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the relay: the wire protocol on TCP, APNs pools, deliveries recorded in PostgreSQL.",
        discussion: """
            The database is --database-url, PUSHRELAY_DATABASE_URL, or the embedded cluster in --data-dir; it is \
            migrated at start. Tenant files in --tenants are applied at start. Signing keys are read from the \
            database and unsealed with the master key (--master-key-file or PUSHRELAY_MASTER_KEY); a key change \
            (`pushrelay admin key ...`) rebuilds that tenant's pools without a restart.

            With --apns-simulator the relay starts the APNs simulator in-process and sends there: tenants \
            without a stored key get an ephemeral one. Without it, it sends to Apple (production and sandbox).

            Every setting is a flag, a PUSHRELAY_* environment variable, or a key of the --config file, in that \
            order of precedence (README: "Settings").

            SIGTERM or SIGINT: stop accepting, say GOODBYE, answer in-flight requests, finish running fan-outs, \
            close the pools.
            """
    )

    @Option(help: "YAML file of settings (default: PUSHRELAY_CONFIG); flags and PUSHRELAY_* variables win over it.")
    var config: String?
    @Option(help: "host:port to listen on (port 0 picks a free one; default 127.0.0.1:7411).")
    var listen: String?
    @Option(
        help:
            "postgres://user[:password]@host[:port]/database[?host=/socket/folder&sslmode=...] (default: the embedded cluster)."
    )
    var databaseURL: String?
    @Option(help: "Data folder of the embedded PostgreSQL cluster (default .pushrelay/pg).")
    var dataDir: String?
    @Option(help: "Folder of tenant files applied at start; \"\" applies none (default Tenants).")
    var tenants: String?
    @Option(help: "File holding the master key that unseals signing keys (default: PUSHRELAY_MASTER_KEY).")
    var masterKeyFile: String?
    @Flag(inversion: .prefixedNo, help: "Send to an in-process APNs simulator instead of Apple (default off).")
    var apnsSimulator: Bool?
    @Option(help: "Folder for the simulator's CA (default .pushrelay/apns-sim).")
    var simDir: String?
    @Option(help: "Send to this APNs host:port instead of Apple's (with --apns-ca).")
    var apnsEndpoint: String?
    @Option(help: "CA file to trust for --apns-endpoint.")
    var apnsCA: String?
    @Option(help: "HTTP/2 connections per APNs pool, one pool per tenant and environment (default 2).")
    var connectionsPerPool: Int?
    @Option(help: "TLS certificate chain (PEM) for the listener.")
    var tlsCert: String?
    @Option(help: "TLS private key (PEM) for the listener.")
    var tlsKey: String?
    @Option(help: "CA (PEM) whose client certificates are required on the listener.")
    var tlsClientCA: String?
    @Option(help: "Largest frame body accepted, in bytes (default 1048576).")
    var maxFrameBytes: Int?
    @Option(help: "Largest body after zstd decompression, in bytes (default 4194304).")
    var maxDecompressedBytes: Int?
    @Option(help: "Requests in flight per connection before the relay stops reading it (default 128).")
    var maxInFlight: Int?
    @Option(help: "Most recipients per send (default 10000).")
    var maxRecipients: Int?
    @Option(help: "Seconds without a client frame before a connection is closed; 0 never (default 300).")
    var idleTimeout: Int?
    @Option(
        help:
            "Seconds a connection's answers may wait for a peer that does not read them before it is closed (default 30)."
    )
    var writeStallTimeout: Int?
    @Option(help: "Requests per second each credential may make; RATE_LIMITED beyond it (default 1000).")
    var requestsPerSecond: Double?
    @Option(help: "Requests a credential may make in a burst above that rate (default 2000).")
    var requestBurst: Int?
    @Option(help: "Days of delivery rows kept; older daily partitions are dropped hourly (default 30).")
    var retentionDays: Int?
    @Option(help: "host:port of the operators' HTTP port; \"\" turns it off (default 127.0.0.1:9411).")
    var metricsListen: String?
    @Option(help: "Write host:port here once the relay accepts connections.")
    var readyFile: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    func run() async throws {
        let settings: ServeSettings
        do {
            settings = try ServeSettings.resolve(
                commandLine: commandLineValues, environment: ProcessInfo.processInfo.environment,
                configFile: config
            )
        } catch {
            throw Failure(message: error.description)
        }
        try await settings.serve()
    }

    /// The settings given as flags, by file key.
    private var commandLineValues: [String: String] {
        let given: [String: String?] = [
            "listen": listen, "database_url": databaseURL, "data_dir": dataDir, "tenants": tenants,
            "master_key_file": masterKeyFile, "apns_simulator": apnsSimulator.map { "\($0)" }, "sim_dir": simDir,
            "apns_endpoint": apnsEndpoint, "apns_ca": apnsCA,
            "connections_per_pool": connectionsPerPool.map { "\($0)" }, "tls_cert": tlsCert, "tls_key": tlsKey,
            "tls_client_ca": tlsClientCA, "max_frame_bytes": maxFrameBytes.map { "\($0)" },
            "max_decompressed_bytes": maxDecompressedBytes.map { "\($0)" },
            "max_in_flight": maxInFlight.map { "\($0)" }, "max_recipients": maxRecipients.map { "\($0)" },
            "idle_timeout": idleTimeout.map { "\($0)" }, "write_stall_timeout": writeStallTimeout.map { "\($0)" },
            "requests_per_second": requestsPerSecond.map { "\($0)" },
            "request_burst": requestBurst.map { "\($0)" }, "retention_days": retentionDays.map { "\($0)" },
            "metrics_listen": metricsListen, "ready_file": readyFile, "log_level": logLevel,
        ]
        return given.compactMapValues { $0 }
    }
}

extension ServeSettings {
    /// Runs the relay with these settings until SIGTERM or SIGINT.
    fileprivate func serve() async throws {
        // Escaped, so that nothing a client sends can shape a log line.
        var configuredLogger = Logger(label: "pushrelay") {
            EscapingLogHandler(wrapping: StreamLogHandler.standardError(label: $0))
        }
        configuredLogger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let logger = configuredLogger
        let serverConfiguration = try makeServerConfiguration()
        if !metricsListen.isEmpty, RelayAddress(metricsListen) == nil {
            throw Failure(message: "metrics listen must be host:port or \"\", not \(metricsListen)")
        }
        let folder = tenants
        let masterKey = try Self.loadMasterKey(file: masterKeyFile)
        if masterKey == nil {
            logger.notice("no master key: stored signing keys cannot be used until one is given")
        }
        let settings = self
        try await DatabaseOptions.withStore(databaseURL: databaseURL, dataDir: dataDir) { store in
            if !folder.isEmpty {
                guard FileManager.default.fileExists(atPath: folder) else {
                    throw Failure(
                        message: "no tenants folder \(folder) (give one with --tenants, PUSHRELAY_TENANTS or "
                            + "`tenants:` in the settings file; \"\" applies none)")
                }
                let report = try await store.syncTenants(try TenantConfiguration.loadFolder(folder))
                logger.info(
                    "tenants applied",
                    metadata: [
                        "created": "\(report.created.count)", "updated": "\(report.updated.count)",
                        "unchanged": "\(report.unchanged.count)",
                    ]
                )
            }
            try await settings.serve(
                store: store, masterKey: masterKey, serverConfiguration: serverConfiguration, logger: logger
            )
        }
    }

    private func serve(
        store: RelayStore,
        masterKey: MasterKey?,
        serverConfiguration: RelayServerConfiguration,
        logger: Logger
    ) async throws {
        // One set of threads for everything: the APNs pools, the listeners and PostgreSQL's connections use
        // the singleton event loops, on which `PushRelayMain` also runs the relay's tasks.
        let group = MultiThreadedEventLoopGroup.singleton
        let records = try await store.listTenants().filter(\.enabled)
        var startedSimulator: APNsSimulator?
        var target = APNsTarget(connectionsPerPool: connectionsPerPool)
        if apnsSimulator {
            let (started, simulatorTarget) = try await startSimulator(
                tenants: records, store: store, masterKey: masterKey, group: group, logger: logger
            )
            startedSimulator = started
            target = simulatorTarget
        } else if let apnsEndpoint {
            guard let endpoint = APNsEndpoint(parsing: apnsEndpoint) else {
                throw Failure(message: "apns endpoint must be host:port, not \(apnsEndpoint)")
            }
            target.endpointOverride = endpoint
            target.caFile = apnsCA
        }
        let simulator = startedSimulator
        let pools = PoolRegistry(store: store, masterKey: masterKey, target: target, group: group, logger: logger)
        let service = RelayService(
            store: store, pools: pools, limits: serverConfiguration.limits, requestsPerSecond: requestsPerSecond,
            requestBurst: requestBurst, logger: logger
        )
        await pools.warm(
            records.flatMap { record in
                Set(record.configuration.bundleIDs.values.flatMap(\.environments)).sorted { $0.rawValue < $1.rawValue }
                    .map { (tenant: record.id, environment: $0) }
            }
        )
        let retentionDays = self.retentionDays
        var operatorServer: OperatorHTTPServer?
        if let metricsAddress = RelayAddress(metricsListen) {
            // Relaying matters more than its metrics: a port already taken (a second relay on the same host
            // with the default) is logged, and the relay runs without the operator port.
            do {
                operatorServer = try await OperatorHTTPServer.start(
                    host: metricsAddress.host, port: metricsAddress.port, registry: Self.bootstrapMetrics(),
                    readiness: { await service.notReadyReason() }, group: group, logger: logger
                )
            } catch {
                logger.error(
                    "operator HTTP port not opened; running without /metrics, /healthz and /readyz",
                    metadata: ["address": "\(metricsListen)", "error": "\(error)"]
                )
            }
        }
        let server = try await RelayServer.start(
            configuration: serverConfiguration, service: service, group: group, logger: logger
        )
        let address = "\(server.host):\(server.port)"
        // Logged, not printed: standard output is block-buffered when it is a file or a journal, and these lines
        // matter at start, not at exit.
        logger.notice("pushrelay: listening", metadata: ["address": "\(address)"])
        let operatorAddress = operatorServer.map { "\($0.host):\($0.port)" }
        if let operatorAddress {
            logger.notice("pushrelay: metrics and health", metadata: ["address": "http://\(operatorAddress)"])
        }
        if let readyFile {
            // The relay's address on the first line (what scripts read), the operator port's on the second.
            let text = address + "\n" + (operatorAddress.map { "metrics \($0)\n" } ?? "")
            try Data(text.utf8).write(to: URL(fileURLWithPath: readyFile), options: .atomic)
        }
        // A graceful shutdown (SIGTERM, SIGINT) stops the parts from the last to the first: the listener
        // (GOODBYE, in-flight requests answered), the operator port, the fan-out (pages being sent are
        // finished and their delivery rows written), the samplers, the heartbeat (its row removed: the other
        // relays take its share of the tenants' rates), then the pools and the simulator.
        var parts = [
            RelayPart(
                "APNs pools",
                stop: {
                    await pools.shutdown()
                    try? await simulator?.shutdown()
                }
            ),
            RelayPart("key-change follower", work: { await pools.followKeyChanges() }),
            RelayPart(
                "maintenance",
                work: {
                    while !Task.isCancelled {
                        do {
                            let report = try await store.maintain(retentionDays: retentionDays)
                            logger.info("maintenance done", metadata: ["report": "\(report)"])
                        } catch {
                            logger.warning("maintenance failed", metadata: ["error": "\(error)"])
                        }
                        try? await Task.sleep(for: .seconds(3_600))
                    }
                }
            ),
            // This process in relay_nodes, by its lease owner name: the relays share each tenant's rate.
            RelayPart("node heartbeat", work: { await service.runHeartbeat(node: service.worker.owner) }),
            RelayPart("metrics sampler", work: { await service.recordMetrics(every: .seconds(5)) }),
            RelayPart("fan-out worker", work: { await service.runFanOut() }),
        ]
        if let operatorServer {
            parts.append(RelayPart("operator HTTP server", stop: { await operatorServer.shutdown() }))
        }
        parts.append(
            RelayPart(
                "relay listener",
                stop: {
                    logger.info("shutting down gracefully")
                    await server.shutdown()
                }
            )
        )
        let serviceGroup = ServiceGroup(
            services: parts, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
        )
        try await serviceGroup.run()
        logger.notice("pushrelay: stopped")
    }

    /// Makes the Prometheus registry the backend of swift-metrics, with buckets fitting the relay's
    /// histograms, and returns it.
    private static func bootstrapMetrics() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["pushrelay_apns_latency_seconds"] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10),
        ]
        factory.valueHistogramBuckets["pushrelay_delivery_write_batch_size"] = [
            1, 2, 5, 10, 25, 50, 100, 128, 250, 500, 1_000,
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }

    /// Starts the in-process simulator, trusting every stored key of the tenants (when the master key opens
    /// them) and an ephemeral key for each tenant.
    private func startSimulator(
        tenants: [TenantRecord],
        store: RelayStore,
        masterKey: MasterKey?,
        group: any EventLoopGroup,
        logger: Logger
    ) async throws -> (APNsSimulator, APNsTarget) {
        var configuration = APNsSimulatorConfiguration(certificateDirectory: simDir)
        var fallbackKeys: [String: APNsSigningKey] = [:]
        for record in tenants {
            let key = try APNsSigningKey(
                privateKey: P256.Signing.PrivateKey(), keyID: Self.appleID(prefix: "SIMK", record.id),
                teamID: Self.appleID(prefix: "SIMT", record.id)
            )
            fallbackKeys[record.id] = key
            configuration.keys.append(APNsSimulatorKey(key))
            configuration.topics.append(contentsOf: record.configuration.bundleIDs.keys)
            if let masterKey, let stored = try? await store.loadSigningKeys(tenant: record.id, masterKey: masterKey) {
                configuration.keys.append(contentsOf: stored.map { APNsSimulatorKey($0.key) })
            }
        }
        let simulator = try await APNsSimulator.start(configuration: configuration, group: group.next())
        logger.info("APNs simulator started", metadata: ["port": "\(simulator.port)", "ca": "\(simulator.caFile)"])
        let target = APNsTarget(
            endpointOverride: APNsEndpoint(host: "127.0.0.1", port: simulator.port), caFile: simulator.caFile,
            connectionsPerPool: connectionsPerPool, fallbackKeys: fallbackKeys
        )
        return (simulator, target)
    }

    /// A 10-character id of A-Z and 0-9, as Apple's key and team ids are: `prefix` and the tenant's letters.
    private static func appleID(prefix: String, _ tenant: String) -> String {
        let letters = tenant.uppercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber) }
        return String((prefix + letters + "0000000000").prefix(10))
    }

    /// The master key from the file or the environment; `nil` when neither gives one.
    private static func loadMasterKey(file: String?) throws -> MasterKey? {
        do {
            return try MasterKey.load(file: file)
        } catch {
            if case .missingMasterKey = error { return nil }
            throw Failure(message: error.description)
        }
    }

    private func makeServerConfiguration() throws -> RelayServerConfiguration {
        guard let endpoint = RelayAddress(listen) else {
            throw Failure(message: "listen must be host:port, not \(listen)")
        }
        var configuration = RelayServerConfiguration(
            host: endpoint.host, port: endpoint.port,
            limits: ProtocolLimits(
                maxFrameBytes: maxFrameBytes, maxDecompressedBytes: maxDecompressedBytes, maxInFlight: maxInFlight,
                maxRecipients: maxRecipients
            ),
            idleTimeout: idleTimeout == 0 ? nil : .seconds(idleTimeout),
            writeStallTimeout: .seconds(max(1, writeStallTimeout))
        )
        switch (tlsCert, tlsKey) {
        case (nil, nil):
            guard tlsClientCA == nil else { throw Failure(message: "tls client ca needs tls cert and tls key") }
        case (let cert?, let key?):
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            )
            if let tlsClientCA {
                tls.certificateVerification = .noHostnameVerification
                tls.trustRoots = .file(tlsClientCA)
            }
            configuration.tls = tls
        default:
            throw Failure(message: "give both tls cert and tls key")
        }
        return configuration
    }
}

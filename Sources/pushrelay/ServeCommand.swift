import APNsSimulator
import ArgumentParser
import FCMSimulator
import Foundation
import Logging
import NIOPosix
import PushRelayProtocol
import RelayServer
import RelayStore

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

            With --apns-simulator the relay starts the APNs and FCM simulators in-process and sends there: \
            tenants without a stored key get an ephemeral one, and tenants with a Firebase project without a \
            stored service account one of the FCM simulator's. Without it, it sends to Apple (production and \
            sandbox) and Google.

            Every setting is a flag, a PUSHRELAY_* environment variable, or a key of the --config file, in that \
            order of precedence (README: "Settings").

            SIGTERM or SIGINT: stop accepting, say GOODBYE, answer in-flight requests, finish running fan-outs, \
            close the pools, then stop the embedded PostgreSQL if this process started it. SIGHUP: apply the \
            tenant files of --tenants again, as at start (a bad file is logged and changes nothing).
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
    @Flag(
        inversion: .prefixedNo,
        help: "Send to in-process APNs and FCM simulators instead of Apple and Google (default off).")
    var apnsSimulator: Bool?
    @Option(help: "Folder for the simulator's CA (default .pushrelay/apns-sim).")
    var simDir: String?
    @Option(help: "Send to this APNs host:port instead of Apple's (with --apns-ca).")
    var apnsEndpoint: String?
    @Option(help: "CA file to trust for --apns-endpoint.")
    var apnsCA: String?
    @Option(help: "Send to this FCM host:port instead of Google's (with --fcm-ca).")
    var fcmEndpoint: String?
    @Option(help: "CA file to trust for --fcm-endpoint and the service accounts' token endpoints.")
    var fcmCA: String?
    @Option(help: "Messages a minute each FCM pool sends to its project at most (default 600000, FCM's quota).")
    var fcmMessagesPerMinute: Int?
    @Option(
        help:
            "HTTP/2 connections each APNs pool keeps open, one pool per tenant and environment: its floor (default 2)."
    )
    var connectionsPerPool: Int?
    @Option(help: "HTTP/2 connections an APNs pool may open while its streams stay near APNs' limit (default 16).")
    var maxConnectionsPerPool: Int?
    @Option(help: "HTTP/2 connections an FCM pool may open while its streams stay near Google's limit (default 64).")
    var fcmMaxConnectionsPerPool: Int?
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
    @Option(help: "Connections the relay holds at most, before HELLO or after (default 4096).")
    var maxConnections: Int?
    @Option(help: "Authenticated connections one tenant may hold on this relay (default 1024).")
    var maxConnectionsPerTenant: Int?
    @Option(help: "Most recipients per send (default 10000).")
    var maxRecipients: Int?
    @Option(
        help:
            "Bytes of request bodies (after zstd) one connection's requests in flight may hold before the relay stops reading it (default 16777216)."
    )
    var maxInflightBytesPerConnection: Int?
    @Option(
        help:
            "Bytes of request bodies (after zstd) the requests in flight of all connections may hold together (default 268435456)."
    )
    var maxInflightBytes: Int?
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
    @Option(help: "Database statements one tenant's requests run at once; more wait their turn (default 4).")
    var dbStatementsPerTenant: Int?
    @Option(help: "Seconds one database statement may run before PostgreSQL cancels it; 0: no limit (default 30).")
    var statementTimeout: Int?
    @Option(help: "Days of delivery rows kept; older daily partitions are dropped hourly (default 30).")
    var retentionDays: Int?
    @Option(help: "host:port of the operators' HTTP port; \"\" turns it off (default 127.0.0.1:9411).")
    var metricsListen: String?
    @Option(help: "Write host:port here once the relay accepts connections.")
    var readyFile: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    func run() async throws {
        // First of all, so that no SIGHUP during the start can kill the process.
        let hangups = HangupSignals()
        let settings: ServeSettings
        do {
            settings = try ServeSettings.resolve(
                commandLine: commandLineValues, environment: ProcessInfo.processInfo.environment,
                configFile: config
            )
            try settings.checkReadyFile()
        } catch {
            throw Failure(message: error.description)
        }
        do {
            try await settings.serve(hangups: hangups)
        } catch let error as RelayStartError {
            throw Failure(message: error.description)
        }
    }

    /// The settings given as flags, by file key.
    private var commandLineValues: [String: String] {
        let given: [String: String?] = [
            "listen": listen, "database_url": databaseURL, "data_dir": dataDir, "tenants": tenants,
            "master_key_file": masterKeyFile, "apns_simulator": apnsSimulator.map { "\($0)" }, "sim_dir": simDir,
            "apns_endpoint": apnsEndpoint, "apns_ca": apnsCA, "fcm_endpoint": fcmEndpoint, "fcm_ca": fcmCA,
            "fcm_messages_per_minute": fcmMessagesPerMinute.map(String.init),
            "connections_per_pool": connectionsPerPool.map { "\($0)" },
            "max_connections_per_pool": maxConnectionsPerPool.map { "\($0)" },
            "fcm_max_connections_per_pool": fcmMaxConnectionsPerPool.map { "\($0)" }, "tls_cert": tlsCert,
            "tls_key": tlsKey,
            "tls_client_ca": tlsClientCA, "max_frame_bytes": maxFrameBytes.map { "\($0)" },
            "max_decompressed_bytes": maxDecompressedBytes.map { "\($0)" },
            "max_in_flight": maxInFlight.map { "\($0)" }, "max_recipients": maxRecipients.map { "\($0)" },
            "max_connections": maxConnections.map { "\($0)" },
            "max_connections_per_tenant": maxConnectionsPerTenant.map { "\($0)" },
            "max_inflight_bytes_per_connection": maxInflightBytesPerConnection.map { "\($0)" },
            "max_inflight_bytes": maxInflightBytes.map { "\($0)" },
            "idle_timeout": idleTimeout.map { "\($0)" }, "write_stall_timeout": writeStallTimeout.map { "\($0)" },
            "requests_per_second": requestsPerSecond.map { "\($0)" },
            "request_burst": requestBurst.map { "\($0)" },
            "db_statements_per_tenant": dbStatementsPerTenant.map { "\($0)" },
            "statement_timeout": statementTimeout.map { "\($0)" }, "retention_days": retentionDays.map { "\($0)" },
            "metrics_listen": metricsListen, "ready_file": readyFile, "log_level": logLevel,
        ]
        return given.compactMapValues { $0 }
    }
}

extension ServeSettings {
    /// Runs the relay with these settings until SIGTERM or SIGINT: the tenant files applied, the in-process
    /// simulator started when asked for, then ``Relay`` built and run, the tenant files applied again at each of
    /// `hangups`.
    fileprivate func serve(hangups: HangupSignals) async throws {
        // Escaped, so that nothing a client sends can shape a log line.
        var configuredLogger = Logger(label: "pushrelay") {
            EscapingLogHandler(wrapping: StreamLogHandler.standardError(label: $0))
        }
        configuredLogger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let logger = configuredLogger
        let files = OpenFilesLimit.raise()
        logger.notice(
            "open files limit", metadata: ["was": "\(files.before)", "now": "\(files.after)", "hard": "\(files.hard)"])
        let masterKey = try self.masterKey()
        var configuration = try relayConfiguration(masterKey: masterKey)
        if let address = try operatorAddress() {
            configuration.operatorPort = (address.host, address.port, PrometheusExport.bootstrap())
        }
        if masterKey == nil {
            logger.notice("no master key: stored signing keys cannot be used until one is given")
        }
        let settings = self
        let base = configuration
        let statementTimeout = self.statementTimeout > 0 ? Duration.seconds(self.statementTimeout) : nil
        try await DatabaseOptions.withStore(
            databaseURL: databaseURL, dataDir: dataDir, access: .create, statementTimeout: statementTimeout
        ) { store in
            try await settings.applyTenantFiles(to: store, logger: logger)
            // One set of threads for everything: the APNs pools, the listeners and PostgreSQL's connections use
            // the singleton event loops, on which `PushRelayMain` also runs the relay's tasks.
            let group = MultiThreadedEventLoopGroup.singleton
            var configuration = base
            var simulator: APNsSimulator?
            var fcmSimulator: FCMSimulator?
            if settings.apnsSimulator {
                let started = try await settings.startSimulator(
                    store: store, masterKey: masterKey, group: group, logger: logger)
                simulator = started.simulator
                configuration.target = started.target
                let fcm = try await settings.startFCMSimulator(store: store, group: group, logger: logger)
                fcmSimulator = fcm.simulator
                configuration.fcmTarget = fcm.target
            }
            let relay = try await Relay.start(configuration: configuration, store: store, group: group, logger: logger)
            try settings.announce(relay, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    for await _ in hangups.arrivals {
                        await settings.reapplyTenantFiles(to: store, logger: logger)
                    }
                }
                defer { tasks.cancelAll() }
                try await relay.run()
            }
            try? await simulator?.shutdown()
            try? await fcmSimulator?.shutdown()
            logger.notice("pushrelay: stopped")
        }
    }

    /// Applies the tenant files of ``tenants`` (none when it is `""`).
    private func applyTenantFiles(to store: RelayStore, logger: Logger) async throws {
        guard !tenants.isEmpty else { return }
        guard FileManager.default.fileExists(atPath: tenants) else {
            throw Failure(
                message: "no tenants folder \(tenants) (give one with --tenants, PUSHRELAY_TENANTS or "
                    + "`tenants:` in the settings file; \"\" applies none)")
        }
        let report = try await store.syncTenants(try TenantConfiguration.loadFolder(tenants))
        logger.info(
            "tenants applied",
            metadata: [
                "created": "\(report.created.count)", "updated": "\(report.updated.count)",
                "unchanged": "\(report.unchanged.count)",
            ]
        )
    }

    /// Applies the tenant files again on SIGHUP: a bad file is logged and changes nothing, and never stops the
    /// relay.
    private func reapplyTenantFiles(to store: RelayStore, logger: Logger) async {
        guard !tenants.isEmpty else {
            logger.notice("SIGHUP ignored: no tenants folder to re-read (tenants is \"\")")
            return
        }
        logger.notice("SIGHUP: applying the tenant files again", metadata: ["tenants": "\(tenants)"])
        do {
            try await applyTenantFiles(to: store, logger: logger)
        } catch {
            logger.error("tenant files not applied; nothing changed", metadata: ["error": "\(error)"])
        }
    }

    /// Logs the relay's addresses and writes the ready file. Logged, not printed: standard output is
    /// block-buffered when it is a file or a journal, and these lines matter at start, not at exit.
    private func announce(_ relay: Relay, logger: Logger) throws {
        let address = HostAndPort(host: relay.listener.host, port: relay.listener.port).description
        logger.notice(
            "pushrelay: listening", metadata: ["address": "\(address)", "version": "\(RelayVersion.current)"])
        let operatorAddress = relay.operatorServer.map { HostAndPort(host: $0.host, port: $0.port).description }
        if let operatorAddress {
            logger.notice("pushrelay: metrics and health", metadata: ["address": "http://\(operatorAddress)"])
        }
        if let readyFile {
            // The relay's address on the first line (what scripts read), the operator port's on the second.
            let text = address + "\n" + (operatorAddress.map { "metrics \($0)\n" } ?? "")
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: readyFile), options: .atomic)
            } catch {
                throw Failure(
                    message: "ready_file \(readyFile) cannot be written: \((error as NSError).localizedDescription)")
            }
        }
    }
}

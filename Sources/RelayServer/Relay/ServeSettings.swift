import Foundation
import Logging
import RelayStore
import Yams

/// Every setting of `pushrelay serve`. Each comes from, in this order of precedence: its command-line flag,
/// its environment variable (`PUSHRELAY_` and the file key in capitals), the configuration file
/// (`--config FILE` or `PUSHRELAY_CONFIG`, YAML, one `key: value` per setting), or its default.
package struct ServeSettings: Sendable, Equatable {
    /// Where backends connect (`host:port`; port 0 picks a free one).
    package var listen = "127.0.0.1:7411"
    /// The PostgreSQL to use; `nil` for the embedded cluster in ``dataDir``.
    package var databaseURL: String?
    /// The embedded cluster's folder when no database URL is given.
    package var dataDir = ".pushrelay/pg"
    /// The folder of tenant files applied at start; empty applies none.
    package var tenants = "Tenants"
    /// The file holding the master key (else `PUSHRELAY_MASTER_KEY`).
    package var masterKeyFile: String?
    /// Whether to send to an in-process APNs simulator instead of Apple.
    package var apnsSimulator = false
    /// The in-process simulator's CA folder.
    package var simDir = ".pushrelay/apns-sim"
    /// Another APNs endpoint (`host:port`) instead of Apple's.
    package var apnsEndpoint: String?
    /// The CA file to trust for ``apnsEndpoint``.
    package var apnsCA: String?
    /// Another FCM endpoint (`host:port`) instead of Google's.
    package var fcmEndpoint: String?
    /// The CA file to trust for ``fcmEndpoint`` and for the service accounts' token endpoints.
    package var fcmCA: String?
    /// Messages a minute each FCM pool sends to its project at most (FCM's default quota).
    package var fcmMessagesPerMinute = 600_000
    /// HTTP/2 connections each APNs pool keeps open however idle (its floor).
    package var connectionsPerPool = 2
    /// HTTP/2 connections each APNs pool may open while its streams stay near APNs' limit (its cap).
    package var maxConnectionsPerPool = 16
    /// HTTP/2 connections each FCM pool may open while its streams stay near Google's limit (its cap): Google's
    /// front ends take 100 streams a connection where APNs takes 1,000, so an FCM pool needs more connections for
    /// as many messages in flight.
    package var fcmMaxConnectionsPerPool = 64
    /// The listener's TLS certificate chain (PEM).
    package var tlsCert: String?
    /// The listener's TLS private key (PEM).
    package var tlsKey: String?
    /// The CA whose client certificates the listener requires.
    package var tlsClientCA: String?
    /// The largest frame body accepted, in bytes.
    package var maxFrameBytes = 1_048_576
    /// The largest body after zstd decompression, in bytes.
    package var maxDecompressedBytes = 4_194_304
    /// Requests in flight per connection before the relay stops reading it.
    package var maxInFlight = 128
    /// Connections the listener holds at most, before HELLO or after.
    package var maxConnections = 4_096
    /// Authenticated connections one tenant may hold on this relay.
    package var maxConnectionsPerTenant = 1_024
    /// User ids plus tokens per send.
    package var maxRecipients = 10_000
    /// Bytes of request bodies (after decompression) one connection's in-flight requests may hold before the relay
    /// stops reading it.
    package var maxInflightBytesPerConnection = 16 << 20
    /// Bytes of request bodies (after decompression) the in-flight requests of all connections may hold.
    package var maxInflightBytes = 256 << 20
    /// Seconds without a client frame before GOODBYE and close; 0 never.
    package var idleTimeout = 300
    /// Seconds a connection's answers may wait for a peer that does not read them before it is closed.
    package var writeStallTimeout = 30
    /// Each credential's request limit per second.
    package var requestsPerSecond = 1_000.0
    /// Each credential's burst above that rate.
    package var requestBurst = 2_000
    /// Database statements one tenant's requests run at once.
    package var dbStatementsPerTenant = 4
    /// Seconds one database statement may run before PostgreSQL cancels it; 0: no limit.
    package var statementTimeout = 30
    /// Days of delivery rows kept.
    package var retentionDays = 30
    /// The operator HTTP port (`host:port`); empty turns it off.
    package var metricsListen = "127.0.0.1:9411"
    /// A file written with `host:port` once the relay accepts connections.
    package var readyFile: String?
    /// The swift-log level.
    package var logLevel = "info"

    /// The defaults.
    package init() {}

    /// The environment variable naming the configuration file when `--config` is not given.
    package static let configEnvironmentVariable = "PUSHRELAY_CONFIG"

    /// Every setting: its file key, command-line flag and environment variable.
    package static var all: [ServeSetting] {
        [
            ServeSetting("listen", .string(\.listen)),
            ServeSetting("database_url", .optionalString(\.databaseURL)),
            ServeSetting("data_dir", .string(\.dataDir)),
            ServeSetting("tenants", .string(\.tenants)),
            ServeSetting("master_key_file", .optionalString(\.masterKeyFile)),
            ServeSetting("apns_simulator", .bool(\.apnsSimulator)),
            ServeSetting("sim_dir", .string(\.simDir)),
            ServeSetting("apns_endpoint", .optionalString(\.apnsEndpoint)),
            ServeSetting("apns_ca", .optionalString(\.apnsCA)),
            ServeSetting("fcm_endpoint", .optionalString(\.fcmEndpoint)),
            ServeSetting("fcm_ca", .optionalString(\.fcmCA)),
            ServeSetting("fcm_messages_per_minute", .int(\.fcmMessagesPerMinute, atLeast: 1)),
            ServeSetting("connections_per_pool", .int(\.connectionsPerPool, atLeast: 1)),
            ServeSetting("max_connections_per_pool", .int(\.maxConnectionsPerPool, atLeast: 1)),
            ServeSetting("fcm_max_connections_per_pool", .int(\.fcmMaxConnectionsPerPool, atLeast: 1)),
            ServeSetting("tls_cert", .optionalString(\.tlsCert)),
            ServeSetting("tls_key", .optionalString(\.tlsKey)),
            ServeSetting("tls_client_ca", .optionalString(\.tlsClientCA)),
            ServeSetting("max_frame_bytes", .int(\.maxFrameBytes, atLeast: 1024)),
            ServeSetting("max_decompressed_bytes", .int(\.maxDecompressedBytes, atLeast: 1024)),
            ServeSetting("max_in_flight", .int(\.maxInFlight, atLeast: 1)),
            ServeSetting("max_connections", .int(\.maxConnections, atLeast: 1)),
            ServeSetting("max_connections_per_tenant", .int(\.maxConnectionsPerTenant, atLeast: 1)),
            ServeSetting("max_recipients", .int(\.maxRecipients, atLeast: 1)),
            ServeSetting(
                "max_inflight_bytes_per_connection", .int(\.maxInflightBytesPerConnection, atLeast: 65_536)),
            ServeSetting("max_inflight_bytes", .int(\.maxInflightBytes, atLeast: 65_536)),
            ServeSetting("idle_timeout", .int(\.idleTimeout, atLeast: 0)),
            ServeSetting("write_stall_timeout", .int(\.writeStallTimeout, atLeast: 1)),
            ServeSetting("requests_per_second", .double(\.requestsPerSecond)),
            ServeSetting("request_burst", .int(\.requestBurst, atLeast: 1)),
            ServeSetting("db_statements_per_tenant", .int(\.dbStatementsPerTenant, atLeast: 1)),
            ServeSetting("statement_timeout", .int(\.statementTimeout, atLeast: 0)),
            ServeSetting("retention_days", .int(\.retentionDays, atLeast: 1)),
            ServeSetting("metrics_listen", .string(\.metricsListen)),
            ServeSetting("ready_file", .optionalString(\.readyFile)),
            ServeSetting("log_level", .logLevel(\.logLevel)),
        ]
    }

    /// The settings from `commandLine` (file key to the flag's value, for the flags given), then
    /// `environment`, then the configuration file (`configFile`, else the one `PUSHRELAY_CONFIG` names),
    /// then the defaults.
    ///
    /// - Throws: ``ServeSettingsError`` for an unreadable or malformed file, a key it does not know, or a
    ///   value that is not of its setting's type, naming where the value came from.
    package static func resolve(
        commandLine: [String: String],
        environment: [String: String],
        configFile: String?
    ) throws(ServeSettingsError) -> ServeSettings {
        let path = configFile ?? environment[configEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        var fileValues: [String: String] = [:]
        if let path {
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw ServeSettingsError("\(path): cannot be read (\(error.localizedDescription))")
            }
            fileValues = try values(yaml: text, source: path)
        }
        var settings = ServeSettings()
        for setting in all {
            if let value = commandLine[setting.key] {
                try setting.apply(value, to: &settings, source: setting.flag)
            } else if let value = environment[setting.environmentVariable] {
                try setting.apply(value, to: &settings, source: setting.environmentVariable)
            } else if let value = fileValues[setting.key] {
                try setting.apply(value, to: &settings, source: "\(path ?? ""): \(setting.key)")
            }
        }
        return settings
    }

    /// The `key: value` pairs of a configuration file, as text; a null value is left out.
    static func values(yaml: String, source: String) throws(ServeSettingsError) -> [String: String] {
        let node: Node?
        do {
            node = try Yams.compose(yaml: yaml)
        } catch {
            throw ServeSettingsError("\(source): not valid YAML (\(error))")
        }
        guard let node else { return [:] }
        func place(_ line: Int?) -> String { source + (line.map { ":\($0)" } ?? "") }
        let mapping: YAMLMapping
        do {
            mapping = try YAMLMapping(node, allowedKeys: all.map(\.key))
        } catch {
            switch error {
            case .notMapping:
                throw ServeSettingsError("\(source): the file must be a mapping of setting names to values")
            case .keyNotString(let key, let line), .unknownKey(let key, let line, _):
                throw ServeSettingsError(
                    "\(place(line)): unknown key '\(key)'; the keys are " + all.map(\.key).joined(separator: ", "))
            case .duplicateKey(let key, let line):
                throw ServeSettingsError("\(place(line)): \(key) is given twice")
            }
        }
        var values: [String: String] = [:]
        for entry in mapping.entries {
            guard let scalar = entry.value.scalar else {
                throw ServeSettingsError("\(place(entry.keyNode.mark?.line)): \(entry.key) must be a single value")
            }
            if entry.value.tag.rawValue == Tag.Name.null.rawValue { continue }
            values[entry.key] = scalar.string
        }
        return values
    }
}

/// One setting of `pushrelay serve`: its names in the file, on the command line and in the environment.
package struct ServeSetting {
    /// How a value's text becomes the setting's value.
    enum Kind {
        case string(WritableKeyPath<ServeSettings, String>)
        case optionalString(WritableKeyPath<ServeSettings, String?>)
        /// A whole number of at least `atLeast`: a limit of 0, a frame too small for a HELLO or no day of retention
        /// cannot work, so `serve` refuses it at start, naming where it came from.
        case int(WritableKeyPath<ServeSettings, Int>, atLeast: Int)
        case double(WritableKeyPath<ServeSettings, Double>)
        case bool(WritableKeyPath<ServeSettings, Bool>)
        case logLevel(WritableKeyPath<ServeSettings, String>)
    }

    /// The key in the configuration file (`max_in_flight`).
    package let key: String
    let kind: Kind

    init(_ key: String, _ kind: Kind) {
        self.key = key
        self.kind = kind
    }

    /// The command-line flag (`--max-in-flight`).
    package var flag: String {
        "--" + key.replacingOccurrences(of: "_", with: "-")
    }

    /// The environment variable (`PUSHRELAY_MAX_IN_FLIGHT`).
    package var environmentVariable: String {
        "PUSHRELAY_" + key.uppercased()
    }

    /// Sets the setting in `settings` from `text`, which came from `source`.
    func apply(_ text: String, to settings: inout ServeSettings, source: String) throws(ServeSettingsError) {
        switch kind {
        case .string(let path):
            settings[keyPath: path] = text
        case .optionalString(let path):
            settings[keyPath: path] = text.isEmpty ? nil : text
        case .int(let path, let minimum):
            guard let value = Int(text.replacingOccurrences(of: "_", with: "")), value >= minimum else {
                throw ServeSettingsError("\(source): '\(text)' is not a whole number of at least \(minimum)")
            }
            settings[keyPath: path] = value
        case .double(let path):
            guard let value = Double(text), value > 0, value.isFinite else {
                throw ServeSettingsError("\(source): '\(text)' is not a number above 0")
            }
            settings[keyPath: path] = value
        case .bool(let path):
            switch text.lowercased() {
            case "true", "yes", "on", "1": settings[keyPath: path] = true
            case "false", "no", "off", "0": settings[keyPath: path] = false
            default: throw ServeSettingsError("\(source): '\(text)' is not true or false")
            }
        case .logLevel(let path):
            guard Logger.Level(rawValue: text) != nil else {
                throw ServeSettingsError(
                    "\(source): '\(text)' is not a log level (\(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            settings[keyPath: path] = text
        }
    }
}

/// A configuration that cannot be used, saying which file, key, flag or variable is wrong.
package struct ServeSettingsError: Error, CustomStringConvertible, Equatable {
    /// What is wrong.
    package let description: String

    init(_ description: String) {
        self.description = description
    }
}

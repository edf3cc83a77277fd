import Foundation
import RelayServer
import Testing

/// `pushrelay serve`'s settings: flag over environment over file over default, unknown file keys and bad
/// values refused with where they came from, and every setting documented and in the example file.
@Suite struct ServeSettingsTests {
    /// The repository's root folder.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func aFlagWinsOverTheEnvironmentWhichWinsOverTheFileWhichWinsOverTheDefault() throws {
        let file = try temporaryFile(
            """
            listen: 0.0.0.0:7500
            max_in_flight: 64
            log_level: debug
            apns_simulator: true
            requests_per_second: 250.5
            metrics_listen: ""
            tls_cert: ~
            """
        )
        let settings = try ServeSettings.resolve(
            commandLine: ["log_level": "warning"],
            environment: ["PUSHRELAY_MAX_IN_FLIGHT": "32", "PUSHRELAY_LOG_LEVEL": "error", "HOME": "/root"],
            configFile: file
        )
        var expected = ServeSettings()
        expected.listen = "0.0.0.0:7500"  // file
        expected.maxInFlight = 32  // environment over file
        expected.logLevel = "warning"  // flag over environment and file
        expected.apnsSimulator = true
        expected.requestsPerSecond = 250.5
        expected.metricsListen = ""
        #expect(settings == expected)
        #expect(settings.retentionDays == 30)  // default
    }

    @Test func theFileCanBeNamedByTheEnvironment() throws {
        let file = try temporaryFile("retention_days: 7\n")
        let settings = try ServeSettings.resolve(
            commandLine: [:], environment: ["PUSHRELAY_CONFIG": file], configFile: nil
        )
        #expect(settings.retentionDays == 7)
        let flagFile = try temporaryFile("retention_days: 9\n")
        let fromFlag = try ServeSettings.resolve(
            commandLine: [:], environment: ["PUSHRELAY_CONFIG": file], configFile: flagFile
        )
        #expect(fromFlag.retentionDays == 9)
    }

    @Test func noFileNoEnvironmentGivesTheDefaults() throws {
        #expect(try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: nil) == ServeSettings())
    }

    @Test func anUnknownKeyInTheFileIsAnErrorNamingFileLineAndKey() throws {
        let file = try temporaryFile("listen: 127.0.0.1:7411\nmax_inflight: 3\n")
        let error = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: file)
        }
        #expect(error?.description.hasPrefix("\(file):2: unknown key 'max_inflight'; the keys are listen,") == true)
    }

    @Test func badValuesNameWhereTheyCameFrom() throws {
        let file = try temporaryFile("idle_timeout: soon\n")
        let fromFile = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: file)
        }
        #expect(fromFile?.description == "\(file): idle_timeout: 'soon' is not a whole number of at least 0")
        let fromEnvironment = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(
                commandLine: [:], environment: ["PUSHRELAY_APNS_SIMULATOR": "maybe"], configFile: nil
            )
        }
        #expect(fromEnvironment?.description == "PUSHRELAY_APNS_SIMULATOR: 'maybe' is not true or false")
        let fromFlag = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: ["log_level": "loud"], environment: [:], configFile: nil)
        }
        #expect(fromFlag?.description.hasPrefix("--log-level: 'loud' is not a log level") == true)
        let nested = try temporaryFile("tenants:\n  - circl\n")
        let notScalar = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: nested)
        }
        #expect(notScalar?.description == "\(nested):1: tenants must be a single value")
        let missing = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: "/nonexistent/relay.yaml")
        }
        #expect(missing?.description.hasPrefix("/nonexistent/relay.yaml: cannot be read") == true)
    }

    @Test func limitsThatCannotWorkAreRefusedNamingTheSetting() throws {
        let file = try temporaryFile("max_in_flight: 0\n")
        let fromFile = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: file)
        }
        #expect(fromFile?.description == "\(file): max_in_flight: '0' is not a whole number of at least 1")
        let refused: [(key: String, value: String, minimum: Int)] = [
            ("retention_days", "0", 1), ("max_recipients", "0", 1), ("request_burst", "0", 1),
            ("write_stall_timeout", "0", 1), ("connections_per_pool", "0", 1), ("max_connections_per_pool", "0", 1),
            ("fcm_max_connections_per_pool", "0", 1),
            ("max_frame_bytes", "100", 1024), ("max_decompressed_bytes", "0", 1024), ("max_in_flight", "-3", 1),
        ]
        for (key, value, minimum) in refused {
            let setting = try #require(ServeSettings.all.first { $0.key == key })
            let error = #expect(throws: ServeSettingsError.self) {
                try ServeSettings.resolve(
                    commandLine: [:], environment: [setting.environmentVariable: value], configFile: nil)
            }
            #expect(
                error?.description
                    == "\(setting.environmentVariable): '\(value)' is not a whole number of at least \(minimum)")
        }
        let rate = #expect(throws: ServeSettingsError.self) {
            try ServeSettings.resolve(commandLine: ["requests_per_second": "0"], environment: [:], configFile: nil)
        }
        #expect(rate?.description == "--requests-per-second: '0' is not a number above 0")
        // 0 is a meaningful idle timeout: never.
        let never = try ServeSettings.resolve(commandLine: ["idle_timeout": "0"], environment: [:], configFile: nil)
        #expect(never.idleTimeout == 0)
    }

    @Test func aReadyFileThatCannotBeWrittenIsRefusedBeforeTheRelayListens() throws {
        var settings = ServeSettings()
        settings.readyFile = "/nonexistent-folder/ready"
        let missing = #expect(throws: ServeSettingsError.self) { try settings.checkReadyFile() }
        #expect(
            missing?.description.hasPrefix(
                "ready_file /nonexistent-folder/ready cannot be written: no such file or directory") == true)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ready-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        settings.readyFile = folder.path
        let isFolder = #expect(throws: ServeSettingsError.self) { try settings.checkReadyFile() }
        #expect(isFolder?.description.hasPrefix("ready_file \(folder.path) cannot be written: it is a folder") == true)
        settings.readyFile = folder.appendingPathComponent("ready").path
        try settings.checkReadyFile()
        // The check leaves nothing behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        settings.readyFile = nil
        try settings.checkReadyFile()
    }

    @Test func everySettingHasAllItsNamesAndEveryPropertyIsASetting() {
        let keys = ServeSettings.all.map(\.key)
        #expect(Set(keys).count == keys.count)
        let properties = Mirror(reflecting: ServeSettings()).children.compactMap(\.label).map(snakeCase)
        #expect(Set(properties) == Set(keys))
        let maxInFlight = ServeSettings.all.first { $0.key == "max_in_flight" }
        #expect(maxInFlight?.flag == "--max-in-flight")
        #expect(maxInFlight?.environmentVariable == "PUSHRELAY_MAX_IN_FLIGHT")
    }

    @Test func theReadmeTableListsEverySetting() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `--") }
        for setting in ServeSettings.all {
            // The flag ends at a space (its value) or the backtick: `--max-connections` is not `--max-connections-per-pool`.
            let row = rows.first { $0.hasPrefix("| `\(setting.flag) ") || $0.hasPrefix("| `\(setting.flag)`") }
            #expect(row?.contains("`\(setting.environmentVariable)`") == true, "README: no row for \(setting.flag)")
            #expect(row?.contains("`\(setting.key)`") == true, "README: \(setting.flag)'s row lacks its file key")
        }
    }

    @Test func theExampleFileHoldsEverySettingAndResolves() throws {
        let path = Self.root.appendingPathComponent("Ops/deploy/pushrelay.yaml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for setting in ServeSettings.all {
            #expect(text.contains("\(setting.key):"), "Ops/deploy/pushrelay.yaml does not mention \(setting.key)")
        }
        _ = try ServeSettings.resolve(commandLine: [:], environment: [:], configFile: path)
    }

    @Test func theUnitLeavesTheEmbeddedPostgresToTheRelayAndGivesTheReadyFileAFolder() throws {
        let unit = try String(
            contentsOf: Self.root.appendingPathComponent("Ops/deploy/pushrelay.service"), encoding: .utf8)
        let lines = Set(unit.split(separator: "\n").map(String.init))
        // SIGTERM to the relay alone, which stops the PostgreSQL it started; SIGHUP re-reads the tenant files.
        #expect(lines.contains("KillMode=mixed"))
        #expect(lines.contains("ExecReload=/bin/kill -HUP $MAINPID"))
        // PostgreSQL's JIT needs writable and executable memory.
        #expect(!unit.contains("MemoryDenyWriteExecute=yes"))
        #expect(lines.contains("RuntimeDirectory=pushrelay"))
        let settings = try ServeSettings.resolve(
            commandLine: [:], environment: [:],
            configFile: Self.root.appendingPathComponent("Ops/deploy/pushrelay.yaml").path)
        #expect(settings.readyFile?.hasPrefix("/run/pushrelay/") == true)
    }
}

/// `camelCase` as `snake_case`, with the capitalised abbreviations of the settings (`URL`, `CA`).
private func snakeCase(_ name: String) -> String {
    var result = ""
    var previousUpper = false
    for character in name {
        if character.isUppercase {
            if !previousUpper { result.append("_") }
            result.append(contentsOf: character.lowercased())
            previousUpper = true
        } else {
            result.append(character)
            previousUpper = false
        }
    }
    return result
}

/// A new file in the temporary folder holding `text`; its path.
private func temporaryFile(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("serve-settings-\(UUID().uuidString).yaml")
        .path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

import Foundation
import RelayStore
import Testing

/// The repository's `Tenants/` folder, found from this file's path.
let tenantsFolder = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Tenants").path

/// A minimal valid tenant file; tests change one line of it.
let minimalTenant = """
    display_name: Example
    bundle_ids:
      com.example.app:
        environments: [production]
    token_policy: one_per_user_platform
    notification_types:
      message:
        push_type: alert
    quiet_hours:
      start: "22:00"
      end: "07:00"
    """

/// Writes `files` (name to contents) into a fresh folder and returns its path.
func writeTenantFolder(_ files: [String: String]) throws -> String {
    let folder = try makeTemporaryFolder()
    for (name, text) in files {
        try text.write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
    }
    return folder
}

/// Parses `yaml` as `Tenants/example.yaml` and returns the error it must raise.
func parseError(_ yaml: String) throws -> TenantFileError {
    let configuration: TenantConfiguration
    do {
        configuration = try TenantConfiguration.parse(yaml: yaml, id: "example", file: "Tenants/example.yaml")
    } catch {
        return error
    }
    Issue.record("expected an error, parsed \(configuration)")
    throw CancellationError()
}

@Suite("Tenant files")
struct TenantFileTests {
    @Test("the five files in Tenants/ parse, with the seeds' policies and types")
    func realFiles() throws {
        let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
        #expect(tenants.map(\.id) == ["anky", "argus", "circl", "dispo", "familyportal"])
        let byID = Dictionary(uniqueKeysWithValues: tenants.map { ($0.id, $0) })

        let circl = try #require(byID["circl"])
        #expect(circl.bundleIDs.keys.sorted() == ["com.fragne.circl"])
        #expect(circl.tokenPolicy == .tokenMovesToLastUser)
        for name in [
            "message", "connection_request", "connection_accepted", "announcement", "event_reminder",
            "events_tomorrow_summary",
        ] {
            #expect(circl.notificationTypes[name]?.pushType == .alert, "\(name)")
        }
        #expect(circl.notificationTypes["message"]?.threadID == "circle-{circle_id}-channel-{channel_id}")
        let refresh = try #require(circl.notificationTypes["silent_refresh"])
        #expect(refresh.pushType == .background && refresh.priority == 5)

        let familyportal = try #require(byID["familyportal"])
        #expect(familyportal.bundleIDs["com.familyportal.app"]?.environments == [.production, .development])
        #expect(familyportal.tokenPolicy == .perUserTokenPlatformEnvironment)
        #expect(familyportal.subscriptionTopics.contains("photos"))
        #expect(familyportal.notificationTypes["chat_message"]?.subscription == "chat")

        let argus = try #require(byID["argus"])
        #expect(argus.notificationTypes.keys.sorted() == ["animal", "doorbell", "package", "person", "vehicle"])
        #expect(argus.notificationTypes.values.allSatisfy { $0.interruptionLevel == .timeSensitive })

        let anky = try #require(byID["anky"])
        #expect(anky.tokenPolicy == .onePerUserPlatform)
        #expect(anky.notificationTypes.keys.sorted() == ["daily_prompt"])
        #expect(anky.bundleIDs.values.first?.environments == [.production, .development])

        let dispo = try #require(byID["dispo"])
        #expect(dispo.bundleIDs["com.dispo.app"]?.environments == [.production, .development])
        #expect(dispo.tokenPolicy == .onePerUserPlatform)
        #expect(dispo.notificationTypes.keys.sorted() == ["event_comment", "event_created"])
        #expect(dispo.notificationTypes.values.allSatisfy { $0.pushType == .alert && $0.bundleID == "com.dispo.app" })
    }

    @Test("defaults: priority 10 (5 for background), no expiration, opt-out allowed, on by default")
    func defaults() throws {
        let configuration = try TenantConfiguration.parse(yaml: minimalTenant, id: "example", file: "example.yaml")
        let message = try #require(configuration.notificationTypes["message"])
        #expect(message.priority == 10 && message.expiration == nil && message.optOutAllowed && message.defaultEnabled)
        #expect(message.bundleID == "com.example.app")
        #expect(configuration.rateLimits == .init())
        #expect(configuration.quietHours?.action(for: "message") == .defer)
        #expect(configuration.quietHours?.timeZone == "UTC")
    }

    @Test("encoding is deterministic and round-trips")
    func encoding() throws {
        let configuration = try TenantConfiguration.parse(yaml: minimalTenant, id: "example", file: "example.yaml")
        let data = try configuration.jsonData()
        #expect(try configuration.jsonData() == data)
        #expect(try JSONDecoder().decode(TenantConfiguration.self, from: data) == configuration)
    }

    @Test("an unknown key names its file, line and key path")
    func unknownKey() throws {
        let yaml = minimalTenant.replacingOccurrences(
            of: "    push_type: alert", with: "    push_type: alert\n    prority: 5")
        let error = try parseError(yaml)
        #expect(error.file == "Tenants/example.yaml")
        #expect(error.line == 9)
        #expect(error.key == "notification_types.message.prority")
        #expect(error.description.hasPrefix("Tenants/example.yaml:9: notification_types.message.prority: unknown key"))
    }

    @Test("an unknown top-level key is an error too")
    func unknownTopLevelKey() throws {
        let error = try parseError(minimalTenant + "\nratelimits:\n  notifications_per_second: 5\n")
        #expect(error.line == 12)
        #expect(error.key == "ratelimits")
    }

    @Test("a bad push type names its line and key")
    func badPushType() throws {
        let error = try parseError(minimalTenant.replacingOccurrences(of: "push_type: alert", with: "push_type: alrt"))
        #expect(error.line == 8)
        #expect(error.key == "notification_types.message.push_type")
        #expect(
            error.description.hasPrefix(
                "Tenants/example.yaml:8: notification_types.message.push_type: unknown push type \"alrt\""))
    }

    @Test("a bad time 25:00 names its line and key")
    func badTime() throws {
        let error = try parseError(minimalTenant.replacingOccurrences(of: "\"22:00\"", with: "\"25:00\""))
        #expect(error.line == 10)
        #expect(error.key == "quiet_hours.start")
        #expect(error.message.contains("25:00"))
    }

    @Test(
        "other mistakes are caught",
        arguments: [
            ("token_policy: one_per_user_platform", "token_policy: one_per_user", "token_policy", 5),
            (
                "environments: [production]", "environments: [production, sandbox]",
                "bundle_ids.com.example.app.environments", 4
            ),
            ("push_type: alert", "push_type: background\n    priority: 10", "notification_types.message.priority", 9),
            (
                "push_type: alert", "push_type: alert\n    thread_id: \"a-{b\"", "notification_types.message.thread_id",
                9
            ),
            (
                "push_type: alert", "push_type: alert\n    opt_out_allowed: false\n    default_enabled: false",
                "notification_types.message.default_enabled", 10
            ),
            (
                "push_type: alert", "push_type: background\n    interruption_level: passive",
                "notification_types.message.interruption_level", 9
            ),
            ("push_type: alert", "push_type: alert\n    expiration: soon", "notification_types.message.expiration", 9),
            ("  end: \"07:00\"", "  end: \"07:00\"\n  types:\n    mesage: pass", "quiet_hours.types.mesage", 13),
            ("  end: \"07:00\"", "  end: \"07:00\"\n  time_zone: Mars/Base", "quiet_hours.time_zone", 12),
            // Foundation reads it as UTC+5; the IANA time zone database has no such name.
            ("  end: \"07:00\"", "  end: \"07:00\"\n  time_zone: GMT+5", "quiet_hours.time_zone", 12),
            ("token_policy:", "rate_limits:\n  fanout_weight: 0\ntoken_policy:", "rate_limits.fanout_weight", 6),
            ("token_policy:", "rate_limits:\n  fanout_weight: 101\ntoken_policy:", "rate_limits.fanout_weight", 6),
        ]
    )
    func otherMistakes(original: String, replacement: String, key: String, line: Int) throws {
        let yaml = minimalTenant.replacingOccurrences(of: original, with: replacement)
        #expect(yaml != minimalTenant)
        let error = try parseError(yaml)
        #expect(error.key == key, "\(error)")
        #expect(error.line == line, "\(error)")
    }

    @Test("quiet hours' time zone is a name of the IANA time zone database, canonical or a link")
    func quietHoursTimeZone() throws {
        for zone in ["Europe/Paris", "Etc/GMT+5", "EST5EDT", "Japan", "US/Eastern"] {
            let yaml = minimalTenant.replacingOccurrences(
                of: "  end: \"07:00\"", with: "  end: \"07:00\"\n  time_zone: \(zone)")
            let folder = try writeTenantFolder(["example.yaml": yaml])
            #expect(try TenantConfiguration.loadFolder(folder).first?.quietHours?.timeZone == zone)
        }
    }

    @Test("fanout_weight is read, 1 by default")
    func fanoutWeight() throws {
        let weighted = minimalTenant.replacingOccurrences(
            of: "token_policy:", with: "rate_limits:\n  fanout_weight: 3\ntoken_policy:")
        let folder = try writeTenantFolder(["example.yaml": weighted, "plain.yaml": minimalTenant])
        let tenants = try TenantConfiguration.loadFolder(folder)
        #expect(tenants.first { $0.id == "example" }?.rateLimits.fanoutWeight == 3)
        #expect(tenants.first { $0.id == "plain" }?.rateLimits.fanoutWeight == 1)
    }

    @Test("a missing required key names the mapping's line")
    func missingKey() throws {
        let error = try parseError(
            minimalTenant.replacingOccurrences(of: "token_policy: one_per_user_platform\n", with: ""))
        #expect(error.key == "token_policy")
        #expect(error.line == 1)
    }

    @Test("YAML syntax errors carry a line")
    func syntaxError() throws {
        let error = try parseError("display_name: [unclosed\nbundle_ids: {}\n")
        #expect(error.line != nil)
        #expect(error.key == nil)
    }

    @Test("loadFolder fails on one bad file and returns nothing")
    func badFolder() throws {
        let folder = try writeTenantFolder([
            "good.yaml": minimalTenant,
            "bad.yaml": minimalTenant.replacingOccurrences(of: "push_type: alert", with: "push_type: alrt"),
            "README.md": "# not a tenant",
        ])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect {
            try TenantConfiguration.loadFolder(folder)
        } throws: { error in
            guard let error = error as? TenantFileError else { return false }
            return error.file == folder + "/bad.yaml" && error.line == 8
                && error.key == "notification_types.message.push_type"
        }
    }

    @Test("loadFolder ignores README and refuses .yml files and empty folders")
    func folderRules() throws {
        let readmeOnly = try writeTenantFolder(["README.md": "# tenants"])
        defer { try? FileManager.default.removeItem(atPath: readmeOnly) }
        #expect(throws: TenantFileError.self) { try TenantConfiguration.loadFolder(readmeOnly) }

        let yml = try writeTenantFolder(["one.yaml": minimalTenant, "two.yml": minimalTenant])
        defer { try? FileManager.default.removeItem(atPath: yml) }
        #expect(throws: TenantFileError.self) { try TenantConfiguration.loadFolder(yml) }

        let good = try writeTenantFolder(["one.yaml": minimalTenant, "README.md": "# tenants"])
        defer { try? FileManager.default.removeItem(atPath: good) }
        #expect(try TenantConfiguration.loadFolder(good + "/").map(\.id) == ["one"])
    }
}

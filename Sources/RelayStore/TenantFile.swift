package import Foundation
import PushRelayProtocol
import Yams

/// A tenant file that cannot be used: which file, which line, which key, and why.
///
/// Its description reads like a compiler's:
/// `Tenants/circl.yaml:14: notification_types.message.push_type: unknown push type "alrt" (...)`.
package struct TenantFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file, as given to the loader (`Tenants/circl.yaml`).
    package var file: String
    /// The 1-based line, or `nil` when the problem is the file as a whole.
    package var line: Int?
    /// The dotted key path (`notification_types.message.push_type`), or `nil` for the whole file.
    package var key: String?
    /// What is wrong.
    package var message: String

    /// Creates an error.
    package init(file: String, line: Int?, key: String?, message: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    /// `FILE:LINE: KEY: MESSAGE`, leaving out what is unknown.
    package var description: String {
        var text = file
        if let line { text += ":\(line)" }
        if let key { text += ": \(key)" }
        return text + ": " + message
    }
}

extension TenantConfiguration {
    /// The JSON stored in `tenants.config`: sorted keys, so equal configurations give equal bytes.
    package func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Loads every `*.yaml` file in `folder` (not `README.md`), sorted by id.
    ///
    /// Fails on the first bad file, returning nothing: a folder is applied whole or not at all.
    /// A `.yml` file is an error too, so that a misnamed file is not silently skipped.
    package static func loadFolder(_ folder: String) throws(TenantFileError) -> [TenantConfiguration] {
        let trimmed = folder.count > 1 && folder.hasSuffix("/") ? String(folder.dropLast()) : folder
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: trimmed).sorted()
        } catch {
            throw TenantFileError(file: trimmed, line: nil, key: nil, message: "cannot read the folder")
        }
        var configurations: [TenantConfiguration] = []
        for name in names where !name.hasPrefix(".") {
            if name.hasSuffix(".yml") {
                throw TenantFileError(
                    file: trimmed + "/" + name, line: nil, key: nil,
                    message: "tenant files end in .yaml; rename it")
            }
            guard name.hasSuffix(".yaml") else { continue }
            configurations.append(try load(file: trimmed + "/" + name))
        }
        guard !configurations.isEmpty else {
            throw TenantFileError(file: trimmed, line: nil, key: nil, message: "no tenant files (*.yaml) in the folder")
        }
        return configurations
    }

    /// Loads one tenant file; the tenant's id is the file name without `.yaml`.
    package static func load(file: String) throws(TenantFileError) -> TenantConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw TenantFileError(file: file, line: nil, key: nil, message: "cannot read the file")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw TenantFileError(file: file, line: nil, key: nil, message: "not UTF-8 text")
        }
        var name = (file as NSString).lastPathComponent
        if name.hasSuffix(".yaml") { name.removeLast(5) }
        return try parse(yaml: text, id: name, file: file)
    }

    /// Parses and validates one tenant file's text.
    ///
    /// - Parameters:
    ///   - yaml: The file's contents.
    ///   - id: The tenant's id (lower-case letters, digits, `_` and `-`, starting with a letter or digit).
    ///   - file: The name used in errors.
    package static func parse(yaml: String, id: String, file: String) throws(TenantFileError) -> TenantConfiguration {
        try TenantFileParser(file: file).parse(yaml: yaml, id: id)
    }
}

/// Reads a composed YAML tree into a ``TenantConfiguration``, checking every key (its FCM keys in
/// `TenantFile+FCM.swift`).
struct TenantFileParser {
    let file: String

    func error(_ node: Node?, _ key: String?, _ message: String) -> TenantFileError {
        TenantFileError(file: file, line: node?.mark?.line, key: key, message: message)
    }

    func parse(yaml: String, id: String) throws(TenantFileError) -> TenantConfiguration {
        guard id.range(of: #"^[a-z0-9][a-z0-9_-]*$"#, options: .regularExpression) != nil else {
            throw TenantFileError(
                file: file, line: nil, key: nil,
                message: "the file name must be the tenant id: lower-case letters, digits, _ and -")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let yamlError as YamlError {
            throw syntaxError(yamlError)
        } catch {
            throw TenantFileError(file: file, line: nil, key: nil, message: "not valid YAML: \(error)")
        }
        guard let root else {
            throw TenantFileError(file: file, line: nil, key: nil, message: "the file is empty")
        }
        let top = try MappingReader(
            root, path: nil, parser: self,
            allowed: [
                "display_name", "bundle_ids", "token_policy", "subscription_topics", "notification_types",
                "rate_limits", "quiet_hours", "fcm",
            ])

        let displayName = try string(top.required("display_name"), top.path("display_name"))
        guard !displayName.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw error(top.value("display_name"), top.path("display_name"), "must not be empty")
        }

        let bundleNode = try top.required("bundle_ids")
        let bundles = try MappingReader(bundleNode, path: "bundle_ids", parser: self, allowed: nil)
        guard !bundles.entries.isEmpty else {
            throw error(bundleNode, "bundle_ids", "declare at least one bundle id")
        }
        var bundleIDs: [String: TenantConfiguration.BundleID] = [:]
        for entry in bundles.entries {
            let path = "bundle_ids.\(entry.key)"
            guard entry.key.range(of: #"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$"#, options: .regularExpression) != nil else {
                throw error(entry.keyNode, path, "not a bundle id (reverse DNS, e.g. com.example.app)")
            }
            let reader = try MappingReader(entry.value, path: path, parser: self, allowed: ["environments"])
            let environmentsNode = try reader.required("environments")
            let environments = try list(environmentsNode, reader.path("environments")) {
                (node, path) throws(TenantFileError) in
                try enumeration(node, path, TenantConfiguration.Environment.self, what: "environment")
            }
            guard !environments.isEmpty else {
                throw error(environmentsNode, reader.path("environments"), "list at least one environment")
            }
            if let duplicate = firstDuplicate(environments.map(\.rawValue)) {
                throw error(environmentsNode, reader.path("environments"), "\"\(duplicate)\" is listed twice")
            }
            bundleIDs[entry.key] = .init(environments: environments)
        }

        let tokenPolicy = try enumeration(
            top.required("token_policy"), "token_policy", TenantConfiguration.TokenPolicy.self, what: "token policy")

        var subscriptionTopics: [String] = []
        if let node = top.value("subscription_topics") {
            subscriptionTopics = try list(node, "subscription_topics") { (node, path) throws(TenantFileError) in
                try identifier(node, path)
            }
            if let duplicate = firstDuplicate(subscriptionTopics) {
                throw error(node, "subscription_topics", "\"\(duplicate)\" is listed twice")
            }
        }

        let fcm = try top.value("fcm").map { (node) throws(TenantFileError) in try fcmProject(node) }

        let typesNode = try top.required("notification_types")
        let types = try MappingReader(typesNode, path: "notification_types", parser: self, allowed: nil)
        guard !types.entries.isEmpty else {
            throw error(typesNode, "notification_types", "declare at least one notification type")
        }
        var notificationTypes: [String: TenantConfiguration.NotificationType] = [:]
        for entry in types.entries {
            let path = "notification_types.\(entry.key)"
            _ = try identifier(entry.keyNode, path, text: entry.key)
            notificationTypes[entry.key] = try notificationType(
                entry.value, path: path, bundleIDs: bundleIDs, subscriptionTopics: subscriptionTopics, fcm: fcm)
        }

        var rateLimits = TenantConfiguration.RateLimits()
        if let node = top.value("rate_limits") {
            rateLimits = try self.rateLimits(node, types: notificationTypes)
        }
        var quietHours: TenantConfiguration.QuietHours?
        if let node = top.value("quiet_hours") {
            quietHours = try self.quietHours(node, types: notificationTypes)
        }

        return TenantConfiguration(
            id: id, displayName: displayName, bundleIDs: bundleIDs, tokenPolicy: tokenPolicy,
            subscriptionTopics: subscriptionTopics, notificationTypes: notificationTypes, rateLimits: rateLimits,
            quietHours: quietHours, fcm: fcm)
    }

    func notificationType(
        _ node: Node, path: String, bundleIDs: [String: TenantConfiguration.BundleID], subscriptionTopics: [String],
        fcm: TenantConfiguration.FCMProject?
    ) throws(TenantFileError) -> TenantConfiguration.NotificationType {
        let reader = try MappingReader(
            node, path: path, parser: self,
            allowed: [
                "push_type", "priority", "expiration", "bundle_id", "thread_id", "category", "interruption_level",
                "opt_out_allowed", "default_enabled", "subscription", "retry_for", "fcm",
            ])
        let pushType = try enumeration(
            reader.required("push_type"), reader.path("push_type"), TenantConfiguration.PushType.self,
            what: "push type")

        var priority = pushType == .background ? 5 : 10
        if let priorityNode = reader.value("priority") {
            priority = try integer(priorityNode, reader.path("priority"))
            guard [10, 5, 1].contains(priority) else {
                throw error(priorityNode, reader.path("priority"), "priority must be 10, 5 or 1, not \(priority)")
            }
            if pushType == .background && priority != 5 {
                throw error(priorityNode, reader.path("priority"), "background pushes must have priority 5 (APNs)")
            }
        }

        var expiration: Int?
        if let expirationNode = reader.value("expiration") {
            if scalarText(expirationNode) == "none" {
                expiration = nil
            } else {
                let seconds = try integer(expirationNode, reader.path("expiration"), orWord: "none")
                guard seconds >= 0 else {
                    throw error(expirationNode, reader.path("expiration"), "must be 0 or more seconds, or none")
                }
                expiration = seconds
            }
        }

        var retryFor: Int?
        if let retryNode = reader.value("retry_for") {
            let seconds = try integer(retryNode, reader.path("retry_for"))
            guard (1...TenantConfiguration.NotificationType.maximumRetryFor).contains(seconds) else {
                throw error(retryNode, reader.path("retry_for"), "must be 1 to 2592000 seconds (30 days)")
            }
            retryFor = seconds
        }

        let bundleID: String
        if let bundleNode = reader.value("bundle_id") {
            bundleID = try string(bundleNode, reader.path("bundle_id"))
            guard bundleIDs[bundleID] != nil else {
                throw error(
                    bundleNode, reader.path("bundle_id"),
                    "\"\(bundleID)\" is not one of bundle_ids (\(bundleIDs.keys.sorted().joined(separator: ", ")))")
            }
        } else if bundleIDs.count == 1, let only = bundleIDs.keys.first {
            bundleID = only
        } else {
            throw error(node, reader.path("bundle_id"), "required when the tenant has more than one bundle id")
        }

        let threadID = try reader.value("thread_id").map { (node) throws(TenantFileError) in
            try template(node, reader.path("thread_id"))
        }
        let category = try reader.value("category").map { (node) throws(TenantFileError) in
            try template(node, reader.path("category"))
        }

        var interruptionLevel: TenantConfiguration.InterruptionLevel?
        if let levelNode = reader.value("interruption_level") {
            interruptionLevel = try enumeration(
                levelNode, reader.path("interruption_level"), TenantConfiguration.InterruptionLevel.self,
                what: "interruption level")
            guard pushType == .alert else {
                throw error(
                    levelNode, reader.path("interruption_level"), "only alert pushes have an interruption level")
            }
        }

        let optOutAllowed = try reader.value("opt_out_allowed").map { (node) throws(TenantFileError) in
            try boolean(node, reader.path("opt_out_allowed"))
        }
        let defaultEnabledNode = reader.value("default_enabled")
        let defaultEnabled = try defaultEnabledNode.map { (node) throws(TenantFileError) in
            try boolean(node, reader.path("default_enabled"))
        }
        if optOutAllowed == false && defaultEnabled == false {
            throw error(
                defaultEnabledNode, reader.path("default_enabled"),
                "a mandatory type (opt_out_allowed: false) cannot be off by default")
        }

        var subscription: String?
        if let subscriptionNode = reader.value("subscription") {
            let topic = try identifier(subscriptionNode, reader.path("subscription"))
            guard subscriptionTopics.contains(topic) else {
                throw error(
                    subscriptionNode, reader.path("subscription"), "\"\(topic)\" is not one of subscription_topics")
            }
            subscription = topic
        }

        let fcmMapping = try self.fcmMapping(
            reader.value("fcm"), path: reader.path("fcm"), pushType: pushType, project: fcm)

        return .init(
            pushType: pushType, priority: priority, expiration: expiration, bundleID: bundleID, threadID: threadID,
            category: category, interruptionLevel: interruptionLevel, optOutAllowed: optOutAllowed ?? true,
            defaultEnabled: defaultEnabled ?? true, subscription: subscription, retryFor: retryFor, fcm: fcmMapping)
    }

    func rateLimits(
        _ node: Node, types: [String: TenantConfiguration.NotificationType]
    ) throws(TenantFileError) -> TenantConfiguration.RateLimits {
        let reader = try MappingReader(
            node, path: "rate_limits", parser: self, allowed: ["notifications_per_second", "per_user", "fanout_weight"])
        var limits = TenantConfiguration.RateLimits()
        if let perSecond = reader.value("notifications_per_second") {
            limits.notificationsPerSecond = try positive(perSecond, reader.path("notifications_per_second"))
        }
        if let weight = reader.value("fanout_weight") {
            let path = reader.path("fanout_weight")
            limits.fanoutWeight = try positive(weight, path)
            guard limits.fanoutWeight <= TenantConfiguration.RateLimits.maximumFanoutWeight else {
                throw error(weight, path, "at most \(TenantConfiguration.RateLimits.maximumFanoutWeight)")
            }
        }
        if let perUserNode = reader.value("per_user") {
            let perUser = try MappingReader(perUserNode, path: reader.path("per_user"), parser: self, allowed: nil)
            for entry in perUser.entries {
                let path = perUser.path(entry.key)
                guard types[entry.key] != nil else {
                    throw error(entry.keyNode, path, "\"\(entry.key)\" is not one of notification_types")
                }
                let caps = try MappingReader(
                    entry.value, path: path, parser: self, allowed: ["max_per_hour", "max_per_day"])
                let hour = try caps.value("max_per_hour").map { (node) throws(TenantFileError) in
                    try positive(node, caps.path("max_per_hour"))
                }
                let day = try caps.value("max_per_day").map { (node) throws(TenantFileError) in
                    try positive(node, caps.path("max_per_day"))
                }
                guard hour != nil || day != nil else {
                    throw error(entry.value, path, "give max_per_hour, max_per_day or both")
                }
                limits.perUser[entry.key] = .init(maxPerHour: hour, maxPerDay: day)
            }
        }
        return limits
    }

    func quietHours(
        _ node: Node, types: [String: TenantConfiguration.NotificationType]
    ) throws(TenantFileError) -> TenantConfiguration.QuietHours {
        let reader = try MappingReader(
            node, path: "quiet_hours", parser: self, allowed: ["start", "end", "time_zone", "default", "types"])
        func time(_ key: String) throws(TenantFileError) -> TenantConfiguration.LocalTime {
            let node = try reader.required(key)
            let text = try string(node, reader.path(key))
            guard let time = TenantConfiguration.LocalTime(text) else {
                throw error(node, reader.path(key), "\"\(text)\" is not a time HH:MM between 00:00 and 23:59")
            }
            return time
        }
        let start = try time("start")
        let end = try time("end")
        guard start != end else {
            throw error(reader.value("end"), reader.path("end"), "end must differ from start")
        }
        var hours = TenantConfiguration.QuietHours(start: start, end: end)
        if let zoneNode = reader.value("time_zone") {
            let zone = try string(zoneNode, reader.path("time_zone"))
            // The rule of REGISTER_DEVICE's time_zone (Protocol/README.md, "Field rules").
            guard FieldRules.timeZoneNames.contains(zone) else {
                throw error(
                    zoneNode, reader.path("time_zone"),
                    "unknown time zone \"\(zone)\" (names of the IANA time zone database, e.g. Europe/Paris)")
            }
            hours.timeZone = zone
        }
        if let defaultNode = reader.value("default") {
            hours.defaultAction = try enumeration(
                defaultNode, reader.path("default"), TenantConfiguration.QuietHoursAction.self, what: "action")
        }
        if let typesNode = reader.value("types") {
            let actions = try MappingReader(typesNode, path: reader.path("types"), parser: self, allowed: nil)
            for entry in actions.entries {
                let path = actions.path(entry.key)
                guard types[entry.key] != nil else {
                    throw error(entry.keyNode, path, "\"\(entry.key)\" is not one of notification_types")
                }
                hours.actions[entry.key] = try enumeration(
                    entry.value, path, TenantConfiguration.QuietHoursAction.self, what: "action")
            }
        }
        return hours
    }

    // MARK: Scalars

    func scalarText(_ node: Node) -> String? {
        if case .scalar(let scalar) = node { return scalar.string }
        return nil
    }

    func string(_ node: Node, _ path: String) throws(TenantFileError) -> String {
        guard case .scalar(let scalar) = node else {
            throw error(node, path, "expected a string")
        }
        return scalar.string
    }

    func integer(_ node: Node, _ path: String, orWord word: String? = nil) throws(TenantFileError) -> Int {
        let text = try string(node, path)
        guard let value = Int(text) else {
            let alternative = word.map { " or \($0)" } ?? ""
            throw error(node, path, "expected a whole number\(alternative), not \"\(text)\"")
        }
        return value
    }

    func positive(_ node: Node, _ path: String) throws(TenantFileError) -> Int {
        let value = try integer(node, path)
        guard value > 0 else { throw error(node, path, "must be at least 1, not \(value)") }
        return value
    }

    func boolean(_ node: Node, _ path: String) throws(TenantFileError) -> Bool {
        switch try string(node, path) {
        case "true": return true
        case "false": return false
        case let text: throw error(node, path, "expected true or false, not \"\(text)\"")
        }
    }

    func identifier(_ node: Node, _ path: String, text: String? = nil) throws(TenantFileError) -> String {
        let value: String
        if let text {
            value = text
        } else {
            value = try string(node, path)
        }
        guard value.range(of: #"^[a-z][a-z0-9_]*$"#, options: .regularExpression) != nil else {
            throw error(node, path, "\"\(value)\" must be lower-case letters, digits and _, starting with a letter")
        }
        return value
    }

    func enumeration<Value: RawRepresentable & CaseIterable>(
        _ node: Node, _ path: String, _ type: Value.Type, what: String
    ) throws(TenantFileError) -> Value where Value.RawValue == String {
        let text = try string(node, path)
        guard let value = Value(rawValue: text) else {
            let allowed = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw error(node, path, "unknown \(what) \"\(text)\" (allowed: \(allowed))")
        }
        return value
    }

    /// Checks `{placeholder}` syntax: names of letters, digits and `_`; no stray braces.
    func template(_ node: Node, _ path: String) throws(TenantFileError) -> String {
        let text = try string(node, path)
        guard !text.isEmpty else { throw error(node, path, "must not be empty") }
        var inside: String?
        for character in text {
            switch (character, inside) {
            case ("{", nil):
                inside = ""
            case ("}", let name?):
                guard name.range(of: #"^[A-Za-z_][A-Za-z0-9_]*$"#, options: .regularExpression) != nil else {
                    throw error(node, path, "\"{\(name)}\" is not a placeholder name (letters, digits, _)")
                }
                inside = nil
            case ("{", _?), ("}", nil):
                throw error(node, path, "unbalanced \"\(character)\" in template \"\(text)\"")
            case (_, let name?):
                inside = name + String(character)
            case (_, nil):
                break
            }
        }
        guard inside == nil else { throw error(node, path, "unclosed \"{\" in template \"\(text)\"") }
        return text
    }

    func list<Element>(
        _ node: Node, _ path: String, _ element: (Node, String) throws(TenantFileError) -> Element
    ) throws(TenantFileError) -> [Element] {
        guard case .sequence(let sequence) = node else {
            throw error(node, path, "expected a list ([a, b] or one \"- item\" per line)")
        }
        var values: [Element] = []
        for item in sequence {
            values.append(try element(item, path))
        }
        return values
    }

    func firstDuplicate(_ values: [String]) -> String? {
        var seen = Set<String>()
        for value in values where !seen.insert(value).inserted {
            return value
        }
        return nil
    }

    func syntaxError(_ yamlError: YamlError) -> TenantFileError {
        let line: Int?
        let problem: String
        switch yamlError {
        case .scanner(_, let text, let mark, _), .parser(_, let text, let mark, _), .composer(_, let text, let mark, _):
            line = mark.line
            problem = text
        case .duplicatedKeysInMapping(let duplicates, let context):
            line = context.mark.line
            problem = "duplicate keys \(duplicates.joined(separator: ", "))"
        default:
            line = nil
            problem = "\(yamlError)"
        }
        return TenantFileError(file: file, line: line, key: nil, message: "not valid YAML: \(problem)")
    }
}

/// A mapping of a tenant file whose keys are checked (``YAMLMapping``), read by key path.
struct MappingReader {
    let prefix: String?
    let entries: [YAMLMapping.Entry]

    init(_ node: Node, path: String?, parser: TenantFileParser, allowed: [String]?) throws(TenantFileError) {
        func refusal(_ line: Int?, _ key: String?, _ message: String) -> TenantFileError {
            TenantFileError(file: parser.file, line: line, key: key, message: message)
        }
        func keyPath(_ key: String) -> String { path.map { "\($0).\(key)" } ?? key }
        do {
            entries = try YAMLMapping(node, allowedKeys: allowed).entries
        } catch {
            switch error {
            case .notMapping:
                throw parser.error(node, path, "expected a mapping (key: value lines)")
            case .keyNotString(_, let line):
                throw refusal(line, path, "keys must be plain strings")
            case .duplicateKey(let key, let line):
                throw refusal(line, keyPath(key), "duplicate key")
            case .unknownKey(let key, let line, let allowed):
                throw refusal(line, keyPath(key), "unknown key (allowed here: \(allowed.joined(separator: ", ")))")
            }
        }
        prefix = path
        self.mark = node.mark
        self.parser = parser
        self.node = node
    }

    let mark: Mark?
    let parser: TenantFileParser
    let node: Node

    func path(_ key: String) -> String {
        prefix.map { "\($0).\(key)" } ?? key
    }

    func value(_ key: String) -> Node? {
        entries.first { $0.key == key }?.value
    }

    func required(_ key: String) throws(TenantFileError) -> Node {
        guard let value = value(key) else {
            throw parser.error(node, path(key), "missing (required)")
        }
        return value
    }
}

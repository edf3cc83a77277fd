import Yams

/// A tenant file's FCM keys: the top-level `fcm` (the Firebase project) and each notification type's `fcm` (how the
/// type becomes an FCM message), checked as the file's other keys are.
extension TenantFileParser {
    /// The top-level `fcm`: the tenant's Firebase project.
    func fcmProject(_ node: Node) throws(TenantFileError) -> TenantConfiguration.FCMProject {
        let reader = try MappingReader(node, path: "fcm", parser: self, allowed: ["project_id"])
        let idNode = try reader.required("project_id")
        let id = try string(idNode, reader.path("project_id"))
        guard TenantConfiguration.FCMProject.isProjectID(id) else {
            throw error(
                idNode, reader.path("project_id"),
                "\"\(id)\" is not a Google project id (6 to 30 lower-case letters, digits and hyphens, starting with "
                    + "a letter, not ending with a hyphen)")
        }
        return .init(projectID: id)
    }

    /// A notification type's FCM mapping: its `fcm` block (`node`, at `path`) with the defaults of its push type;
    /// without a block, the defaults alone when the tenant has an FCM project and the push type has an FCM
    /// equivalent, else `nil` (the type does not reach FCM devices).
    func fcmMapping(
        _ node: Node?, path: String, pushType: TenantConfiguration.PushType,
        project: TenantConfiguration.FCMProject?
    ) throws(TenantFileError) -> TenantConfiguration.FCMMapping? {
        typealias Mapping = TenantConfiguration.FCMMapping
        guard let node else {
            guard project != nil, let message = Mapping.defaultMessage(for: pushType) else { return nil }
            return Mapping(message: message)
        }
        guard project != nil else {
            throw error(node, path, "the tenant has no FCM project: add a top-level fcm: with its project_id")
        }
        let reader = try MappingReader(
            node, path: path, parser: self,
            allowed: [
                "message", "data", "android_priority", "ttl", "collapse_key", "channel_id", "tag", "click_action",
                "apns",
            ])
        var mapping: Mapping
        if let messageNode = reader.value("message") {
            mapping = Mapping(
                message: try enumeration(
                    messageNode, reader.path("message"), Mapping.MessageKind.self, what: "FCM message kind"))
        } else if let message = Mapping.defaultMessage(for: pushType) {
            mapping = Mapping(message: message)
        } else {
            throw error(
                node, reader.path("message"),
                "required for a \(pushType.rawValue) type, which has no FCM equivalent: notification, data or both")
        }
        if let dataNode = reader.value("data") {
            mapping.data = try fcmData(dataNode, path: reader.path("data"))
            guard mapping.message.hasData else {
                throw error(dataNode, reader.path("data"), "a message: notification carries no data (use both)")
            }
        }
        if let priorityNode = reader.value("android_priority") {
            mapping.androidPriority = try enumeration(
                priorityNode, reader.path("android_priority"), Mapping.AndroidPriority.self, what: "Android priority")
        }
        if let ttlNode = reader.value("ttl") {
            let ttl = try integer(ttlNode, reader.path("ttl"))
            guard (0...Mapping.maximumTTL).contains(ttl) else {
                throw error(
                    ttlNode, reader.path("ttl"), "must be 0 to \(Mapping.maximumTTL) seconds (4 weeks, FCM's limit)")
            }
            mapping.ttl = ttl
        }
        mapping.collapseKey = try reader.value("collapse_key").map { (node) throws(TenantFileError) in
            try template(node, reader.path("collapse_key"))
        }
        for key in ["channel_id", "tag", "click_action"] {
            guard let optionNode = reader.value(key) else { continue }
            let value =
                key == "tag" ? try template(optionNode, reader.path(key)) : try string(optionNode, reader.path(key))
            guard !value.isEmpty else { throw error(optionNode, reader.path(key), "must not be empty") }
            guard mapping.message.hasNotification else {
                throw error(
                    optionNode, reader.path(key), "an Android notification option, and a message: data shows none")
            }
            switch key {
            case "channel_id": mapping.channelID = value
            case "tag": mapping.tag = value
            default: mapping.clickAction = value
            }
        }
        if let apnsNode = reader.value("apns") {
            mapping.apns = try boolean(apnsNode, reader.path("apns"))
        }
        return mapping
    }

    /// A type's `fcm.data`: keys FCM does not reserve, each to a template.
    private func fcmData(_ node: Node, path: String) throws(TenantFileError) -> [String: String] {
        let entries = try MappingReader(node, path: path, parser: self, allowed: nil)
        var data: [String: String] = [:]
        for entry in entries.entries {
            let keyPath = entries.path(entry.key)
            guard !entry.key.isEmpty else { throw error(entry.keyNode, path, "a data key must not be empty") }
            guard !TenantConfiguration.FCMMapping.isReservedDataKey(entry.key) else {
                throw error(
                    entry.keyNode, keyPath,
                    "\"\(entry.key)\" is reserved by FCM (from, message_type, google.*, gcm.notification.*)")
            }
            data[entry.key] = try template(entry.value, keyPath)
        }
        return data
    }
}

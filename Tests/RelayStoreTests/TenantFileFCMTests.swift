import Foundation
import RelayStore
import Testing

/// ``minimalTenant`` with Firebase project `example-app` (unless `project` is false) and its type `message` of
/// `pushType` with the `fcm` block `block` (lines indented under `fcm:`, each at six spaces), when given.
func fcmTenant(_ block: String? = nil, project: Bool = true, pushType: String = "alert") -> String {
    var yaml = minimalTenant.replacingOccurrences(of: "push_type: alert", with: "push_type: \(pushType)")
    if let block {
        let indented = block.split(separator: "\n").map { "      " + $0 }.joined(separator: "\n")
        yaml = yaml.replacingOccurrences(
            of: "    push_type: \(pushType)", with: "    push_type: \(pushType)\n    fcm:\n" + indented)
    }
    return project ? yaml + "\nfcm:\n  project_id: example-app\n" : yaml
}

/// The `message` type's FCM mapping of `yaml`.
func messageMapping(_ yaml: String) throws -> TenantConfiguration.FCMMapping? {
    try TenantConfiguration.parse(yaml: yaml, id: "example", file: "example.yaml").notificationTypes["message"]?.fcm
}

@Suite("Tenant files: FCM")
struct TenantFileFCMTests {
    @Test("dispo names its Firebase project and maps both types as its backend sends them")
    func dispo() throws {
        let dispo = try TenantConfiguration.load(file: tenantsFolder + "/dispo.yaml")
        #expect(dispo.fcm == .init(projectID: "dispo-app"))
        for (name, type) in [("event_created", "event_created"), ("event_comment", "event_comment")] {
            let mapping = try #require(dispo.notificationTypes[name]?.fcm)
            #expect(mapping.message == .both && mapping.androidPriority == .high && mapping.channelID == "events")
            #expect(mapping.data == ["type": type, "event_id": "{event_id}"])
            #expect(mapping.apns && mapping.ttl == nil && mapping.collapseKey == nil)
        }
        // The other tenants send nothing through FCM.
        for tenant in try TenantConfiguration.loadFolder(tenantsFolder) where tenant.id != "dispo" {
            #expect(tenant.fcm == nil && tenant.notificationTypes.values.allSatisfy { $0.fcm == nil }, "\(tenant.id)")
        }
    }

    @Test("without a block: alert types are sent as both, background ones as data, others not at all")
    func defaults() throws {
        #expect(try messageMapping(fcmTenant()) == .init(message: .both))
        #expect(try messageMapping(fcmTenant(pushType: "background")) == .init(message: .data))
        #expect(try messageMapping(fcmTenant(pushType: "voip")) == nil)
        #expect(try messageMapping(fcmTenant(project: false)) == nil)
        // A voip type reaches FCM devices when its block names the message.
        #expect(try messageMapping(fcmTenant("message: data", pushType: "voip")) == .init(message: .data))
    }

    @Test("every key of a type's fcm block is read")
    func everyKey() throws {
        let mapping = try messageMapping(
            fcmTenant(
                """
                message: both
                data: {type: chat, id: "{message_id}", n: 3}
                android_priority: normal
                ttl: 600
                collapse_key: "chat-{chat_id}"
                channel_id: messages
                tag: "chat-{chat_id}"
                click_action: OPEN_CHAT
                apns: true
                """))
        #expect(
            mapping
                == .init(
                    message: .both, data: ["type": "chat", "id": "{message_id}", "n": "3"], androidPriority: .normal,
                    ttl: 600, collapseKey: "chat-{chat_id}", channelID: "messages", tag: "chat-{chat_id}",
                    clickAction: "OPEN_CHAT", apns: true))
        #expect(try messageMapping(fcmTenant("ttl: 0\nmessage: data"))?.ttl == 0)
        #expect(try messageMapping(fcmTenant("ttl: 2419200"))?.ttl == 2_419_200)
    }

    @Test("project ids follow Google's rule", arguments: ["dispo-app", "abcdef", "a23456789012345678901234567890"])
    func projectIDs(id: String) throws {
        let yaml = fcmTenant().replacingOccurrences(of: "example-app", with: id)
        #expect(try TenantConfiguration.parse(yaml: yaml, id: "example", file: "example.yaml").fcm?.projectID == id)
    }

    @Test(
        "a project id that is not Google's is refused",
        arguments: ["Dispo-app", "abcde", "1abcdef", "abcdef-", "dispo_app", "a234567890123456789012345678901", "\"\""])
    func badProjectIDs(id: String) throws {
        let error = try parseError(fcmTenant().replacingOccurrences(of: "example-app", with: id))
        #expect(error.key == "fcm.project_id" && error.line == 13, "\(error)")
        #expect(error.message.contains("not a Google project id"), "\(error)")
    }

    @Test("the top-level fcm needs its project_id and no other key")
    func topLevelKeys() throws {
        let missing = try parseError(minimalTenant + "\nfcm:\n  project: example-app\n")
        #expect(missing.key == "fcm.project", "\(missing)")
        let empty = try parseError(minimalTenant + "\nfcm: {}\n")
        #expect(empty.key == "fcm.project_id" && empty.message.contains("missing"), "\(empty)")
    }

    @Test(
        "mistakes in a type's fcm block name the key",
        arguments: [
            ("message: both", false, "alert", "notification_types.message.fcm", "no FCM project"),
            ("priority: high", true, "alert", "notification_types.message.fcm.priority", "unknown key"),
            ("message: alert", true, "alert", "notification_types.message.fcm.message", "unknown FCM message kind"),
            ("channel_id: calls", true, "voip", "notification_types.message.fcm.message", "required for a voip type"),
            ("data: {from: x}", true, "alert", "notification_types.message.fcm.data.from", "reserved by FCM"),
            ("data: {message_type: x}", true, "alert", "notification_types.message.fcm.data.message_type", "reserved"),
            ("data: {google.x: y}", true, "alert", "notification_types.message.fcm.data.google.x", "reserved"),
            (
                "data: {gcm.notification.body: y}", true, "alert",
                "notification_types.message.fcm.data.gcm.notification.body", "reserved"
            ),
            ("data: {\"\": y}", true, "alert", "notification_types.message.fcm.data", "must not be empty"),
            ("data: {id: \"{a\"}", true, "alert", "notification_types.message.fcm.data.id", "unclosed"),
            ("data: [a, b]", true, "alert", "notification_types.message.fcm.data", "expected a mapping"),
            ("message: notification\ndata: {a: b}", true, "alert", "notification_types.message.fcm.data", "no data"),
            ("android_priority: urgent", true, "alert", "notification_types.message.fcm.android_priority", "unknown"),
            ("ttl: -1", true, "alert", "notification_types.message.fcm.ttl", "0 to 2419200"),
            ("ttl: 2419201", true, "alert", "notification_types.message.fcm.ttl", "0 to 2419200"),
            ("ttl: soon", true, "alert", "notification_types.message.fcm.ttl", "whole number"),
            ("collapse_key: \"a-{b\"", true, "alert", "notification_types.message.fcm.collapse_key", "unclosed"),
            ("message: data\nchannel_id: x", true, "alert", "notification_types.message.fcm.channel_id", "shows none"),
            ("tag: x", true, "background", "notification_types.message.fcm.tag", "shows none"),
            ("click_action: \"\"", true, "alert", "notification_types.message.fcm.click_action", "must not be empty"),
            ("apns: yes", true, "alert", "notification_types.message.fcm.apns", "true or false"),
        ]
    )
    func blockMistakes(block: String, project: Bool, pushType: String, key: String, says: String) throws {
        let error = try parseError(fcmTenant(block, project: project, pushType: pushType))
        #expect(error.key == key, "\(error)")
        #expect(error.message.contains(says), "\(error)")
        #expect(error.line != nil, "\(error)")
    }

    @Test("the stored JSON round-trips, and a tenant without FCM stores no fcm key (its sync is unchanged)")
    func storedJSON() throws {
        let configuration = try TenantConfiguration.parse(
            yaml: fcmTenant("data: {type: chat}\napns: true"), id: "example", file: "example.yaml")
        let data = try configuration.jsonData()
        #expect(try JSONDecoder().decode(TenantConfiguration.self, from: data) == configuration)
        #expect(String(decoding: data, as: UTF8.self).contains(#""fcm":{"project_id":"example-app"}"#))
        let plain = try TenantConfiguration.parse(yaml: minimalTenant, id: "example", file: "example.yaml")
        #expect(!String(decoding: try plain.jsonData(), as: UTF8.self).contains("fcm"))
    }
}

import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore
import Testing

@testable import RelayServer

/// The FCM rendering of a send, without a database: dispo's two types as its backend sends them, the mapping's
/// defaults and options, and what FCM would refuse, refused before sending.
@Suite struct FCMRenderingTests {
    /// A tenant with Firebase project `example-app` and the one type `ping` of `pushType` and `priority`, mapped by
    /// `fcm`.
    static func tenant(
        _ fcm: TenantConfiguration.FCMMapping, pushType: TenantConfiguration.PushType = .alert, priority: Int = 10,
        expiration: Int? = nil
    ) -> TenantConfiguration {
        let type = TenantConfiguration.NotificationType(
            pushType: pushType, priority: priority, expiration: expiration, bundleID: "com.example.app", fcm: fcm)
        return TenantConfiguration(
            id: "example", displayName: "Example", bundleIDs: ["com.example.app": .init(environments: [.production])],
            tokenPolicy: .onePerUserPlatform, notificationTypes: ["ping": type], fcm: .init(projectID: "example-app"))
    }

    /// A send of `type` to user `ada`, titled "Hello".
    static func send(_ type: String = "ping", body: String = "world") -> Pushrelay_V1_Send {
        var send = Pushrelay_V1_Send()
        send.notificationType = type
        send.userIds = ["ada"]
        send.alert.title = "Hello"
        send.alert.body = body
        return send
    }

    /// `send` rendered for FCM as `tenant`'s type says.
    static func render(_ send: Pushrelay_V1_Send, tenant: TenantConfiguration) throws(ProtocolError) -> FCMRendering {
        let plan = try SendPlan(send, tenant: tenant, services: PushServices([]))
        let type = tenant.notificationTypes[send.notificationType]!
        return try FCMRendering(send, plan: plan, type: type, fcm: type.fcm!)
    }

    /// The `message` object of `rendering`'s body to `token`.
    static func sent(
        _ rendering: FCMRendering, token: String = "cX9f:APA91b-Mixed_Case", expiration: Int64? = nil,
        now: Date = Date(timeIntervalSince1970: 1_800_000_000)
    ) throws -> [String: Any] {
        let body = rendering.body(to: token, expiration: expiration, now: now)
        let bytes = Data(body.joined.readableBytesView)
        let json = try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
        return try #require(json["message"] as? [String: Any])
    }

    /// The `ProtocolError` `operation` throws.
    static func refusal(_ operation: () throws(ProtocolError) -> FCMRendering) -> ProtocolError? {
        do {
            _ = try operation()
            return nil
        } catch {
            return error
        }
    }

    @Test func dispoEventCreatedIsTheSeedsMessageWithTheAPNsBlock() throws {
        let dispo = try TenantConfiguration.load(file: tenantsFolder + "/dispo.yaml")
        var send = Self.send("event_created", body: "Board games in Climbing crew")
        send.alert.title = "New Event"
        send.excludeUserIds = ["sam"]
        send.sound = "default"
        send.collapseID = "event-evt-17"
        send.templateValues = ["event_id": "evt-17"]
        send.customJson = #"{"type": "event_created", "event_id": "evt-17", "attendees": 3, "where": {"lat": 47.4}}"#
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let expiration: Int64 = 1_800_000_000 + 86_400
        let message = try Self.sent(try Self.render(send, tenant: dispo), expiration: expiration, now: now)

        #expect(message["token"] as? String == "cX9f:APA91b-Mixed_Case")
        let notification = try #require(message["notification"] as? [String: String])
        #expect(notification == ["title": "New Event", "body": "Board games in Climbing crew"])
        // The mapping's type and id, and custom_json's other values as strings (numbers and objects as JSON).
        #expect(
            message["data"] as? [String: String] == [
                "type": "event_created", "event_id": "evt-17", "attendees": "3", "where": #"{"lat":47.4}"#,
            ])
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["priority"] as? String == "HIGH" && android["ttl"] as? String == "86400s")
        #expect(android["collapse_key"] as? String == "event-evt-17")
        #expect(android["notification"] as? [String: String] == ["channel_id": "events"])
        let apns = try #require(message["apns"] as? [String: Any])
        #expect(
            apns["headers"] as? [String: String] == [
                "apns-push-type": "alert", "apns-priority": "10", "apns-expiration": "1800086400",
                "apns-collapse-id": "event-evt-17",
            ])
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["alert"] as? [String: String] == ["title": "New Event", "body": "Board games in Climbing crew"])
        #expect(aps["sound"] as? String == "default")
        // Only aps: the data carries the custom values.
        #expect((apns["payload"] as? [String: Any])?.keys.sorted() == ["aps"])
    }

    @Test func dispoEventCommentTakesTheMappingsTypeOverCustomJSON() throws {
        let dispo = try TenantConfiguration.load(file: tenantsFolder + "/dispo.yaml")
        var send = Self.send("event_comment", body: "Someone commented on Board games")
        send.alert.title = "New Comment"
        send.templateValues = ["event_id": "evt-17"]
        send.customJson = #"{"type": "comment", "event_id": "evt-99"}"#
        let message = try Self.sent(try Self.render(send, tenant: dispo))
        #expect(message["data"] as? [String: String] == ["type": "event_comment", "event_id": "evt-17"])
        #expect(message["notification"] as? [String: String] == ["title": "New Comment", "body": send.alert.body])
        // Without a request expiration: no TTL, no apns-expiration, no collapse key.
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["ttl"] == nil && android["collapse_key"] == nil)
        let headers = try #require((message["apns"] as? [String: Any])?["headers"] as? [String: String])
        #expect(headers == ["apns-push-type": "alert", "apns-priority": "10"])

        // dispo's data needs the event's id.
        send.templateValues = [:]
        let missing = Self.refusal { () throws(ProtocolError) in try Self.render(send, tenant: dispo) }
        #expect(missing?.field == "send.template_values.event_id" && missing?.code == .invalidArgument)
        #expect(missing?.message.contains("fcm.data.event_id") == true)
    }

    @Test func theMessageKindDecidesWhichPartsAreSent() throws {
        var send = Self.send()
        send.customJson = #"{"chat": "c1"}"#
        let data = try Self.sent(try Self.render(send, tenant: Self.tenant(.init(message: .data))))
        #expect(data["notification"] == nil && data["data"] as? [String: String] == ["chat": "c1"])
        let shown = try Self.sent(try Self.render(send, tenant: Self.tenant(.init(message: .notification))))
        #expect(
            shown["data"] == nil && shown["notification"] as? [String: String] == ["title": "Hello", "body": "world"])
        // Both, with nothing to show: the data alone.
        var silent = send
        silent.clearAlert()
        silent.alert.locKey = "NEW_MESSAGE"
        let dataOnly = try Self.sent(try Self.render(silent, tenant: Self.tenant(.init(message: .both))))
        #expect(dataOnly["notification"] == nil && dataOnly["data"] as? [String: String] == ["chat": "c1"])
        // Notification only, with nothing to show: refused, naming the alert (loc keys have no FCM equivalent).
        let refused = Self.refusal { () throws(ProtocolError) in
            try Self.render(silent, tenant: Self.tenant(.init(message: .notification)))
        }
        #expect(refused?.field == "send.alert" && refused?.message.contains("localization") == true)
    }

    @Test func androidOptionsFollowTheMappingOrTheSend() throws {
        // Priority: high for 10, normal otherwise, unless the mapping says.
        let background = Self.tenant(.init(message: .data), pushType: .background, priority: 5)
        var send = Self.send()
        var android = try Self.sent(try Self.render(send, tenant: background))["android"] as? [String: Any]
        #expect(android?["priority"] as? String == "NORMAL")
        send.priority = 10
        android =
            try Self.sent(try Self.render(send, tenant: Self.tenant(.init(message: .both), priority: 5)))[
                "android"] as? [String: Any]
        #expect(android?["priority"] as? String == "HIGH")
        let pinned = Self.tenant(
            .init(
                message: .both, androidPriority: .normal, ttl: 600, collapseKey: "chat-{chat}", channelID: "chat",
                tag: "chat-{chat}", clickAction: "OPEN_CHAT"))
        send.templateValues = ["chat": "c1"]
        send.collapseID = "ignored"
        android =
            try Self.sent(try Self.render(send, tenant: pinned), expiration: 1_800_000_010)["android"]
            as? [String: Any]
        #expect(android?["priority"] as? String == "NORMAL" && android?["ttl"] as? String == "600s")
        #expect(android?["collapse_key"] as? String == "chat-c1")
        #expect(
            android?["notification"] as? [String: String] == [
                "channel_id": "chat", "tag": "chat-c1", "click_action": "OPEN_CHAT",
            ])
        send.templateValues = [:]
        let missing = Self.refusal { () throws(ProtocolError) in try Self.render(send, tenant: pinned) }
        #expect(missing?.field == "send.template_values.chat")
    }

    @Test func theTTLIsTheTimeLeftOfEachRequest() throws {
        let rendering = try Self.render(Self.send(), tenant: Self.tenant(.init(message: .both), expiration: 3_600))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func ttl(_ expiration: Int64?) throws -> String? {
            (try Self.sent(rendering, expiration: expiration, now: now)["android"] as? [String: Any])?["ttl"]
                as? String
        }
        #expect(try ttl(1_800_000_100) == "100s")
        #expect(try ttl(0) == "0s")
        #expect(try ttl(1_799_999_000) == "0s")
        #expect(try ttl(1_800_000_000 + 10_000_000) == "2419200s")
        #expect(try ttl(nil) == nil)
    }

    @Test func whatFCMWouldRefuseIsRefusedNamingTheField() throws {
        let both = Self.tenant(.init(message: .both, apns: true))
        var send = Self.send()
        send.customJson = "[1, 2]"
        #expect(
            Self.refusal { () throws(ProtocolError) in try Self.render(send, tenant: both) }?.field
                == "send.custom_json")
        send.customJson = #"{"from": "me"}"#
        let reserved = Self.refusal { () throws(ProtocolError) in try Self.render(send, tenant: both) }
        #expect(reserved?.field == "send.custom_json" && reserved?.message.contains("reserved by FCM") == true)
        send.customJson = ""
        send.priority = 7
        #expect(
            Self.refusal { () throws(ProtocolError) in try Self.render(send, tenant: both) }?.field == "send.priority")

        // 4 KiB: the body fits alone, not with the apns payload that repeats it.
        let body = String(repeating: "x", count: 2_500)
        let alone = try Self.render(Self.send(body: body), tenant: Self.tenant(.init(message: .both)))
        #expect((try Self.sent(alone)["notification"] as? [String: String])?["body"] == body)
        let tooLarge = Self.refusal { () throws(ProtocolError) in try Self.render(Self.send(body: body), tenant: both) }
        #expect(tooLarge?.field == "send" && tooLarge?.code == .invalidArgument)
        #expect(tooLarge?.message.contains("more than 4096") == true)
    }
}

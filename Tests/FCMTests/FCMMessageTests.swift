import FCM
import Foundation
import Testing

@Suite struct FCMMessageTests {
    @Test func theBodyIsGooglesMessageWithTheTokenAndStringData() throws {
        let message = FCMMessage(
            notification: .init(title: "Grillabend", body: "Samstag 18:00"),
            data: ["type": "new_event", "event_id": "4711"],
            android: .init(priority: .high, ttlSeconds: 3_600, collapseKey: "event-4711", channelID: "events"))
        #expect(message.problem() == nil)
        let body = message.body(to: "cX9f:APA91b-Mixed_Case")
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        let sent = try #require(json["message"] as? [String: Any])
        #expect(sent["token"] as? String == "cX9f:APA91b-Mixed_Case")
        #expect(sent["data"] as? [String: String] == ["type": "new_event", "event_id": "4711"])
        let notification = try #require(sent["notification"] as? [String: Any])
        #expect(notification["title"] as? String == "Grillabend" && notification["body"] as? String == "Samstag 18:00")
        let android = try #require(sent["android"] as? [String: Any])
        #expect(android["priority"] as? String == "HIGH" && android["ttl"] as? String == "3600s")
        #expect(android["collapse_key"] as? String == "event-4711")
        #expect((android["notification"] as? [String: Any])?["channel_id"] as? String == "events")
        // A token with a quote is escaped, not spliced.
        let odd = try JSONSerialization.jsonObject(with: message.body(to: #"a"b"#)) as? [String: Any]
        #expect((odd?["message"] as? [String: Any])?["token"] as? String == #"a"b"#)
    }

    @Test func whatFCMRefusesIsSaidBeforeSending() {
        #expect(FCMMessage(data: ["from": "x"]).problem() == #"the data key "from" is reserved by FCM"#)
        #expect(FCMMessage(data: ["google.c.a": "x"]).problem() != nil)
        #expect(FCMMessage(android: .init(ttlSeconds: 2_419_201)).problem() != nil)
        #expect(FCMMessage(data: ["big": String(repeating: "x", count: 4_094)]).problem() != nil)
        #expect(FCMMessage(data: ["big": String(repeating: "x", count: 4_093)]).problem() == nil)
    }
}

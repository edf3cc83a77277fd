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

    @Test func theAPNsBlockCarriesItsHeadersAndThePayloadAsItIs() throws {
        let payload = Data(#"{"aps":{"alert":{"title":"Grillabend","body":"Samstag"},"thread-id":"e-4711"}}"#.utf8)
        let headers = ["apns-push-type": "alert", "apns-priority": "10", "apns-collapse-id": "event-4711"]
        let message = FCMMessage(
            notification: .init(title: "Grillabend", body: "Samstag"), data: ["type": "event_created"],
            apns: .init(headers: headers, payload: payload))
        #expect(message.problem() == nil)
        let json = try #require(try JSONSerialization.jsonObject(with: message.body(to: "t:1")) as? [String: Any])
        let sent = try #require(json["message"] as? [String: Any])
        #expect(sent["token"] as? String == "t:1" && sent["data"] as? [String: String] == ["type": "event_created"])
        let apns = try #require(sent["apns"] as? [String: Any])
        #expect(apns["headers"] as? [String: String] == headers)
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["thread-id"] as? String == "e-4711")
        #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Grillabend")
        // The payload's bytes are in the body unchanged; without headers there is no headers key.
        #expect(
            String(decoding: message.body(to: "t:1"), as: UTF8.self).contains(String(decoding: payload, as: UTF8.self)))
        let bare = FCMMessage(data: ["a": "b"], apns: .init(payload: Data(#"{"aps":{"content-available":1}}"#.utf8)))
        let bareJSON = try JSONSerialization.jsonObject(with: bare.body(to: "t")) as? [String: Any]
        let bareAPNs = try #require((bareJSON?["message"] as? [String: Any])?["apns"] as? [String: Any])
        #expect(bareAPNs["headers"] == nil && bareAPNs["payload"] is [String: Any])
    }

    @Test func theAPNsPayloadMustBeAnObjectAndCountsTowardsTheSizeLimit() {
        for text in ["[1]", "not json", "", #""aps""#] {
            #expect(
                FCMMessage(apns: .init(payload: Data(text.utf8))).problem() == "the apns payload is not a JSON object")
        }
        let payload = Data(#"{"aps":{}}"#.utf8)
        let fits = FCMMessage(
            data: ["big": String(repeating: "x", count: 4_093 - payload.count)], apns: .init(payload: payload))
        #expect(fits.problem() == nil)
        var over = fits
        over.data["big"]! += "x"
        #expect(over.problem() == "the FCM payload with its apns payload is 4097 bytes, more than 4096")
        // The same data alone fits: the apns payload is what tips it over.
        over.apns = nil
        #expect(over.problem() == nil)
    }

    @Test func whatFCMRefusesIsSaidBeforeSending() {
        #expect(FCMMessage(data: ["from": "x"]).problem() == #"the data key "from" is reserved by FCM"#)
        #expect(FCMMessage(data: ["google.c.a": "x"]).problem() != nil)
        #expect(FCMMessage.isReservedDataKey("gcm.notification.body") && !FCMMessage.isReservedDataKey("type"))
        #expect(FCMMessage(android: .init(ttlSeconds: 2_419_201)).problem() != nil)
        #expect(FCMMessage(data: ["big": String(repeating: "x", count: 4_094)]).problem() != nil)
        #expect(FCMMessage(data: ["big": String(repeating: "x", count: 4_093)]).problem() == nil)
    }
}

@Suite struct FCMBodyTemplateTests {
    @Test func aTemplatesBodyIsTheEncodersForEveryToken() throws {
        var message = FCMMessage(
            notification: .init(title: "New event", body: "Picnic \"at\" the lake"),
            data: ["type": "event_created", "event_id": "42"],
            android: .init(priority: .high, ttlSeconds: 3600, channelID: "events"))
        message.apns = FCMMessage.APNs(
            headers: ["apns-push-type": "alert"], payload: Data(#"{"aps":{"alert":"x"}}"#.utf8))
        let template = message.bodyTemplate()
        for token in ["cX9f:APA91bHun4Mx", #"odd"quote\back"#, "ünï:cödé", ""] {
            let filled = template.body(to: token).joined
            #expect(Data(filled.readableBytesView) == message.body(to: token), "\(token)")
            let decoded = try JSONSerialization.jsonObject(with: Data(filled.readableBytesView)) as? [String: Any]
            #expect((decoded?["message"] as? [String: Any])?["token"] as? String == token)
        }
    }
}

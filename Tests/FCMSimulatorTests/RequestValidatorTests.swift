import FCM
import Foundation
import Testing

@testable import FCMSimulator

/// A message body and how Google answers it: nil for a message FCM takes, otherwise the status, the FCM error code
/// and words the message must contain.
struct BodyCase: Sendable, CustomTestStringConvertible {
    var name: String
    var body: String
    var refusal: (status: Int, code: String, words: String)?

    var testDescription: String { name }

    /// A body of `message` (its inner JSON).
    static func message(_ name: String, _ message: String, refusal: (Int, String, String)? = nil) -> BodyCase {
        BodyCase(name: name, body: #"{"message":{\#(message)}}"#, refusal: refusal)
    }

    static let token = #""token":"fKx9:APA91bH-_x""#
    static let invalidToken = (400, "INVALID_ARGUMENT", "registration token")
    static func invalid(_ words: String) -> (Int, String, String) { (400, "INVALID_ARGUMENT", words) }

    static let all: [BodyCase] = [
        message("a token message", token + #","data":{"k":"v"},"notification":{"title":"T","body":"B"}"#),
        message("a topic message", #""topic":"news.sport-1~%""#),
        message("a condition of two topics", #""condition":"'a' in topics && 'b' in topics""#),
        message("lowerCamelCase names", token + #","android":{"collapseKey":"c","directBootOk":true}"#),
        message(
            "every Android option",
            token + #","android":{"priority":"HIGH","ttl":"3.5s","collapse_key":"c","#
                + #""restricted_package_name":"com.example","data":{"a":"b"},"notification":{"channel_id":"ch","#
                + ##""tag":"t","click_action":"OPEN","color":"#a0b1c2","notification_count":"3","##
                + #""vibrate_timings":["1s","0.5s"]}}"#),
        message(
            "APNs options",
            token + #","apns":{"headers":{"apns-priority":"10","apns-expiration":"0"},"#
                + #""payload":{"aps":{"alert":"hi"},"custom":1}}"#),
        BodyCase(name: "validate_only", body: #"{"message":{\#(token)},"validate_only":true}"#),
        BodyCase(name: "not JSON", body: #"{"message":"#, refusal: invalid("Invalid JSON payload")),
        BodyCase(name: "an array", body: "[]", refusal: invalid("not a JSON object")),
        BodyCase(name: "no message", body: "{}", refusal: invalid("no message")),
        BodyCase(name: "an unknown top-level name", body: #"{"messages":{}}"#, refusal: invalid("Unknown name")),
        BodyCase(
            name: "validate_only not a bool", body: #"{"message":{\#(token)},"validate_only":"yes"}"#,
            refusal: invalid("TYPE_BOOL")),
        message("no target", #""data":{"k":"v"}"#, refusal: invalid("Exactly one of token, topic or condition")),
        message("two targets", token + #","topic":"news""#, refusal: invalid("not 2")),
        message("an empty token", #""token":"""#, refusal: invalidToken),
        message("a token with a space", #""token":"abc def""#, refusal: invalidToken),
        message("a token that is a number", #""token":7"#, refusal: invalid("'message.token' (TYPE_STRING), 7")),
        message("a topic with its prefix", #""topic":"/topics/news""#, refusal: invalid("Invalid topic name")),
        message(
            "a condition of six topics",
            #""condition":"'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || "#
                + #"'f' in topics""#, refusal: invalid("6 topics")),
        message(
            "a number in data", token + #","data":{"a":"x","score":7}"#,
            refusal: invalid("Invalid value at 'message.data[1].value' (TYPE_STRING), 7")),
        message("a boolean in data", token + #","data":{"on":true}"#, refusal: invalid("(TYPE_STRING), true")),
        message("the reserved key from", token + #","data":{"from":"x"}"#, refusal: invalid("key: from")),
        message("a google. key", token + #","data":{"google.x":"y"}"#, refusal: invalid("key: google.x")),
        message(
            "a gcm.notification. key", token + #","data":{"gcm.notification.x":"y"}"#,
            refusal: invalid("key: gcm.notification.x")),
        message("a number as title", token + #","notification":{"title":1}"#, refusal: invalid("notification.title")),
        message(
            "an unknown notification field", token + #","notification":{"subtitle":"s"}"#, refusal: invalid("subtitle")),
        message(
            "an unknown message field", token + #","priority":"high""#, refusal: invalid("Unknown name \"priority\"")),
        message("priority high", token + #","android":{"priority":"high"}"#, refusal: invalid("TYPE_ENUM")),
        message("ttl without s", token + #","android":{"ttl":"3600"}"#, refusal: invalid("Duration")),
        message("ttl as a number", token + #","android":{"ttl":3600}"#, refusal: invalid("Duration")),
        message("ttl over four weeks", token + #","android":{"ttl":"2419201s"}"#, refusal: invalid("2419200s")),
        message("a negative ttl", token + #","android":{"ttl":"-1s"}"#, refusal: invalid("2419200s")),
        message(
            "a channel id that is a number", token + #","android":{"notification":{"channel_id":5}}"#,
            refusal: invalid("message.android.notification.channel_id")),
        message(
            "a color that is a name", token + #","android":{"notification":{"color":"red"}}"#,
            refusal: invalid("#rrggbb")),
        message(
            "a misspelt Android option", token + #","android":{"colapse_key":"c"}"#, refusal: invalid("colapse_key")),
        message(
            "APNs headers not strings", token + #","apns":{"headers":{"apns-priority":10}}"#,
            refusal: invalid("TYPE_STRING")),
        message(
            "APNs priority 7", token + #","apns":{"headers":{"apns-priority":"7"}}"#, refusal: invalid("apns-priority")),
        message("APNs aps a string", token + #","apns":{"payload":{"aps":"x"}}"#, refusal: invalid("aps")),
        message("APNs payload a string", token + #","apns":{"payload":"x"}"#, refusal: invalid("message.apns.payload")),
        message(
            "4,097 bytes of data", token + #","data":{"k":"\#(String(repeating: "x", count: 4_096))"}"#,
            refusal: invalid("4097 bytes")),
        message(
            "a topic message of 2,049 bytes",
            #""topic":"news","data":{"k":"\#(String(repeating: "x", count: 2_048))"}"#,
            refusal: invalid("2049 bytes")),
    ]
}

@Suite struct RequestValidatorTests {
    /// Each body gets Google's answer, and the relay reads a refused message as refused (a bad token as dead).
    @Test(arguments: BodyCase.all)
    func bodiesAreJudgedAsGoogleDocumentsThem(_ testCase: BodyCase) {
        var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
        let answer = FCMRequestValidator().validate(Array(testCase.body.utf8), into: &message)
        guard let refusal = testCase.refusal else {
            #expect(answer == nil, "\(answer.map { String(decoding: $0.body, as: UTF8.self) } ?? "")")
            return
        }
        #expect(answer?.status == refusal.status)
        #expect(answer?.errorCode == refusal.code)
        let text = answer.map { String(decoding: $0.body, as: UTF8.self) } ?? ""
        #expect(text.contains(refusal.words.replacingOccurrences(of: "\"", with: "\\\"")), "\(text)")
        let meaning = FCMAnswer(status: refusal.status, body: answer?.body ?? Data())
        if testCase.refusal?.words == BodyCase.invalidToken.2 {
            #expect(meaning == .tokenDead(errorCode: "INVALID_ARGUMENT"))
        } else {
            guard case .rejected(let code, _) = meaning else {
                Issue.record("read as \(meaning)")
                return
            }
            #expect(code == "INVALID_ARGUMENT")
        }
    }

    @Test func theMessageIsReadForTheTestsAndKeptAsReceived() {
        let inner =
            #"{ "token":"fKx9:APA91b", "data":{"a":"1","b":"two"}, "notification":{"title":"Hi","body":"There"},"#
            + #" "android":{"priority":"HIGH","ttl":"60s","collapseKey":"c","notification":{"channelId":"ch","#
            + #""tag":"t","click_action":"OPEN"}}, "apns":{"headers":{"apns-push-type":"alert"}} }"#
        let body = #"{"validateOnly":false, "message":\#(inner)}"#
        var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
        #expect(FCMRequestValidator().validate(Array(body.utf8), into: &message) == nil)
        #expect(String(decoding: message.messageJSON, as: UTF8.self) == inner)
        #expect(message.token == "fKx9:APA91b" && message.topic == nil && message.condition == nil)
        #expect(message.data == ["a": "1", "b": "two"])
        #expect(message.notification == .init(title: "Hi", body: "There", image: nil))
        #expect(
            message.android
                == .init(priority: "HIGH", ttl: "60s", collapseKey: "c", channelID: "ch", tag: "t", clickAction: "OPEN")
        )
        #expect(message.apnsHeaders == ["apns-push-type": "alert"])
        #expect(!message.validateOnly)
    }

    @Test func theRelaysOwnRenderingIsTaken() {
        let rendered = FCMMessage(
            notification: .init(title: "T", body: "B"), data: ["k": "v"],
            android: .init(
                priority: .high, ttlSeconds: 600, collapseKey: "c", channelID: "ch", tag: "t", clickAction: "A"))
        var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
        #expect(FCMRequestValidator().validate(Array(rendered.body(to: "fKx9:APA91b")), into: &message) == nil)
        #expect(message.android?.ttl == "600s" && message.data == ["k": "v"])
    }

    @Test func aBodyOfAKnownShapeIsReadAsAFullParseReadsIt() {
        let rendered = FCMMessage(
            notification: .init(title: "T", body: "B"), data: ["k": "v"],
            android: .init(priority: .high, ttlSeconds: 600, collapseKey: "c", channelID: "ch", tag: "t"))
        var shapes = ValidatedShapes()
        let validator = FCMRequestValidator()
        for token in ["fKx9:APA91b", "second-token_2", "fKx9:APA91b"] {
            let body = Array(rendered.body(to: token))
            var parsed = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
            var read = FCMSimulatorMessage(connectionID: 2, projectID: "q", clientEmail: "f", receivedAt: Date())
            #expect(validator.validate(body, into: &parsed) == nil)
            #expect(validator.validate(body, into: &read, shapes: &shapes) == nil)
            #expect(read.token == token && read.messageJSON == parsed.messageJSON)
            #expect(read.data == parsed.data && read.android == parsed.android)
            #expect(read.notification == parsed.notification && read.apnsHeaders == parsed.apnsHeaders)
            #expect(read.connectionID == 2 && read.projectID == "q" && read.clientEmail == "f")
        }
        // One shape for the three bodies: the second and third were read from it.
        #expect(shapes.count == 1)
    }

    @Test func onlyPlainTokensAtTheMessagesTokenAreSpliced() {
        let validator = FCMRequestValidator()
        var shapes = ValidatedShapes()
        // A `token` key inside the data comes first: its value is not the message's token, so the shape is not kept,
        // and a body with another data value is read in full.
        for value in ["one", "two"] {
            let body = Array(#"{"message":{"data":{"token":"\#(value)"},"token":"real-token"}}"#.utf8)
            var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
            #expect(validator.validate(body, into: &message, shapes: &shapes) == nil)
            #expect(message.token == "real-token" && message.data == ["token": value])
        }
        #expect(shapes.count == 0)
        // A token that is not a registration token is judged in full, after a good one of the same shape.
        for (token, accepted) in [("good-token", true), ("bad.token", false), ("", false)] {
            let body = Array(#"{"message":{"token":"\#(token)","data":{"a":"b"}}}"#.utf8)
            var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
            let answer = validator.validate(body, into: &message, shapes: &shapes)
            #expect((answer == nil) == accepted, "\(token)")
        }
        // A refused message is never kept: the same shape is refused again.
        for token in ["t1", "t2"] {
            let body = Array(#"{"message":{"token":"\#(token)","data":{"a":1}}}"#.utf8)
            var message = FCMSimulatorMessage(connectionID: 1, projectID: "p", clientEmail: "e", receivedAt: Date())
            #expect(validator.validate(body, into: &message, shapes: &shapes)?.status == 400)
        }
    }

    @Test func jsonEscapesAndNumbersAreRead() throws {
        let value = try RequestJSON.parse(Array(#" {"a":"\u00e9\ud83d\ude00\n","b":-1.5e3,"c":[true,null]} "#.utf8))
        #expect(
            value
                == .object([
                    JSONMember(key: "a", value: .string("é😀\n"), range: 6..<28),
                    JSONMember(key: "b", value: .number("-1.5e3"), range: 33..<39),
                    JSONMember(key: "c", value: .array([.bool(true), .null]), range: 44..<55),
                ]))
        for broken in [#"{"a":}"#, #"{"a":1,}"#, #"{"a":01}"#, #"{"a":"\ud83d"}"#, "[1] 2", #"{"a":tru}"#] {
            #expect(throws: JSONSyntaxError.self) { try RequestJSON.parse(Array(broken.utf8)) }
        }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONSyntaxError(code: .nestingTooDeep, offset: 64)) { try RequestJSON.parse(Array(deep.utf8)) }
    }
}

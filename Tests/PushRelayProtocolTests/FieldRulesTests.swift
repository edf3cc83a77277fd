import PushRelayProtocol
import Testing

/// Each rule of RequestValidation.swift at its boundary: the last value accepted and the first refused, with the
/// exact `field` the refusal names. Every message goes through `Frame.request` as the relay receives it: encoded,
/// decoded, then validated.
@Suite struct FieldRulesTests {
    /// The relay's clock in these tests: 2026-05-28T20:26:40Z.
    static let now: Int64 = 1_780_000_000_000
    static let day: Int64 = 86_400_000
    static let token64 = String(repeating: "0123456789abcdef", count: 4)

    static func hex(_ count: Int) -> String {
        String(String(repeating: "0123456789abcdef", count: count / 16 + 1).prefix(count))
    }

    static func ascii(_ count: Int, _ letter: Character = "a") -> String { String(repeating: letter, count: count) }

    static func verdict<M: FramedRequest>(
        _ message: M, limits: ProtocolLimits = ProtocolLimits(), now: Int64 = FieldRulesTests.now
    ) -> Verdict {
        message.verdict(limits: limits, nowMilliseconds: now)
    }

    /// `message` with `change` applied.
    static func with<M>(_ message: M, _ change: (inout M) -> Void) -> M {
        var copy = message
        change(&copy)
        return copy
    }

    // MARK: - Valid requests, each changed in one field below

    static let hello = with(Pushrelay_V1_Hello()) {
        $0.minVersion = 1
        $0.maxVersion = 1
        $0.tenant = "circl"
        $0.credential = "prk_" + hex(40)
        $0.clientName = "circl-django/4.2"
    }

    static let registerDevice = with(Pushrelay_V1_RegisterDevice()) {
        $0.userID = "user-1"
        $0.token = token64
        $0.platform = "ios"
        $0.environment = .production
        $0.deviceID = "iphone-15"
        $0.appVersion = "4.2.0"
        $0.locale = "de-CH"
        $0.timeZone = "Europe/Zurich"
        $0.topics = ["chat", "photos"]
    }

    static let send = with(Pushrelay_V1_Send()) {
        $0.notificationType = "chat_message"
        $0.userIds = ["user-1", "user-2"]
        $0.excludeUserIds = ["user-3"]
        $0.idempotencyKey = "message-42"
        $0.alert.title = "Anna"
        $0.alert.body = "Hi!\nHow are you?"
        $0.threadID = "circle-1"
        $0.templateValues = ["circle_id": "1"]
        $0.customJson = #"{"message_id": 42}"#
    }

    static let query = with(Pushrelay_V1_QueryDeliveries()) { $0.jobID = "0195b4ba-8d3a-7f13-8b0c-5a8f9b0e2c11" }

    static let setMute = with(Pushrelay_V1_SetMute()) {
        $0.userID = "user-1"
        $0.threadID = "circle-1"
    }

    static let setPresence = with(Pushrelay_V1_SetPresence()) {
        $0.userID = "user-1"
        $0.threadID = "circle-1"
        $0.seconds = 60
    }

    @Test func theValidRequestsAreAccepted() {
        #expect(Self.verdict(Self.hello) == .accepted)
        #expect(Self.verdict(Self.registerDevice) == .accepted)
        #expect(Self.verdict(Self.send) == .accepted)
        #expect(Self.verdict(Self.query) == .accepted)
        #expect(Self.verdict(Self.setMute) == .accepted)
        #expect(Self.verdict(Self.setPresence) == .accepted)
    }

    @Test func aBodyThatIsNotTheMessageIsInvalidBody() {
        // A truncated varint, a field of wire type 7, and a string field holding bytes that are not UTF-8.
        for body: [UInt8] in [[0x08], [0x0F], [0x1A, 0x02, 0xC3, 0x28]] {
            #expect(
                Verdict(of: Pushrelay_V1_Hello.self, body: body, limits: ProtocolLimits(), nowMilliseconds: Self.now)
                    == .refused(.invalidBody, field: ""), "\(body)")
        }
    }

    /// The verdict on `message`'s bytes followed by `extra`.
    static func verdict<M: FramedRequest>(_ message: M, followedBy extra: [UInt8]) -> Verdict {
        let bytes: [UInt8] = ((try? message.serializedBytes()) ?? []) + extra
        return Verdict(of: M.self, body: bytes, limits: ProtocolLimits(), nowMilliseconds: Self.now)
    }

    @Test func aDeclaredFieldSentWithAnotherWireTypeIsInvalidBody() {
        // set_mute.until_ms (4, int64) as bytes; send.notification_type (1, string) as a varint;
        // send.relevance_score (15, double) as a varint; send.alert (7, a message) as 4 fixed bytes.
        // The field is named.
        #expect(
            Self.verdict(Self.setMute, followedBy: [4 << 3 | 2, 1, 5])
                == .refused(.invalidBody, field: "set_mute.until_ms"))
        #expect(
            Self.verdict(Self.send, followedBy: [1 << 3 | 0, 1])
                == .refused(.invalidBody, field: "send.notification_type"))
        #expect(
            Self.verdict(Self.send, followedBy: [15 << 3 | 0, 1])
                == .refused(.invalidBody, field: "send.relevance_score"))
        #expect(
            Self.verdict(Self.send, followedBy: [7 << 3 | 5, 0, 0, 0, 0]) == .refused(.invalidBody, field: "send.alert")
        )
    }

    @Test func fieldsTheMessageDoesNotDeclareAreIgnored() {
        // Field 99 as a varint, as bytes, as 8 and as 4 fixed bytes.
        for extra: [UInt8] in [
            [0x98, 0x06, 0x01], [0x9A, 0x06, 0x02, 0x41, 0x42], [0x99, 0x06] + Array(repeating: 0xFF, count: 8),
            [0x9D, 0x06, 1, 2, 3, 4],
        ] {
            #expect(Self.verdict(Self.setMute, followedBy: extra) == .accepted, "\(extra)")
            #expect(Self.verdict(Self.send, followedBy: extra) == .accepted, "\(extra)")
        }
    }

    @Test func atMost64DistinctUndeclaredFieldNumbersAreIgnored() {
        // Field numbers 100... as varints (two-byte tags): 64 distinct ones pass, 65 are refused; one number
        // repeated 1,024 times is one number, and one more occurrence of an undeclared field is refused before
        // decoding.
        func fields(_ numbers: [Int]) -> [UInt8] {
            numbers.flatMap { number -> [UInt8] in
                let tag = number << 3
                return [UInt8(tag & 0x7F | 0x80), UInt8(tag >> 7), 0]
            }
        }
        #expect(Self.verdict(Self.setMute, followedBy: fields(Array(100..<164))) == .accepted)
        #expect(
            Self.verdict(Self.setMute, followedBy: fields(Array(100..<165))) == .refused(.invalidBody, field: ""))
        #expect(
            Self.verdict(Self.setMute, followedBy: fields(Array(repeating: 100, count: Frame.maximumUnknownFields)))
                == .accepted)
        #expect(
            Self.verdict(Self.setMute, followedBy: fields(Array(repeating: 100, count: Frame.maximumUnknownFields + 1)))
                == .refused(.invalidBody, field: ""))
    }

    @Test func aGroupIsInvalidBodyEvenOfAFieldTheMessageDoesNotDeclare() {
        // Proto3 has no groups. An empty group of field 99 (start 99 << 3 | 3, end 99 << 3 | 4), alone and in front
        // of a declared field of another wire type; and one of the declared field set_mute.until_ms.
        let group: [UInt8] = [0x9B, 0x06, 0x9C, 0x06]
        #expect(Self.verdict(Self.setMute, followedBy: group) == .refused(.invalidBody, field: ""))
        #expect(Self.verdict(Self.send, followedBy: group) == .refused(.invalidBody, field: ""))
        #expect(
            Self.verdict(Self.setMute, followedBy: group + [4 << 3 | 2, 1, 5]) == .refused(.invalidBody, field: ""))
        #expect(Self.verdict(Self.setMute, followedBy: [4 << 3 | 3, 4 << 3 | 4]) == .refused(.invalidBody, field: ""))
    }

    // MARK: - Ids: hello

    @Test func helloLeavesTenantAndCredentialToAuthentication() {
        // Authentication refuses every tenant and credential it does not know with AUTHENTICATION_FAILED.
        for value in ["", "\0", "a\nb", Self.ascii(201)] {
            #expect(Self.verdict(Self.with(Self.hello) { $0.tenant = value }) == .accepted, "\(value.debugDescription)")
            #expect(
                Self.verdict(Self.with(Self.hello) { $0.credential = value }) == .accepted, "\(value.debugDescription)")
        }
    }

    @Test func anIDIsAtMost200UTF8Bytes() {
        let listDevices = { (userID: String) in Self.with(Pushrelay_V1_ListDevices()) { $0.userID = userID } }
        #expect(Self.verdict(listDevices(Self.ascii(200))) == .accepted)
        #expect(Self.verdict(listDevices(Self.ascii(201))) == .invalid("list_devices.user_id"))
        // Bytes, not characters: 100 é are 200 bytes, 199 a and an é are 201.
        #expect(Self.verdict(listDevices(Self.ascii(100, "é"))) == .accepted)
        #expect(Self.verdict(listDevices(Self.ascii(199) + "é")) == .invalid("list_devices.user_id"))
        #expect(Self.verdict(listDevices(Self.ascii(66, "🙂") + "ab")) == .invalid("list_devices.user_id"))
    }

    @Test func helloClientNameIsOptionalAndHasNoControlCharacters() {
        for name in ["", "circl-django/4.2", "ünïcødé 🙂", "\u{A0}no-break", Self.ascii(200)] {
            #expect(
                Self.verdict(Self.with(Self.hello) { $0.clientName = name }) == .accepted, "\(name.debugDescription)")
        }
        // Control characters, line and paragraph separators, and bidirectional overrides and isolates.
        for name in [
            "django\nINFO forged", "\0", "\r", "\t", "\u{1B}[31mred", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}",
            "a\u{2028}b", "\u{2029}", "\u{202E}gpj.exe", "\u{202A}", "\u{2066}x\u{2069}",
        ] {
            #expect(
                Self.verdict(Self.with(Self.hello) { $0.clientName = name }) == .invalid("hello.client_name"),
                "\(name.debugDescription)")
        }
        #expect(
            Self.verdict(Self.with(Self.hello) { $0.clientName = Self.ascii(201) }) == .invalid("hello.client_name"))
    }

    @Test func pingTakesAnyNonce() {
        for nonce: UInt64 in [0, 1, .max] {
            #expect(Self.verdict(Self.with(Pushrelay_V1_Ping()) { $0.nonce = nonce }) == .accepted)
        }
    }

    @Test func goodbyeReasonIsAnOptionalID() {
        #expect(Self.verdict(Pushrelay_V1_Goodbye()) == .accepted)
        #expect(Self.verdict(Self.with(Pushrelay_V1_Goodbye()) { $0.reason = "deploy" }) == .accepted)
        #expect(Self.verdict(Self.with(Pushrelay_V1_Goodbye()) { $0.reason = "a\0" }) == .invalid("goodbye.reason"))
        #expect(
            Self.verdict(Self.with(Pushrelay_V1_Goodbye()) { $0.reason = Self.ascii(201) })
                == .invalid("goodbye.reason"))
    }

    // MARK: - register_device

    @Test func aDeviceTokenIsAnEvenNumberOf64To200HexDigits() {
        for count in [64, 66, 100, 198, 200] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.token = Self.hex(count) }) == .accepted, "\(count)")
        }
        for count in [0, 2, 62, 63, 65, 199, 201, 202, 400] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.token = Self.hex(count) })
                    == .invalid("register_device.token"), "\(count) digits")
        }
    }

    @Test func aDeviceTokenIsHexDigitsOnlyInEitherCase() {
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.token = Self.token64.uppercased() }) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.token = "ABCDEFabcdef" + Self.hex(52) }) == .accepted)
        for token in [
            "g" + Self.hex(63), Self.hex(63) + " ", "0x" + Self.hex(62), Self.hex(62) + "é", Self.hex(63) + "\0",
            Self.hex(62) + "０１", Self.hex(63) + "G", Self.hex(63) + "@", Self.hex(63) + "`",
        ] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.token = token }) == .invalid("register_device.token"),
                "\(token.debugDescription)")
        }
    }

    @Test func anotherProvidersTokenIsOpaqueTextAndNeedsNoEnvironment() {
        let fcm = Self.with(Self.registerDevice) {
            $0.provider = "fcm"
            $0.token = "cX9f-Qm2:APA91bHun4MxP5_Mixed"
            $0.environment = .unspecified
        }
        #expect(Self.verdict(fcm) == .accepted)
        #expect(Self.verdict(Self.with(fcm) { $0.token = Self.ascii(4_096) }) == .accepted)
        for token in ["", Self.ascii(4_097), "two words", "tab\there", "zero\u{200B}width", "nul\0"] {
            #expect(
                Self.verdict(Self.with(fcm) { $0.token = token }) == .invalid("register_device.token"),
                "\(token.prefix(20).debugDescription)")
        }
        // APNs (the default) keeps its environment and its hex rule.
        #expect(
            Self.verdict(Self.with(fcm) { $0.provider = "" }) == .invalid("register_device.token"))
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.environment = .unspecified })
                == .invalid("register_device.environment"))
        for provider in ["FCM", "f cm", Self.ascii(33), "fcm!"] {
            #expect(
                Self.verdict(Self.with(fcm) { $0.provider = provider }) == .invalid("register_device.provider"),
                "\(provider)")
        }
    }

    @Test func registerDeviceNeedsAUserID() {
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.userID = "" }) == .invalid("register_device.user_id"))
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.userID = "user\0" }) == .invalid("register_device.user_id")
        )
    }

    @Test func aPlatformIsOneTo32Bytes() {
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.platform = Self.ascii(32) }) == .accepted)
        for platform in ["", Self.ascii(33), "ios\n"] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.platform = platform })
                    == .invalid("register_device.platform"), "\(platform.debugDescription)")
        }
    }

    @Test func theEnvironmentIsProductionOrSandbox() {
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.environment = .sandbox }) == .accepted)
        for environment: Pushrelay_V1_Environment in [.unspecified, .UNRECOGNIZED(3), .UNRECOGNIZED(-1)] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.environment = environment })
                    == .invalid("register_device.environment"), "\(environment)")
        }
    }

    @Test func deviceIDAppVersionAndLocaleAreOptionalIDsOfTheirLength() {
        #expect(
            Self.verdict(
                Self.with(Self.registerDevice) {
                    $0.deviceID = ""
                    $0.appVersion = ""
                    $0.locale = ""
                }) == .accepted)
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.deviceID = Self.ascii(200) }) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.deviceID = Self.ascii(201) })
                == .invalid("register_device.device_id"))
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.appVersion = Self.ascii(64) }) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.appVersion = Self.ascii(65) })
                == .invalid("register_device.app_version"))
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.locale = Self.ascii(64) }) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.registerDevice) { $0.locale = "de\u{1B}" })
                == .invalid("register_device.locale"))
    }

    @Test func aTimeZoneIsANameOfTheIANADatabase() {
        // TimeRulesTests holds the database's names against what else Foundation reads as a time zone.
        for zone in [
            "", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Asia/Kolkata", "UTC", "GMT", "EST", "Japan",
        ] {
            #expect(Self.verdict(Self.with(Self.registerDevice) { $0.timeZone = zone }) == .accepted, "\(zone)")
        }
        for zone in [
            "Mars/Olympus", "GMT+5", "Berlin", "Europe/Berlin\n", "Europe/Berlin\0", "/", "Europe/" + Self.ascii(58),
        ] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.timeZone = zone })
                    == .invalid("register_device.time_zone"), "\(zone.debugDescription)")
        }
    }

    @Test func aDeviceHasAtMost256TopicsEachAnID() {
        let topics = (0..<256).map { "topic-\($0)" }
        #expect(Self.verdict(Self.with(Self.registerDevice) { $0.topics = topics }) == .accepted)
        for list in [topics + ["one-more"], ["chat", ""], ["chat\n"], [Self.ascii(201)]] {
            #expect(
                Self.verdict(Self.with(Self.registerDevice) { $0.topics = list }) == .invalid("register_device.topics"),
                "\(list.count) topics")
        }
    }

    // MARK: - unregister_device, list_devices, user ids, job ids

    @Test func unregisterDeviceByTokenChecksTheTokenAndTheOptionalRest() {
        let byToken = Self.with(Pushrelay_V1_UnregisterDevice()) { $0.token = Self.token64 }
        #expect(Self.verdict(byToken) == .accepted)
        #expect(
            Self.verdict(
                Self.with(byToken) {
                    $0.userID = "user-1"
                    $0.platform = "ios"
                }) == .accepted)
        // A token of any provider: FCM's are text with colons; spaces and controls are no token.
        #expect(Self.verdict(Self.with(byToken) { $0.token = "fcm:APA91b-Mixed_Case" }) == .accepted)
        #expect(Self.verdict(Self.with(byToken) { $0.token = "two words" }) == .invalid("unregister_device.token"))
        #expect(
            Self.verdict(Self.with(byToken) { $0.token = Self.ascii(4_097) }) == .invalid("unregister_device.token"))
        #expect(Self.verdict(Self.with(byToken) { $0.userID = "u\n" }) == .invalid("unregister_device.user_id"))
        #expect(
            Self.verdict(Self.with(byToken) { $0.platform = Self.ascii(33) }) == .invalid("unregister_device.platform"))
    }

    @Test func unregisterDeviceWithoutATokenNeedsAUserAndAPlatform() {
        let byUser = Self.with(Pushrelay_V1_UnregisterDevice()) {
            $0.userID = "user-1"
            $0.platform = "ios"
        }
        #expect(Self.verdict(byUser) == .accepted)
        #expect(Self.verdict(Self.with(byUser) { $0.platform = "" }) == .invalid("unregister_device.platform"))
        #expect(Self.verdict(Self.with(byUser) { $0.userID = "" }) == .invalid("unregister_device.user_id"))
        #expect(Self.verdict(Pushrelay_V1_UnregisterDevice()) == .invalid("unregister_device.user_id"))
    }

    @Test func readsOfAUserNeedAUserID() {
        for (userID, ok) in [("user-1", true), ("", false), ("user-1\0", false), (Self.ascii(201), false)] {
            let expect: (String) -> Verdict = { ok ? .accepted : .invalid($0) }
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_ListDevices()) { $0.userID = userID })
                    == expect("list_devices.user_id"))
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_GetPreferences()) { $0.userID = userID })
                    == expect("get_preferences.user_id"))
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_ListMutes()) { $0.userID = userID }) == expect("list_mutes.user_id")
            )
        }
    }

    @Test func jobStatusAndCancelJobNeedAJobID() {
        for (jobID, ok) in [("0195b4ba-8d3a-7f13-8b0c-5a8f9b0e2c11", true), ("", false), ("job\n", false)] {
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_JobStatus()) { $0.jobID = jobID })
                    == (ok ? .accepted : .invalid("job_status.job_id")))
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_CancelJob()) { $0.jobID = jobID })
                    == (ok ? .accepted : .invalid("cancel_job.job_id")))
        }
    }

    // MARK: - send

    @Test func sendNeedsANotificationType() {
        #expect(Self.verdict(Self.with(Self.send) { $0.notificationType = "" }) == .invalid("send.notification_type"))
        #expect(
            Self.verdict(Self.with(Self.send) { $0.notificationType = "chat\u{7F}" })
                == .invalid("send.notification_type"))
    }

    @Test func sendNamesExactlyOneAudience() {
        let none = Self.with(Self.send) { $0.userIds = [] }
        #expect(Self.verdict(none) == .invalid("send"))
        #expect(Self.verdict(Self.with(none) { $0.topic = "news" }) == .accepted)
        #expect(Self.verdict(Self.with(none) { $0.tokens = [Self.target(Self.token64)] }) == .accepted)
        #expect(Self.verdict(Self.with(Self.send) { $0.topic = "news" }) == .invalid("send"))
        #expect(Self.verdict(Self.with(Self.send) { $0.tokens = [Self.target(Self.token64)] }) == .invalid("send"))
    }

    static func target(_ token: String) -> Pushrelay_V1_TokenTarget {
        with(Pushrelay_V1_TokenTarget()) { $0.token = token }
    }

    @Test func sendNamesAtMostMaxRecipientsUsersOrTokens() {
        let limits = ProtocolLimits(maxRecipients: 3)
        let users = Self.with(Self.send) { $0.userIds = ["a", "b", "c"] }
        #expect(Self.verdict(users, limits: limits) == .accepted)
        #expect(
            Self.verdict(Self.with(users) { $0.userIds.append("d") }, limits: limits)
                == .refused(.tooManyRecipients, field: "send.user_ids"))
        let tokens = Self.with(Self.send) {
            $0.userIds = []
            $0.tokens = (0..<3).map { _ in Self.target(Self.token64) }
        }
        #expect(Self.verdict(tokens, limits: limits) == .accepted)
        #expect(
            Self.verdict(Self.with(tokens) { $0.tokens.append(Self.target(Self.token64)) }, limits: limits)
                == .refused(.tooManyRecipients, field: "send.tokens"))
    }

    @Test func sendExcludesAtMostMaxRecipientsUsers() {
        let limits = ProtocolLimits(maxRecipients: 3)
        #expect(
            Self.verdict(Self.with(Self.send) { $0.excludeUserIds = ["a", "b", "c"] }, limits: limits) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.send) { $0.excludeUserIds = ["a", "b", "c", "d"] }, limits: limits)
                == .refused(.tooManyRecipients, field: "send.exclude_user_ids"))
        let many = (0...10_000).map { "user-\($0)" }
        #expect(
            Self.verdict(Self.with(Self.send) { $0.excludeUserIds = many })
                == .refused(.tooManyRecipients, field: "send.exclude_user_ids"))
    }

    @Test func sendUserIDsTokensAndExclusionsAreEachChecked() {
        #expect(Self.verdict(Self.with(Self.send) { $0.userIds = ["user-1", "user\0"] }) == .invalid("send.user_ids"))
        #expect(Self.verdict(Self.with(Self.send) { $0.userIds = ["user-1", ""] }) == .invalid("send.user_ids"))
        #expect(
            Self.verdict(Self.with(Self.send) { $0.userIds = [Self.ascii(201)] }) == .invalid("send.user_ids"))
        #expect(
            Self.verdict(
                Self.with(Self.send) {
                    $0.userIds = []
                    $0.tokens = [Self.target(Self.token64), Self.target("tab\there")]
                }) == .invalid("send.tokens"))
        #expect(
            Self.verdict(Self.with(Self.send) { $0.excludeUserIds = ["user\n3"] }) == .invalid("send.exclude_user_ids"))
        #expect(Self.verdict(Self.with(Self.send) { $0.excludeUserIds = [""] }) == .invalid("send.exclude_user_ids"))
    }

    @Test func sendTopicAndShortStringsAreOptionalIDs() {
        let topic = Self.with(Self.send) {
            $0.userIds = []
            $0.topic = "news\u{1B}"
        }
        #expect(Self.verdict(topic) == .invalid("send.topic"))
        let fields: [(String, WritableKeyPath<Pushrelay_V1_Send, String>)] = [
            ("idempotency_key", \.idempotencyKey), ("sound", \.sound), ("thread_id", \.threadID),
            ("category", \.category), ("interruption_level", \.interruptionLevel), ("scope", \.scope),
        ]
        for (name, path) in fields {
            #expect(Self.verdict(Self.with(Self.send) { $0[keyPath: path] = "" }) == .accepted, "\(name)")
            #expect(Self.verdict(Self.with(Self.send) { $0[keyPath: path] = Self.ascii(200) }) == .accepted, "\(name)")
            #expect(
                Self.verdict(Self.with(Self.send) { $0[keyPath: path] = Self.ascii(201) }) == .invalid("send.\(name)"))
            #expect(Self.verdict(Self.with(Self.send) { $0[keyPath: path] = "a\nb" }) == .invalid("send.\(name)"))
        }
    }

    @Test func alertTextMayHoldAnythingButNUL() {
        let texts: [(String, WritableKeyPath<Pushrelay_V1_Alert, String>)] = [
            ("title", \.title), ("subtitle", \.subtitle), ("body", \.body), ("launch_image", \.launchImage),
            ("title_loc_key", \.titleLocKey), ("subtitle_loc_key", \.subtitleLocKey), ("loc_key", \.locKey),
        ]
        for (name, path) in texts {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.alert[keyPath: path] = "line\nbreak\t\u{1B}[1m\u{7F}" })
                    == .accepted, "\(name)")
            #expect(
                Self.verdict(Self.with(Self.send) { $0.alert[keyPath: path] = "a\0b" })
                    == .invalid("send.alert.\(name)"))
        }
        let lists: [(String, WritableKeyPath<Pushrelay_V1_Alert, [String]>)] = [
            ("title_loc_args", \.titleLocArgs), ("subtitle_loc_args", \.subtitleLocArgs), ("loc_args", \.locArgs),
        ]
        for (name, path) in lists {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.alert[keyPath: path] = ["", "\n"] }) == .accepted, "\(name)")
            #expect(
                Self.verdict(Self.with(Self.send) { $0.alert[keyPath: path] = ["ok", "\0"] })
                    == .invalid("send.alert.\(name)"))
        }
    }

    @Test func relevanceScoreIsAFiniteNumberFromZeroToOne() {
        for score in [0, 0.5, 1, -0.0] {
            #expect(Self.verdict(Self.with(Self.send) { $0.relevanceScore = score }) == .accepted, "\(score)")
        }
        for score in [Double.nan, .infinity, -.infinity, -1, -0.000_001, 1.000_000_1, 2, .greatestFiniteMagnitude] {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.relevanceScore = score }) == .invalid("send.relevance_score"),
                "\(score)")
        }
    }

    @Test func customJSONMayHoldAnythingButNUL() {
        #expect(Self.verdict(Self.with(Self.send) { $0.customJson = "{\n\"a\": \"\u{1B}\"\n}" }) == .accepted)
        #expect(
            Self.verdict(Self.with(Self.send) { $0.customJson = "{\"a\": \"\0\"}" }) == .invalid("send.custom_json"))
    }

    @Test func templateValuesHaveIDNamesAndOptionalIDValues() {
        // The values fill the thread-id and category templates, so they are held to the rule of those ids.
        for values in [["circle_id": ""], ["circle_id": "1"], [Self.ascii(200): Self.ascii(200)], [:]] {
            #expect(Self.verdict(Self.with(Self.send) { $0.templateValues = values }) == .accepted, "\(values)")
        }
        for values in [
            ["": "1"], ["circle\nid": "1"], [Self.ascii(201): "1"], ["circle_id": "1\0"], ["circle_id": "line\nbreak"],
            ["circle_id": Self.ascii(201)], ["circle_id": "\u{1B}[31m"],
        ] {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.templateValues = values }) == .invalid("send.template_values"),
                "\(values)")
        }
    }

    @Test func collapseIDIsAtMost64Bytes() {
        #expect(Self.verdict(Self.with(Self.send) { $0.collapseID = Self.ascii(64) }) == .accepted)
        #expect(Self.verdict(Self.with(Self.send) { $0.collapseID = Self.ascii(65) }) == .invalid("send.collapse_id"))
        #expect(Self.verdict(Self.with(Self.send) { $0.collapseID = "a\0" }) == .invalid("send.collapse_id"))
    }

    @Test func expirationIsUnixSecondsUpToTheYear9999() {
        for expiration in [0, 1, FieldRules.latestExpirationSeconds] {
            #expect(Self.verdict(Self.with(Self.send) { $0.expiration = expiration }) == .accepted, "\(expiration)")
        }
        for expiration in [-1, FieldRules.latestExpirationSeconds + 1, .max, .min] {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.expiration = expiration }) == .invalid("send.expiration"),
                "\(expiration)")
        }
    }

    @Test func priorityIsTenFiveOrOne() {
        for priority: UInt32 in [1, 5, 10] {
            #expect(Self.verdict(Self.with(Self.send) { $0.priority = priority }) == .accepted, "\(priority)")
        }
        for priority: UInt32 in [0, 2, 4, 6, 9, 11, .max] {
            #expect(
                Self.verdict(Self.with(Self.send) { $0.priority = priority }) == .invalid("send.priority"),
                "\(priority)")
        }
    }

    @Test func sendAtMsIsFrom2000ToAYearAndADayAhead() {
        let horizon = Self.now + FieldRules.scheduleHorizonMilliseconds
        for time in [0, FieldRules.earliestSendAtMilliseconds, Self.now - Self.day, Self.now + 365 * Self.day, horizon]
        {
            #expect(Self.verdict(Self.with(Self.send) { $0.sendAtMs = time }) == .accepted, "\(time)")
        }
        for time in [
            FieldRules.earliestSendAtMilliseconds - 1, horizon + 1, -1, .max, .min, FieldRules.latestMilliseconds,
        ] {
            #expect(Self.verdict(Self.with(Self.send) { $0.sendAtMs = time }) == .invalid("send.send_at_ms"), "\(time)")
        }
    }

    @Test func theScheduleHorizonCountsFromAClockCappedAtTheYear9999() {
        // A clock past the calendar's end (or at Int64.max) neither overflows nor widens the horizon.
        let latest = FieldRules.latestMilliseconds + FieldRules.scheduleHorizonMilliseconds
        for now in [FieldRules.latestMilliseconds, FieldRules.latestMilliseconds + 1, .max] {
            #expect(Self.verdict(Self.with(Self.send) { $0.sendAtMs = latest }, now: now) == .accepted, "now \(now)")
            #expect(
                Self.verdict(Self.with(Self.send) { $0.sendAtMs = latest + 1 }, now: now)
                    == .invalid("send.send_at_ms"),
                "now \(now)")
        }
    }

    @Test func theFirstFieldAtFaultIsNamed() {
        let twoFaults = Self.with(Self.send) {
            $0.notificationType = ""
            $0.userIds = ["\0"]
        }
        #expect(Self.verdict(twoFaults) == .invalid("send.notification_type"))
    }

    // MARK: - query_deliveries

    @Test func queryDeliveriesGivesExactlyOneFilter() {
        #expect(Self.verdict(Pushrelay_V1_QueryDeliveries()) == .invalid("query_deliveries"))
        #expect(Self.verdict(Self.with(Pushrelay_V1_QueryDeliveries()) { $0.userID = "user-1" }) == .accepted)
        #expect(Self.verdict(Self.with(Pushrelay_V1_QueryDeliveries()) { $0.token = Self.token64 }) == .accepted)
        #expect(Self.verdict(Self.with(Self.query) { $0.userID = "user-1" }) == .invalid("query_deliveries"))
        #expect(Self.verdict(Self.with(Self.query) { $0.toMs = 1 }) == .invalid("query_deliveries"))
    }

    @Test func queryDeliveriesTimesAreFromZeroOnAndFromBeforeTo() {
        let all = Self.with(Pushrelay_V1_QueryDeliveries()) { $0.toMs = .max }
        #expect(Self.verdict(all) == .accepted)
        #expect(Self.verdict(Self.with(all) { $0.fromMs = .max - 1 }) == .accepted)
        #expect(Self.verdict(Self.with(all) { $0.toMs = 1 }) == .accepted)
        #expect(Self.verdict(Self.with(all) { $0.fromMs = -1 }) == .invalid("query_deliveries.from_ms"))
        #expect(Self.verdict(Self.with(all) { $0.fromMs = .min }) == .invalid("query_deliveries.from_ms"))
        #expect(Self.verdict(Self.with(all) { $0.toMs = -1 }) == .invalid("query_deliveries.to_ms"))
        #expect(Self.verdict(Self.with(all) { $0.toMs = .min }) == .invalid("query_deliveries.to_ms"))
        #expect(
            Self.verdict(
                Self.with(all) {
                    $0.fromMs = 5
                    $0.toMs = 5
                }) == .invalid("query_deliveries.to_ms"))
        #expect(Self.verdict(Self.with(all) { $0.fromMs = .max }) == .invalid("query_deliveries.to_ms"))
        // from_ms alone: "since", open to the end of time.
        #expect(Self.verdict(Self.with(Pushrelay_V1_QueryDeliveries()) { $0.fromMs = 1_700_000_000_000 }) == .accepted)
    }

    @Test func queryDeliveriesLimitIsAtMost1000() {
        for limit: UInt32 in [0, 1, 1_000] {
            #expect(Self.verdict(Self.with(Self.query) { $0.limit = limit }) == .accepted, "\(limit)")
        }
        for limit: UInt32 in [1_001, .max] {
            #expect(Self.verdict(Self.with(Self.query) { $0.limit = limit }) == .invalid("query_deliveries.limit"))
        }
    }

    @Test func queryDeliveriesIDsAndTokenAreChecked() {
        #expect(Self.verdict(Self.with(Self.query) { $0.jobID = "job\0" }) == .invalid("query_deliveries.job_id"))
        #expect(
            Self.verdict(Self.with(Pushrelay_V1_QueryDeliveries()) { $0.userID = Self.ascii(201) })
                == .invalid("query_deliveries.user_id"))
        #expect(
            Self.verdict(Self.with(Pushrelay_V1_QueryDeliveries()) { $0.token = "\u{200B}zero-width" })
                == .invalid("query_deliveries.token"))
    }

    // MARK: - preferences, mutes, presence, results stream

    @Test func setPreferencesNamesAtMost256TypesEachAnID() {
        let preference = { (name: String) in Self.with(Pushrelay_V1_TypePreference()) { $0.notificationType = name } }
        let base = Self.with(Pushrelay_V1_SetPreferences()) {
            $0.userID = "user-1"
            $0.preferences = (0..<256).map { preference("type-\($0)") }
        }
        #expect(Self.verdict(base) == .accepted)
        #expect(Self.verdict(Self.with(base) { $0.userID = "" }) == .invalid("set_preferences.user_id"))
        #expect(
            Self.verdict(Self.with(base) { $0.preferences.append(preference("one-more")) })
                == .invalid("set_preferences.preferences"))
        for name in ["", "chat\n", Self.ascii(201)] {
            #expect(
                Self.verdict(Self.with(base) { $0.preferences[0] = preference(name) })
                    == .invalid("set_preferences.preferences.notification_type"), "\(name.debugDescription)")
        }
    }

    @Test func setMuteUntilIsFromZeroToTheEndOfTheYear9999() {
        for until in [0, 1, Self.now, FieldRules.latestMilliseconds] {
            #expect(Self.verdict(Self.with(Self.setMute) { $0.untilMs = until }) == .accepted, "\(until)")
        }
        for until in [FieldRules.latestMilliseconds + 1, .max, .min, -1] {
            #expect(
                Self.verdict(Self.with(Self.setMute) { $0.untilMs = until }) == .invalid("set_mute.until_ms"),
                "\(until)")
        }
    }

    @Test func aMuteNamesAThreadOrAScopeExactlyOne() {
        let both = Self.with(Self.setMute) { $0.scope = "circle-1" }
        #expect(Self.verdict(both) == .invalid("set_mute"))
        #expect(Self.verdict(Self.with(Self.setMute) { $0.threadID = "" }) == .invalid("set_mute"))
        #expect(Self.verdict(Self.with(both) { $0.threadID = "" }) == .accepted)
        let clear = Self.with(Pushrelay_V1_ClearMute()) { $0.userID = "user-1" }
        #expect(Self.verdict(clear) == .invalid("clear_mute"))
        #expect(Self.verdict(Self.with(clear) { $0.threadID = "circle-1" }) == .accepted)
        #expect(
            Self.verdict(
                Self.with(clear) {
                    $0.threadID = "circle-1"
                    $0.scope = "circle-1"
                }) == .invalid("clear_mute"))
    }

    @Test func setMuteAndClearMuteNeedAUserAndTakeOptionalThreadAndScope() {
        #expect(Self.verdict(Self.with(Self.setMute) { $0.userID = "" }) == .invalid("set_mute.user_id"))
        #expect(Self.verdict(Self.with(Self.setMute) { $0.threadID = "t\n" }) == .invalid("set_mute.thread_id"))
        #expect(Self.verdict(Self.with(Self.setMute) { $0.scope = Self.ascii(201) }) == .invalid("set_mute.scope"))
        let clear = Self.with(Pushrelay_V1_ClearMute()) {
            $0.userID = "user-1"
            $0.scope = "circle-1"
        }
        #expect(Self.verdict(clear) == .accepted)
        #expect(Self.verdict(Self.with(clear) { $0.userID = "" }) == .invalid("clear_mute.user_id"))
        #expect(Self.verdict(Self.with(clear) { $0.threadID = "\0" }) == .invalid("clear_mute.thread_id"))
        #expect(Self.verdict(Self.with(clear) { $0.scope = "\u{85}" }) == .invalid("clear_mute.scope"))
    }

    @Test func presenceIsAtMostSevenDaysForAUserInAThread() {
        for seconds: UInt32 in [0, 1, FieldRules.maximumPresenceSeconds] {
            #expect(Self.verdict(Self.with(Self.setPresence) { $0.seconds = seconds }) == .accepted, "\(seconds)")
        }
        for seconds: UInt32 in [FieldRules.maximumPresenceSeconds + 1, .max] {
            #expect(
                Self.verdict(Self.with(Self.setPresence) { $0.seconds = seconds }) == .invalid("set_presence.seconds"))
        }
        #expect(Self.verdict(Self.with(Self.setPresence) { $0.userID = "" }) == .invalid("set_presence.user_id"))
        #expect(Self.verdict(Self.with(Self.setPresence) { $0.threadID = "" }) == .invalid("set_presence.thread_id"))
    }

    @Test func listNotificationTypesHasNoFieldsAndIgnoresUndeclaredOnes() {
        #expect(Self.verdict(Pushrelay_V1_ListNotificationTypes()) == .accepted)
        #expect(Self.verdict(Pushrelay_V1_ListNotificationTypes(), followedBy: [1 << 3 | 2, 1, 0x41]) == .accepted)
    }

    @Test func resultsStreamRequestsHaveNoRules() {
        #expect(Self.verdict(Self.with(Pushrelay_V1_SubscribeResults()) { $0.receipts = true }) == .accepted)
        for id: UInt32 in [0, .max] {
            #expect(
                Self.verdict(Self.with(Pushrelay_V1_UnsubscribeResults()) { $0.subscriptionRequestID = id })
                    == .accepted)
        }
    }
}

/// Judges the body of a `messages:send` request the way Google documents it (`projects.messages`), and reads the
/// parts tests assert on: a value with no state and no network, so that each rule is tested on its own.
///
/// The checks: the body is a JSON object of `message` and `validate_only`; the message has exactly one of `token`,
/// `topic` and `condition`; a token is non-empty text of `[A-Za-z0-9_:-]` (otherwise 400 "The registration token is
/// not a valid FCM registration token", which senders read as a dead token); a topic name is `[A-Za-z0-9-_.~%]+`
/// (without `/topics/`); a condition names one to five topics; `data` maps strings to strings, without the reserved
/// keys; `notification`, `android`, `apns`, `webpush` and `fcm_options` hold the fields and types Google's reference
/// gives (Android's `ttl` 0 to 4 weeks, its `color` `#rrggbb`, `apns.payload.aps` an object); a token message's
/// payload (keys and values of `data` and `notification`) is at most 4,096 bytes, a topic's 2,048.
struct FCMRequestValidator: Sendable {
    /// The most bytes of a request body Google reads.
    static let maximumBodyBytes = 1 << 20
    /// The most payload bytes of a token message.
    static let maximumTokenPayloadBytes = 4_096
    /// The most payload bytes of a topic or condition message.
    static let maximumTopicPayloadBytes = 2_048
    /// The longest Android `ttl`: four weeks.
    static let maximumTTLSeconds = 2_419_200.0
    /// Data keys FCM reserves.
    static let reservedDataKeys: Set<String> = ["from", "message_type"]

    /// A validator (it has no settings: Google's rules are fixed).
    init() {}

    /// Judges `body`, filling `message` with what it read; returns Google's 400 answer when the body is refused,
    /// nil when FCM would take it.
    func validate(_ body: [UInt8], into message: inout FCMSimulatorMessage) -> FCMSimulatorAnswer? {
        var parsed: (token: Range<Int>?, message: Range<Int>)?
        return validate(body, into: &message, parsed: &parsed)
    }

    /// Judges `body` as ``validate(_:into:)`` does, reading it from `shapes` when a body of its shape was accepted
    /// before, and keeping its reading there when it is accepted now.
    func validate(
        _ body: [UInt8], into message: inout FCMSimulatorMessage, shapes: inout ValidatedShapes
    ) -> FCMSimulatorAnswer? {
        let token = ValidatedShapes.tokenValue(in: body)
        if let token, shapes.read(body, token: token, into: &message) { return nil }
        var parsed: (token: Range<Int>?, message: Range<Int>)?
        let answer = validate(body, into: &message, parsed: &parsed)
        // The parsed token's range holds its quotes.
        if answer == nil, let token, let parsed, parsed.token == (token.lowerBound - 1)..<(token.upperBound + 1) {
            shapes.remember(message, body: body, token: token, messageRange: parsed.message)
        }
        return answer
    }

    /// Judges `body` into `message`, and sets `parsed` to where the message's token value (with its quotes) and
    /// the `message` object were when the body is a JSON object with a message object.
    private func validate(
        _ body: [UInt8], into message: inout FCMSimulatorMessage,
        parsed: inout (token: Range<Int>?, message: Range<Int>)?
    ) -> FCMSimulatorAnswer? {
        guard body.count <= Self.maximumBodyBytes else {
            return .invalidArgument("Request payload size exceeds the limit: \(Self.maximumBodyBytes) bytes.")
        }
        let request: RequestJSON
        do {
            request = try RequestJSON.parse(body)
        } catch {
            return .invalidArgument("Invalid JSON payload received. Unexpected token at byte \(error.offset).")
        }
        guard let members = request.members else {
            return .invalidArgument("Invalid JSON payload received. The request is not a JSON object.")
        }
        var messageMember: JSONMember?
        for member in members {
            switch FieldKind.snakeCase(member.key) {
            case "message":
                messageMember = member
            case "validate_only":
                guard case .bool(let flag) = member.value else {
                    return .invalidArgument(FieldKind.bool.problem(member.value, at: "validate_only") ?? "")
                }
                message.validateOnly = flag
            default:
                return .invalidArgument(
                    "Invalid JSON payload received. Unknown name \"\(member.key)\": Cannot find field.")
            }
        }
        guard let messageMember else { return .invalidArgument("Request contains an invalid argument: no message.") }
        guard let fields = messageMember.value.members else {
            return .invalidArgument(FieldKind.object([:]).problem(messageMember.value, at: "message") ?? "")
        }
        message.messageJSON = Array(body[messageMember.range])
        parsed = (fields.first { FieldKind.snakeCase($0.key) == "token" }?.range, messageMember.range)
        if let problem = read(fields, into: &message) { return .invalidArgument(problem) }
        return judgeTarget(message) ?? judgeSize(message)
    }

    /// Reads the message's fields into `message`; Google's message for the first field refused, or nil.
    private func read(_ fields: [JSONMember], into message: inout FCMSimulatorMessage) -> String? {
        for field in fields {
            let name = FieldKind.snakeCase(field.key)
            let path = "message.\(name)"
            let problem: String?
            switch name {
            case "token", "topic", "condition", "name":
                problem = FieldKind.string.problem(field.value, at: path)
                if name == "token" { message.token = field.value.string }
                if name == "topic" { message.topic = field.value.string }
                if name == "condition" { message.condition = field.value.string }
            case "data":
                problem = readData(field.value, into: &message)
            case "notification":
                problem = FieldKind.object(MessageFields.notification).problem(field.value, at: path)
                let texts = Dictionary(
                    (field.value.members ?? []).map { (FieldKind.snakeCase($0.key), $0.value.string) },
                    uniquingKeysWith: { _, last in last })
                message.notification = .init(
                    title: texts["title"] ?? nil, body: texts["body"] ?? nil, image: texts["image"] ?? nil)
            case "android":
                problem = readAndroid(field.value, into: &message)
            case "apns":
                problem = readAPNs(field.value, into: &message)
            case "webpush":
                problem = FieldKind.object(MessageFields.webpush).problem(field.value, at: path)
            case "fcm_options":
                problem = FieldKind.object(MessageFields.fcmOptions).problem(field.value, at: path)
            default:
                problem =
                    "Invalid JSON payload received. Unknown name \"\(field.key)\" at 'message': Cannot find field."
            }
            if let problem { return problem }
        }
        return nil
    }

    /// `message.data`: string values only (Google names the entry by its position), no reserved key.
    private func readData(_ value: RequestJSON, into message: inout FCMSimulatorMessage) -> String? {
        if let problem = FieldKind.stringMap.problem(value, at: "message.data") { return problem }
        for member in value.members ?? [] {
            let key = member.key
            if Self.reservedDataKeys.contains(key) || key.hasPrefix("google.") || key.hasPrefix("gcm.notification.") {
                return "Invalid data payload key: \(key). The key is reserved by FCM."
            }
            message.data[key] = member.value.string
        }
        return nil
    }

    /// `message.android`: its fields and types, `ttl` within four weeks, `notification.color` `#rrggbb`.
    private func readAndroid(_ value: RequestJSON, into message: inout FCMSimulatorMessage) -> String? {
        if let problem = FieldKind.object(MessageFields.android).problem(value, at: "message.android") {
            return problem
        }
        var android = FCMSimulatorMessage.Android()
        for member in value.members ?? [] {
            switch FieldKind.snakeCase(member.key) {
            case "priority": android.priority = member.value.string
            case "collapse_key": android.collapseKey = member.value.string
            case "ttl":
                android.ttl = member.value.string
                let seconds = member.value.string.flatMap(FieldKind.seconds(ofDuration:)) ?? -1
                guard (0...Self.maximumTTLSeconds).contains(seconds) else {
                    return "The value of message.android.ttl must be between 0s and 2419200s (4 weeks), not "
                        + (member.value.string ?? "")
                }
            case "notification":
                for field in member.value.members ?? [] {
                    let text = field.value.string
                    switch FieldKind.snakeCase(field.key) {
                    case "channel_id": android.channelID = text
                    case "tag": android.tag = text
                    case "click_action": android.clickAction = text
                    case "color" where !Self.isColor(text ?? ""):
                        return "Invalid value at 'message.android.notification.color': \"\(text ?? "")\" is not "
                            + "#rrggbb."
                    default: continue
                    }
                }
            default: continue
            }
        }
        message.android = android
        return nil
    }

    /// `message.apns`: `headers` a map of strings (a valid `apns-priority` and `apns-expiration` when given),
    /// `payload` an object whose `aps`, when present, is an object.
    private func readAPNs(_ value: RequestJSON, into message: inout FCMSimulatorMessage) -> String? {
        if let problem = FieldKind.object(MessageFields.apns).problem(value, at: "message.apns") { return problem }
        for member in value.members ?? [] {
            switch FieldKind.snakeCase(member.key) {
            case "headers":
                for header in member.value.members ?? [] {
                    let text = header.value.string ?? ""
                    let name = header.key.lowercased()
                    if name == "apns-priority", !["1", "5", "10"].contains(text) {
                        return "Invalid APNs header apns-priority: \"\(text)\" (1, 5 or 10)."
                    }
                    if name == "apns-expiration", Int64(text) == nil {
                        return "Invalid APNs header apns-expiration: \"\(text)\" (seconds since 1970)."
                    }
                    message.apnsHeaders[header.key] = text
                }
            case "payload":
                let aps = member.value.members?.first { $0.key == "aps" }
                if let aps, aps.value.members == nil {
                    return "Invalid value at 'message.apns.payload.aps': it must be an object, not \(aps.value.quoted)."
                }
            default: continue
            }
        }
        return nil
    }

    /// Exactly one target, and a well-formed one.
    private func judgeTarget(_ message: FCMSimulatorMessage) -> FCMSimulatorAnswer? {
        let targets = [message.token, message.topic, message.condition].compactMap { $0 }
        guard targets.count == 1 else {
            return .invalidArgument("Exactly one of token, topic or condition must be given, not \(targets.count).")
        }
        if let token = message.token, !Self.isRegistrationToken(token) { return .invalidRegistrationToken }
        if let topic = message.topic, !Self.isTopicName(topic) {
            return .invalidArgument("Invalid topic name: \"\(topic)\" (the name goes without /topics/).")
        }
        if let condition = message.condition {
            let topics = condition.components(separatedBy: "in topics").count - 1
            guard (1...5).contains(topics) else {
                return .invalidArgument("Invalid condition expression: it names \(topics) topics, 1 to 5 allowed.")
            }
        }
        return nil
    }

    /// The payload size: keys and values of `data`, and the notification's texts.
    private func judgeSize(_ message: FCMSimulatorMessage) -> FCMSimulatorAnswer? {
        let texts = [message.notification?.title, message.notification?.body, message.notification?.image]
        let size =
            message.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            + texts.reduce(0) { $0 + ($1?.utf8.count ?? 0) }
        let limit = message.token == nil ? Self.maximumTopicPayloadBytes : Self.maximumTokenPayloadBytes
        guard size <= limit else {
            return .invalidArgument("Message is too big: its payload is \(size) bytes, more than \(limit).")
        }
        return nil
    }

    /// Whether `token` looks like a registration token: 1 to 4,096 characters of `[A-Za-z0-9_:-]`.
    static func isRegistrationToken(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= 4_096
            && token.utf8.allSatisfy(isTokenCharacter)
    }

    /// Whether `byte` may be in a registration token: `[A-Za-z0-9_:-]`.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
    }

    /// Whether `topic` is a topic name: `[A-Za-z0-9-_.~%]+`.
    static func isTopicName(_ topic: String) -> Bool {
        !topic.isEmpty && topic.utf8.allSatisfy { isAlphanumeric($0) || "-_.~%".utf8.contains($0) }
    }

    /// Whether `text` is `#rrggbb`.
    private static func isColor(_ text: String) -> Bool {
        text.utf8.count == 7 && text.hasPrefix("#") && text.dropFirst().allSatisfy(\.isHexDigit)
    }

    /// Whether `byte` is an ASCII letter or digit.
    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}

/// What a field of an FCM message must hold, as Google's JSON mapping of its protos requires: the checks the
/// simulator makes on the parts of a message it does not read itself (Android's and Apple's options, Web push).
///
/// Field names are taken in snake_case and lowerCamelCase, as Google takes them; an unknown name is refused, as
/// Google's parser refuses it ("Cannot find field"), which is how a misspelt option shows.
enum FieldKind: Sendable, Hashable {
    /// A string.
    case string
    /// `true` or `false`.
    case bool
    /// An integer (a JSON number without fraction, or its text in a string, as proto3 JSON allows).
    case integer
    /// A list of strings.
    case stringList
    /// A list of durations (`vibrate_timings`).
    case durationList
    /// A map of string to string (`data`, `headers`).
    case stringMap
    /// One of these enum names.
    case enumeration(Set<String>)
    /// A duration: a decimal number of seconds ending in `s`, such as `"3.5s"`.
    case duration
    /// An object whose fields follow these rules.
    case object([String: FieldKind])
    /// Any JSON object (`apns.payload` beyond `aps`, `light_settings`).
    case anyObject

    /// `lowerCamelCase` as Google's snake_case field name.
    static func snakeCase(_ name: String) -> String {
        // Field names are ASCII: most are snake_case already, and are returned as they are.
        let isUpper = { (byte: UInt8) in byte &- UInt8(ascii: "A") < 26 }
        guard name.utf8.contains(where: isUpper) else { return name }
        var result: [UInt8] = []
        result.reserveCapacity(name.utf8.count + 4)
        for byte in name.utf8 {
            if isUpper(byte) {
                result.append(UInt8(ascii: "_"))
                result.append(byte | 0x20)
            } else {
                result.append(byte)
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Why `value` at `path` (Google's dotted path, `message.android.ttl`) breaks this rule, as Google's error
    /// message; nil when it does not.
    func problem(_ value: RequestJSON, at path: String) -> String? {
        switch self {
        case .string:
            return value.string == nil ? Self.typeError(path, "TYPE_STRING", value) : nil
        case .bool:
            if case .bool = value { return nil }
            return Self.typeError(path, "TYPE_BOOL", value)
        case .integer:
            if case .number(let text) = value, Int64(text) != nil { return nil }
            if let text = value.string, Int64(text) != nil { return nil }
            return Self.typeError(path, "TYPE_INT32", value)
        case .stringList, .durationList:
            guard case .array(let elements) = value else { return Self.typeError(path, "TYPE_STRING", value) }
            let element: FieldKind = self == .stringList ? .string : .duration
            for (index, item) in elements.enumerated() {
                if let problem = element.problem(item, at: "\(path)[\(index)]") { return problem }
            }
            return nil
        case .stringMap:
            guard let members = value.members else { return Self.typeError(path, "TYPE_MESSAGE", value) }
            for (index, member) in members.enumerated() where member.value.string == nil {
                return Self.typeError("\(path)[\(index)].value", "TYPE_STRING", member.value)
            }
            return nil
        case .enumeration(let names):
            guard let name = value.string, names.contains(name) else {
                return Self.typeError(path, "TYPE_ENUM", value)
            }
            return nil
        case .duration:
            guard let text = value.string, Self.seconds(ofDuration: text) != nil else {
                return "Invalid value at '\(path)' (type.googleapis.com/google.protobuf.Duration), \(value.quoted)"
            }
            return nil
        case .object(let fields):
            guard let members = value.members else { return Self.typeError(path, "TYPE_MESSAGE", value) }
            return Self.problem(members, fields: fields, at: path)
        case .anyObject:
            return value.members == nil ? Self.typeError(path, "TYPE_MESSAGE", value) : nil
        }
    }

    /// The first problem of an object's `members` under `fields`, or nil.
    static func problem(_ members: [JSONMember], fields: [String: FieldKind], at path: String) -> String? {
        for member in members {
            let name = snakeCase(member.key)
            guard let kind = fields[name] else {
                return "Invalid JSON payload received. Unknown name \"\(member.key)\" at '\(path)': Cannot find field."
            }
            if let problem = kind.problem(member.value, at: "\(path).\(name)") { return problem }
        }
        return nil
    }

    /// The seconds of a proto3 JSON duration (`"3600s"`, `"1.5s"`, at most nine fractional digits); nil when it is
    /// not one.
    static func seconds(ofDuration text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        let isDigits = { (part: Substring) in !part.isEmpty && part.allSatisfy { $0.isASCII && $0.isNumber } }
        guard parts.count <= 2, isDigits(parts[0].hasPrefix("-") ? parts[0].dropFirst() : parts[0]) else {
            return nil
        }
        if parts.count == 2, !isDigits(parts[1]) || parts[1].count > 9 { return nil }
        return Double(number)
    }

    /// Google's message for a value of the wrong type.
    private static func typeError(_ path: String, _ type: String, _ value: RequestJSON) -> String {
        "Invalid value at '\(path)' (\(type)), \(value.quoted)"
    }
}

/// The fields of a message's parts other than its target, data and notification, as Google's reference lists them.
enum MessageFields {
    /// `message.notification`.
    static let notification: [String: FieldKind] = ["title": .string, "body": .string, "image": .string]

    /// `message.android.notification`.
    static let androidNotification: [String: FieldKind] = [
        "title": .string, "body": .string, "icon": .string, "color": .string, "sound": .string, "tag": .string,
        "click_action": .string, "body_loc_key": .string, "body_loc_args": .stringList, "title_loc_key": .string,
        "title_loc_args": .stringList, "channel_id": .string, "ticker": .string, "sticky": .bool,
        "event_time": .string, "local_only": .bool,
        "notification_priority": .enumeration([
            "PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX",
        ]),
        "default_sound": .bool, "default_vibrate_timings": .bool, "default_light_settings": .bool,
        "vibrate_timings": .durationList,
        "visibility": .enumeration(["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"]),
        "notification_count": .integer, "light_settings": .anyObject, "image": .string,
        "bypass_proxy_notification": .bool,
        "proxy": .enumeration(["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]),
    ]

    /// `message.android` (its `ttl` range and `notification.color` are checked by the validator).
    static let android: [String: FieldKind] = [
        "collapse_key": .string, "priority": .enumeration(["NORMAL", "HIGH"]), "ttl": .duration,
        "restricted_package_name": .string, "data": .stringMap, "notification": .object(androidNotification),
        "fcm_options": .object(["analytics_label": .string]), "direct_boot_ok": .bool,
        "bandwidth_constrained_ok": .bool, "restricted_satellite_ok": .bool,
    ]

    /// `message.apns` (its `payload.aps` and headers' values are checked by the validator).
    static let apns: [String: FieldKind] = [
        "headers": .stringMap, "payload": .anyObject,
        "fcm_options": .object(["analytics_label": .string, "image": .string]), "live_activity_token": .string,
    ]

    /// `message.webpush`.
    static let webpush: [String: FieldKind] = [
        "headers": .stringMap, "data": .stringMap, "notification": .anyObject,
        "fcm_options": .object(["link": .string, "analytics_label": .string]),
    ]

    /// `message.fcm_options`.
    static let fcmOptions: [String: FieldKind] = ["analytics_label": .string]
}

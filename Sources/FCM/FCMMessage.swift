public import Foundation

/// One notification as FCM HTTP v1 takes it (`projects.messages`), without its target: rendered once per job and
/// sent to each token with ``body(to:)``.
public struct FCMMessage: Sendable, Hashable {
    /// The visible part Android shows (and FCM's own rendering on iOS): `notification`.
    public struct Notification: Sendable, Hashable, Encodable {
        /// The title.
        public var title: String?
        /// The text.
        public var body: String?
        /// An image's URL.
        public var image: String?

        /// A notification with these texts.
        public init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    /// Android's delivery options: `android`.
    public struct Android: Sendable, Hashable {
        /// `NORMAL` or `HIGH`.
        public enum Priority: String, Sendable, Hashable, CaseIterable {
            /// Delivered when the device is awake (`NORMAL`).
            case normal = "NORMAL"
            /// Wakes the device (`HIGH`).
            case high = "HIGH"
        }

        /// The delivery priority; `nil`: FCM's default (`NORMAL` for data, `HIGH` for notifications).
        public var priority: Priority?
        /// Seconds FCM keeps the message for an offline device (0 to 4 weeks); `nil`: FCM's default (4 weeks).
        public var ttlSeconds: Int?
        /// Messages of one collapse key replace each other while the device is offline.
        public var collapseKey: String?
        /// The Android notification channel (`android.notification.channel_id`).
        public var channelID: String?
        /// Notifications of one tag replace each other in the drawer.
        public var tag: String?
        /// The activity the tap opens (`android.notification.click_action`).
        public var clickAction: String?

        /// Android options.
        public init(
            priority: Priority? = nil, ttlSeconds: Int? = nil, collapseKey: String? = nil, channelID: String? = nil,
            tag: String? = nil, clickAction: String? = nil
        ) {
            self.priority = priority
            self.ttlSeconds = ttlSeconds
            self.collapseKey = collapseKey
            self.channelID = channelID
            self.tag = tag
            self.clickAction = clickAction
        }
    }

    /// What an iOS app registered through Firebase is sent: `apns`, the APNs headers and payload FCM hands APNs.
    public struct APNs: Sendable, Hashable {
        /// APNs request headers by name (`apns-push-type`, `apns-priority`, `apns-expiration`,
        /// `apns-collapse-id`), passed on by FCM.
        public var headers: [String: String]
        /// The APNs payload, a JSON object's bytes (`{"aps": {...}}`), sent as they are.
        public var payload: Data

        /// An `apns` block with these headers and payload.
        public init(headers: [String: String] = [:], payload: Data) {
            self.headers = headers
            self.payload = payload
        }
    }

    /// The longest TTL FCM takes: four weeks.
    public static let maximumTTLSeconds = 2_419_200
    /// The most bytes of a token message's payload (keys and values of `notification` and `data`).
    public static let maximumPayloadBytes = 4_096
    /// Data keys FCM reserves.
    public static let reservedDataKeys: Set<String> = ["from", "message_type"]

    /// What the device shows, if anything (a data-only message has none).
    public var notification: Notification?
    /// The app's data: string values only, as FCM requires.
    public var data: [String: String]
    /// Android's options.
    public var android: Android?
    /// The APNs request for iOS devices registered through Firebase, if the message has one.
    public var apns: APNs?

    /// A message with these parts.
    public init(
        notification: Notification? = nil, data: [String: String] = [:], android: Android? = nil, apns: APNs? = nil
    ) {
        self.notification = notification
        self.data = data
        self.android = android
        self.apns = apns
    }

    /// Whether FCM reserves `key` in `data`: ``reservedDataKeys`` and the `google.` and `gcm.notification.` prefixes.
    public static func isReservedDataKey(_ key: String) -> Bool {
        reservedDataKeys.contains(key) || key.hasPrefix("google.") || key.hasPrefix("gcm.notification.")
    }

    /// Why FCM would refuse the message, or `nil`: a reserved data key, a TTL out of range, an `apns` payload that
    /// is no JSON object, a payload over 4 KiB.
    ///
    /// The payload is the keys and values of `data` and the texts of `notification`; with an `apns` block, its
    /// payload's bytes too, since FCM delivers `data` and `notification` to an iOS device inside the APNs payload,
    /// which APNs limits to 4 KiB as well.
    public func problem() -> String? {
        for key in data.keys.sorted() where Self.isReservedDataKey(key) {
            return "the data key \"\(key)\" is reserved by FCM"
        }
        if let ttl = android?.ttlSeconds, !(0...Self.maximumTTLSeconds).contains(ttl) {
            return "an FCM ttl is 0 to \(Self.maximumTTLSeconds) seconds, not \(ttl)"
        }
        if let apns, !((try? JSONSerialization.jsonObject(with: apns.payload)) is [String: Any]) {
            return "the apns payload is not a JSON object"
        }
        var payload =
            data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            + [notification?.title, notification?.body, notification?.image].reduce(0) { $0 + ($1?.utf8.count ?? 0) }
        var what = "the FCM payload"
        if let apns {
            payload += apns.payload.count
            what += " with its apns payload"
        }
        if payload > Self.maximumPayloadBytes {
            return "\(what) is \(payload) bytes, more than \(Self.maximumPayloadBytes)"
        }
        return nil
    }

    /// The request body of `messages:send` for `token`: `{"message": {..., "token": ...}}`, for a message
    /// without a ``problem()``.
    public func body(to token: String) -> Data {
        let message = Wire(
            token: token, notification: notification, data: data.isEmpty ? nil : data,
            android: android.map(WireAndroid.init))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var body = try? encoder.encode(["message": message]) else { return Data() }
        guard let apns else { return body }
        // The payload's bytes go in as they are (a JSON encoder would decode and re-encode them): in place of the
        // message's closing brace, `,"apns":{"headers":{...},"payload":{...}}` (the message always has its token,
        // so it is never empty).
        body.removeLast(2)
        body.append(contentsOf: Array(#","apns":{"#.utf8))
        if !apns.headers.isEmpty, let headers = try? encoder.encode(apns.headers) {
            body.append(contentsOf: Array(#""headers":"#.utf8) + headers + Array(",".utf8))
        }
        body.append(contentsOf: Array(#""payload":"#.utf8) + apns.payload + Array("}}}".utf8))
        return body
    }

    private struct Wire: Encodable {
        var token: String
        var notification: Notification?
        var data: [String: String]?
        var android: WireAndroid?
    }

    private struct WireAndroid: Encodable {
        struct Notification: Encodable {
            var channel_id: String?
            var tag: String?
            var click_action: String?
        }

        var priority: String?
        var ttl: String?
        var collapse_key: String?
        var notification: Notification?

        init(_ android: Android) {
            priority = android.priority?.rawValue
            ttl = android.ttlSeconds.map { "\($0)s" }
            collapse_key = android.collapseKey
            if android.channelID != nil || android.tag != nil || android.clickAction != nil {
                notification = Notification(
                    channel_id: android.channelID, tag: android.tag, click_action: android.clickAction)
            }
        }
    }
}

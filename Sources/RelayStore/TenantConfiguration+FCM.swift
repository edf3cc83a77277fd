extension TenantConfiguration {
    /// The tenant's Firebase project (the tenant file's top-level `fcm`): where its FCM devices are sent, and the
    /// project its stored service account must belong to.
    package struct FCMProject: Sendable, Hashable, Codable {
        /// Google's project id (`dispo-app`): the `{project}` of `messages:send`.
        package var projectID: String

        /// A project of id `projectID`, which ``isProjectID(_:)`` must accept.
        package init(projectID: String) {
            self.projectID = projectID
        }

        /// Whether `text` has the form Google gives project ids: 6 to 30 lower-case ASCII letters, digits and
        /// hyphens, starting with a letter and not ending with a hyphen.
        package static func isProjectID(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            guard (6...30).contains(bytes.count), let first = bytes.first, let last = bytes.last,
                first &- UInt8(ascii: "a") < 26, last != UInt8(ascii: "-")
            else { return false }
            return bytes.allSatisfy { $0 &- UInt8(ascii: "a") < 26 || $0 &- UInt8(ascii: "0") < 10 || $0 == 0x2D }
        }

        enum CodingKeys: String, CodingKey {
            case projectID = "project_id"
        }
    }

    /// How a notification type is sent to FCM devices (a type's `fcm`): which parts the message has, its data, and
    /// Android's options. Every FCM-capable type of a tenant with an ``FCMProject`` has one: the file's, or the
    /// defaults for `alert` and `background` types.
    package struct FCMMapping: Sendable, Hashable, Codable {
        /// The parts of the FCM message (the type's `fcm.message`).
        package enum MessageKind: String, Sendable, Hashable, Codable, CaseIterable {
            /// `notification` only: the device shows the title and body; no data.
            case notification
            /// `data` only: the app gets the data and decides what to show.
            case data
            /// Both: shown, and the data handed to the app when the user taps it.
            case both

            /// Whether the message has a `notification`.
            package var hasNotification: Bool { self != .data }
            /// Whether the message has `data`.
            package var hasData: Bool { self != .notification }
        }

        /// Android's delivery priority (the type's `fcm.android_priority`).
        package enum AndroidPriority: String, Sendable, Hashable, Codable, CaseIterable {
            /// Delivered when the device is awake.
            case normal
            /// Wakes the device.
            case high
        }

        /// The message's parts.
        package var message: MessageKind
        /// The data, by key: templates filled from the send's template values (the send's `custom_json` top-level
        /// values are added beside them).
        package var data: [String: String]
        /// Android's priority; `nil`: high for a send of priority 10, normal otherwise.
        package var androidPriority: AndroidPriority?
        /// Seconds FCM keeps the message for an offline device; `nil`: as long as the send is valid (the type's
        /// `expiration`), FCM's own default (4 weeks) when it has none.
        package var ttl: Int?
        /// The collapse key template (messages of one key replace each other while the device is offline); `nil`:
        /// the send's collapse id.
        package var collapseKey: String?
        /// The Android notification channel.
        package var channelID: String?
        /// The tag template (notifications of one tag replace each other in the drawer).
        package var tag: String?
        /// The activity a tap opens.
        package var clickAction: String?
        /// Whether the message carries an `apns` block (headers and `aps` payload) for iOS devices registered
        /// through Firebase.
        package var apns: Bool

        /// The longest ``ttl``: four weeks, FCM's limit.
        package static let maximumTTL = 2_419_200

        /// A mapping; the defaults are those of a type that says nothing but its message kind.
        package init(
            message: MessageKind, data: [String: String] = [:], androidPriority: AndroidPriority? = nil,
            ttl: Int? = nil, collapseKey: String? = nil, channelID: String? = nil, tag: String? = nil,
            clickAction: String? = nil, apns: Bool = false
        ) {
            self.message = message
            self.data = data
            self.androidPriority = androidPriority
            self.ttl = ttl
            self.collapseKey = collapseKey
            self.channelID = channelID
            self.tag = tag
            self.clickAction = clickAction
            self.apns = apns
        }

        /// The message kind of a type of `pushType` whose `fcm` does not say: `both` for alerts, `data` for
        /// background pushes, none for the other push types (they have no FCM equivalent and reach FCM devices only
        /// with an `fcm.message`).
        package static func defaultMessage(for pushType: PushType) -> MessageKind? {
            switch pushType {
            case .alert: .both
            case .background: .data
            default: nil
            }
        }

        /// Whether FCM reserves `key` in a message's data: `from`, `message_type`, and the `google.` and
        /// `gcm.notification.` prefixes (the FCM module's rule; the store imports no provider engine).
        package static func isReservedDataKey(_ key: String) -> Bool {
            key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.notification.")
        }

        enum CodingKeys: String, CodingKey {
            case message
            case data
            case androidPriority = "android_priority"
            case ttl
            case collapseKey = "collapse_key"
            case channelID = "channel_id"
            case tag
            case clickAction = "click_action"
            case apns
        }
    }
}

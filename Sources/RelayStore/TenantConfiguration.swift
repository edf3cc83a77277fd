public import APNs

/// One tenant's settings, as declared by its file in `Tenants/` (see `Tenants/README.md`).
///
/// A value type that encodes deterministically (``jsonData()``: sorted keys), which is what
/// ``RelayStore/syncTenants(_:)`` stores in `tenants.config` and compares against.
public struct TenantConfiguration: Sendable, Hashable, Codable {
    /// The tenant's id: its file name without `.yaml` (`circl`).
    public var id: String
    /// A human-readable name.
    public var displayName: String
    /// The app bundle ids (APNs topics) the tenant sends to, by bundle id.
    public var bundleIDs: [String: BundleID]
    /// How device tokens are keyed and replaced when devices register.
    public var tokenPolicy: TokenPolicy
    /// The subscription topics a device may subscribe to (for example `chat`, `photos`).
    public var subscriptionTopics: [String]
    /// The notification types the tenant sends, by name.
    public var notificationTypes: [String: NotificationType]
    /// The tenant-wide and per-user rate limits.
    public var rateLimits: RateLimits
    /// The quiet hours, or `nil` when the tenant has none.
    public var quietHours: QuietHours?

    /// Creates a configuration; ``TenantConfiguration/parse(yaml:id:file:)`` is the usual way.
    public init(
        id: String,
        displayName: String,
        bundleIDs: [String: BundleID],
        tokenPolicy: TokenPolicy,
        subscriptionTopics: [String] = [],
        notificationTypes: [String: NotificationType],
        rateLimits: RateLimits = RateLimits(),
        quietHours: QuietHours? = nil
    ) {
        self.id = id
        self.displayName = displayName
        self.bundleIDs = bundleIDs
        self.tokenPolicy = tokenPolicy
        self.subscriptionTopics = subscriptionTopics
        self.notificationTypes = notificationTypes
        self.rateLimits = rateLimits
        self.quietHours = quietHours
    }

    enum CodingKeys: String, CodingKey {
        case id
        case displayName = "display_name"
        case bundleIDs = "bundle_ids"
        case tokenPolicy = "token_policy"
        case subscriptionTopics = "subscription_topics"
        case notificationTypes = "notification_types"
        case rateLimits = "rate_limits"
        case quietHours = "quiet_hours"
    }

    /// An APNs environment a bundle id uses (the engine's type).
    public typealias Environment = APNsEnvironment

    /// One bundle id (APNs topic) of the tenant.
    public struct BundleID: Sendable, Hashable, Codable {
        /// The environments this app's builds register tokens in, in the order declared.
        public var environments: [Environment]

        /// Creates a bundle id entry.
        public init(environments: [Environment]) {
            self.environments = environments
        }
    }

    /// How the device registry keys a tenant's tokens (from the seeds).
    public enum TokenPolicy: String, Sendable, Hashable, Codable, CaseIterable {
        /// anky: one token per (user, platform), replaced on every register, removed on logout.
        case onePerUserPlatform = "one_per_user_platform"
        /// familyportal: one row per (user, token, platform, environment).
        case perUserTokenPlatformEnvironment = "per_user_token_platform_environment"
        /// circl: a token belongs to one user and moves to whoever registers it last.
        case tokenMovesToLastUser = "token_moves_to_last_user"
    }

    /// The `interruption-level` of an alert (the payload model's type).
    public typealias InterruptionLevel = APNsPayload.InterruptionLevel

    /// What quiet hours do to a notification type.
    public enum QuietHoursAction: String, Sendable, Hashable, Codable, CaseIterable {
        /// Held and sent when the quiet hours end.
        case `defer`
        /// Not sent at all.
        case drop
        /// Sent anyway.
        case pass
    }

    /// One kind of notification the tenant sends and its defaults.
    public struct NotificationType: Sendable, Hashable, Codable {
        /// The `apns-push-type`.
        public var pushType: APNsPushType
        /// The `apns-priority`: 10 (immediately), 5 (power-considerate) or 1 (lowest).
        public var priority: Int
        /// Seconds APNs keeps trying to deliver (0: once only), or `nil` for no `apns-expiration` header.
        public var expiration: Int?
        /// The bundle id (APNs topic) this type is sent to.
        public var bundleID: String
        /// The `thread-id` template, with `{placeholders}` filled from the notification's fields.
        public var threadID: String?
        /// The `category` template, with `{placeholders}`.
        public var category: String?
        /// The `interruption-level` (alerts only), or `nil` for iOS's default (`active`).
        public var interruptionLevel: InterruptionLevel?
        /// Whether a user may turn this type off; `false` makes it mandatory.
        public var optOutAllowed: Bool
        /// Whether a user who has not chosen receives this type.
        public var defaultEnabled: Bool
        /// The subscription topic a device must be subscribed to, or `nil` for every device.
        public var subscription: String?
        /// Seconds a notification of a type without a positive `expiration` is held and retried while its
        /// provider cannot take it (unreachable, 5xx, 429, credentials refused); `nil`: ``defaultRetryFor``. A
        /// type with a positive `expiration` is held for as long as it is valid.
        public var retryFor: Int?

        /// The hold of a type with neither a positive `expiration` nor `retry_for`: one hour.
        public static let defaultRetryFor = 3600
        /// The largest `retry_for`: 30 days.
        public static let maximumRetryFor = 2_592_000

        /// Creates a notification type.
        public init(
            pushType: APNsPushType,
            priority: Int,
            expiration: Int? = nil,
            bundleID: String,
            threadID: String? = nil,
            category: String? = nil,
            interruptionLevel: InterruptionLevel? = nil,
            optOutAllowed: Bool = true,
            defaultEnabled: Bool = true,
            subscription: String? = nil,
            retryFor: Int? = nil
        ) {
            self.pushType = pushType
            self.priority = priority
            self.expiration = expiration
            self.bundleID = bundleID
            self.threadID = threadID
            self.category = category
            self.interruptionLevel = interruptionLevel
            self.optOutAllowed = optOutAllowed
            self.defaultEnabled = defaultEnabled
            self.subscription = subscription
            self.retryFor = retryFor
        }

        enum CodingKeys: String, CodingKey {
            case pushType = "push_type"
            case priority
            case expiration
            case bundleID = "bundle_id"
            case threadID = "thread_id"
            case category
            case interruptionLevel = "interruption_level"
            case optOutAllowed = "opt_out_allowed"
            case defaultEnabled = "default_enabled"
            case subscription
            case retryFor = "retry_for"
        }
    }

    /// The tenant's rate limits.
    public struct RateLimits: Sendable, Hashable, Codable {
        /// The default for ``notificationsPerSecond``.
        public static let defaultNotificationsPerSecond = 1000

        /// The most notifications per second sent for the whole tenant.
        public var notificationsPerSecond: Int
        /// Caps per user, by notification type name.
        public var perUser: [String: PerUserLimit]
        /// The tenant's share of a relay's page loops when several tenants have pages due: a tenant of weight 2 is
        /// served twice the devices of a tenant of weight 1 (1 to 100; default 1).
        public var fanoutWeight: Int

        /// The largest ``fanoutWeight``.
        public static let maximumFanoutWeight = 100

        /// Creates rate limits.
        public init(
            notificationsPerSecond: Int = defaultNotificationsPerSecond, perUser: [String: PerUserLimit] = [:],
            fanoutWeight: Int = 1
        ) {
            self.notificationsPerSecond = notificationsPerSecond
            self.perUser = perUser
            self.fanoutWeight = fanoutWeight
        }

        /// Decodes rate limits stored before ``fanoutWeight`` existed with its default.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            notificationsPerSecond = try container.decode(Int.self, forKey: .notificationsPerSecond)
            perUser = try container.decode([String: PerUserLimit].self, forKey: .perUser)
            fanoutWeight = try container.decodeIfPresent(Int.self, forKey: .fanoutWeight) ?? 1
        }

        enum CodingKeys: String, CodingKey {
            case notificationsPerSecond = "notifications_per_second"
            case perUser = "per_user"
            case fanoutWeight = "fanout_weight"
        }
    }

    /// How many notifications of one type one user may receive.
    public struct PerUserLimit: Sendable, Hashable, Codable {
        /// The most per rolling hour, or `nil` for no hourly cap.
        public var maxPerHour: Int?
        /// The most per rolling day, or `nil` for no daily cap.
        public var maxPerDay: Int?

        /// Creates a per-user cap.
        public init(maxPerHour: Int? = nil, maxPerDay: Int? = nil) {
            self.maxPerHour = maxPerHour
            self.maxPerDay = maxPerDay
        }

        enum CodingKeys: String, CodingKey {
            case maxPerHour = "max_per_hour"
            case maxPerDay = "max_per_day"
        }
    }

    /// A local time of day, `HH:MM` on a 24-hour clock.
    public struct LocalTime: Sendable, Hashable, Codable, CustomStringConvertible {
        /// 0 to 23.
        public var hour: Int
        /// 0 to 59.
        public var minute: Int

        /// Creates a time; `nil` when out of range.
        public init?(hour: Int, minute: Int) {
            guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
            self.hour = hour
            self.minute = minute
        }

        /// Parses `HH:MM` (two digits each, 00:00 to 23:59); `nil` otherwise.
        public init?(_ text: String) {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
                let hour = Int(parts[0]), let minute = Int(parts[1])
            else { return nil }
            self.init(hour: hour, minute: minute)
        }

        /// `HH:MM`.
        public var description: String {
            (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
        }

        /// Decodes from `HH:MM`.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let time = LocalTime(text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "not a time HH:MM: \(text)")
                )
            }
            self = time
        }

        /// Encodes as `HH:MM`.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(description)
        }
    }

    /// When a tenant's users should not be disturbed, in each user's local time.
    public struct QuietHours: Sendable, Hashable, Codable {
        /// When quiet hours begin.
        public var start: LocalTime
        /// When they end (before `start` means they run past midnight).
        public var end: LocalTime
        /// The IANA time zone used for users whose devices did not report one.
        public var timeZone: String
        /// What happens to types not listed in ``actions``.
        public var defaultAction: QuietHoursAction
        /// What happens to each listed type, by notification type name.
        public var actions: [String: QuietHoursAction]

        /// Creates quiet hours.
        public init(
            start: LocalTime,
            end: LocalTime,
            timeZone: String = "UTC",
            defaultAction: QuietHoursAction = .defer,
            actions: [String: QuietHoursAction] = [:]
        ) {
            self.start = start
            self.end = end
            self.timeZone = timeZone
            self.defaultAction = defaultAction
            self.actions = actions
        }

        /// The action for notification type `name`.
        public func action(for name: String) -> QuietHoursAction {
            actions[name] ?? defaultAction
        }

        enum CodingKeys: String, CodingKey {
            case start
            case end
            case timeZone = "time_zone"
            case defaultAction = "default"
            case actions = "types"
        }
    }
}

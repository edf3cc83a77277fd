/// One tenant's settings, as declared by its file in `Tenants/` (see `Tenants/README.md`).
///
/// A value type that encodes deterministically (``jsonData()``: sorted keys), which is what
/// ``RelayStore/syncTenants(_:)`` stores in `tenants.config` and compares against.
package struct TenantConfiguration: Sendable, Hashable, Codable {
    /// The tenant's id: its file name without `.yaml` (`circl`).
    package var id: String
    /// A human-readable name.
    package var displayName: String
    /// The app bundle ids (APNs topics) the tenant sends to, by bundle id.
    package var bundleIDs: [String: BundleID]
    /// How device tokens are keyed and replaced when devices register.
    package var tokenPolicy: TokenPolicy
    /// The subscription topics a device may subscribe to (for example `chat`, `photos`).
    package var subscriptionTopics: [String]
    /// The notification types the tenant sends, by name.
    package var notificationTypes: [String: NotificationType]
    /// The tenant-wide and per-user rate limits.
    package var rateLimits: RateLimits
    /// The quiet hours, or `nil` when the tenant has none.
    package var quietHours: QuietHours?
    /// The tenant's Firebase project, or `nil` when it sends nothing through FCM.
    package var fcm: FCMProject?

    /// Creates a configuration; ``TenantConfiguration/parse(yaml:id:file:)`` is the usual way.
    package init(
        id: String,
        displayName: String,
        bundleIDs: [String: BundleID],
        tokenPolicy: TokenPolicy,
        subscriptionTopics: [String] = [],
        notificationTypes: [String: NotificationType],
        rateLimits: RateLimits = RateLimits(),
        quietHours: QuietHours? = nil,
        fcm: FCMProject? = nil
    ) {
        self.id = id
        self.displayName = displayName
        self.bundleIDs = bundleIDs
        self.tokenPolicy = tokenPolicy
        self.subscriptionTopics = subscriptionTopics
        self.notificationTypes = notificationTypes
        self.rateLimits = rateLimits
        self.quietHours = quietHours
        self.fcm = fcm
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
        case fcm
    }

    /// An APNs environment a bundle id uses: where its builds' tokens are valid (the tenant file's `environments`).
    package enum Environment: String, Sendable, Hashable, CaseIterable, Codable {
        /// App Store and TestFlight builds (`api.push.apple.com`).
        case production
        /// Builds signed for development (`api.sandbox.push.apple.com`).
        case development
    }

    /// A notification type's `push_type`: the APNs push type it is sent as, by Apple's name (`apns-push-type`).
    /// The provider layer maps each to the engine's type.
    package enum PushType: String, Sendable, Hashable, CaseIterable, Codable {
        /// A visible alert, sound or badge.
        case alert
        /// A silent push that wakes the app (priority 5).
        case background
        /// A location query (Location Push Service extension).
        case location
        /// A VoIP call (PushKit).
        case voip
        /// A watchOS complication update.
        case complication
        /// A File Provider change.
        case fileprovider
        /// A mobile device management command.
        case mdm
        /// A Live Activity update.
        case liveactivity
        /// A Push to Talk update.
        case pushtotalk
        /// A widget reload.
        case widgets
        /// A Control Center control reload.
        case controls
    }

    /// One bundle id (APNs topic) of the tenant.
    package struct BundleID: Sendable, Hashable, Codable {
        /// The environments this app's builds register tokens in, in the order declared.
        package var environments: [Environment]

        /// Creates a bundle id entry.
        package init(environments: [Environment]) {
            self.environments = environments
        }
    }

    /// How the device registry keys a tenant's tokens (from the seeds).
    package enum TokenPolicy: String, Sendable, Hashable, Codable, CaseIterable {
        /// anky: one token per (user, platform), replaced on every register, removed on logout.
        case onePerUserPlatform = "one_per_user_platform"
        /// familyportal: one row per (user, token, platform, environment).
        case perUserTokenPlatformEnvironment = "per_user_token_platform_environment"
        /// circl: a token belongs to one user and moves to whoever registers it last.
        case tokenMovesToLastUser = "token_moves_to_last_user"
    }

    /// How urgent a notification is (the tenant file's `interruption_level`, APNs' `interruption-level`): quiet
    /// hours let time-sensitive and critical ones through.
    package enum InterruptionLevel: String, Sendable, Hashable, Codable, CaseIterable {
        /// Delivered quietly, without lighting the screen.
        case passive
        /// The default.
        case active
        /// Breaks through Focus; passes quiet hours.
        case timeSensitive = "time-sensitive"
        /// Breaks through Focus and the mute switch; passes quiet hours.
        case critical
    }

    /// What quiet hours do to a notification type.
    package enum QuietHoursAction: String, Sendable, Hashable, Codable, CaseIterable {
        /// Held and sent when the quiet hours end.
        case `defer`
        /// Not sent at all.
        case drop
        /// Sent anyway.
        case pass
    }

    /// One kind of notification the tenant sends and its defaults.
    package struct NotificationType: Sendable, Hashable, Codable {
        /// The `apns-push-type`.
        package var pushType: PushType
        /// The `apns-priority`: 10 (immediately), 5 (power-considerate) or 1 (lowest).
        package var priority: Int
        /// Seconds APNs keeps trying to deliver (0: once only), or `nil` for no `apns-expiration` header.
        package var expiration: Int?
        /// The bundle id (APNs topic) this type is sent to.
        package var bundleID: String
        /// The `thread-id` template, with `{placeholders}` filled from the notification's fields.
        package var threadID: String?
        /// The `category` template, with `{placeholders}`.
        package var category: String?
        /// The `interruption-level` (alerts only), or `nil` for iOS's default (`active`).
        package var interruptionLevel: InterruptionLevel?
        /// Whether a user may turn this type off; `false` makes it mandatory.
        package var optOutAllowed: Bool
        /// Whether a user who has not chosen receives this type.
        package var defaultEnabled: Bool
        /// The subscription topic a device must be subscribed to, or `nil` for every device.
        package var subscription: String?
        /// Seconds a notification of a type without a positive `expiration` is held and retried while its
        /// provider cannot take it (unreachable, 5xx, 429, credentials refused); `nil`: ``defaultRetryFor``. A
        /// type with a positive `expiration` is held for as long as it is valid.
        package var retryFor: Int?
        /// How the type is sent to FCM devices, or `nil` when it does not reach them (the tenant has no FCM
        /// project, or the push type has no FCM equivalent and the file maps none).
        package var fcm: FCMMapping?

        /// The hold of a type with neither a positive `expiration` nor `retry_for`: one hour.
        package static let defaultRetryFor = 3600
        /// The largest `retry_for`: 30 days.
        package static let maximumRetryFor = 2_592_000

        /// Creates a notification type.
        package init(
            pushType: PushType,
            priority: Int,
            expiration: Int? = nil,
            bundleID: String,
            threadID: String? = nil,
            category: String? = nil,
            interruptionLevel: InterruptionLevel? = nil,
            optOutAllowed: Bool = true,
            defaultEnabled: Bool = true,
            subscription: String? = nil,
            retryFor: Int? = nil,
            fcm: FCMMapping? = nil
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
            self.fcm = fcm
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
            case fcm
        }
    }

    /// The tenant's rate limits.
    package struct RateLimits: Sendable, Hashable, Codable {
        /// The default for ``notificationsPerSecond``.
        package static let defaultNotificationsPerSecond = 1000

        /// The most notifications per second sent for the whole tenant.
        package var notificationsPerSecond: Int
        /// Caps per user, by notification type name.
        package var perUser: [String: PerUserLimit]
        /// The tenant's share of a relay's page loops when several tenants have pages due: a tenant of weight 2 is
        /// served twice the devices of a tenant of weight 1 (1 to 100; default 1).
        package var fanoutWeight: Int

        /// The largest ``fanoutWeight``.
        package static let maximumFanoutWeight = 100

        /// Creates rate limits.
        package init(
            notificationsPerSecond: Int = defaultNotificationsPerSecond, perUser: [String: PerUserLimit] = [:],
            fanoutWeight: Int = 1
        ) {
            self.notificationsPerSecond = notificationsPerSecond
            self.perUser = perUser
            self.fanoutWeight = fanoutWeight
        }

        /// Decodes rate limits stored before ``fanoutWeight`` existed with its default.
        package init(from decoder: any Decoder) throws {
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
    package struct PerUserLimit: Sendable, Hashable, Codable {
        /// The most per rolling hour, or `nil` for no hourly cap.
        package var maxPerHour: Int?
        /// The most per rolling day, or `nil` for no daily cap.
        package var maxPerDay: Int?

        /// Creates a per-user cap.
        package init(maxPerHour: Int? = nil, maxPerDay: Int? = nil) {
            self.maxPerHour = maxPerHour
            self.maxPerDay = maxPerDay
        }

        enum CodingKeys: String, CodingKey {
            case maxPerHour = "max_per_hour"
            case maxPerDay = "max_per_day"
        }
    }

    /// A local time of day, `HH:MM` on a 24-hour clock.
    package struct LocalTime: Sendable, Hashable, Codable, CustomStringConvertible {
        /// 0 to 23.
        package var hour: Int
        /// 0 to 59.
        package var minute: Int

        /// Creates a time; `nil` when out of range.
        package init?(hour: Int, minute: Int) {
            guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
            self.hour = hour
            self.minute = minute
        }

        /// Parses `HH:MM` (two digits each, 00:00 to 23:59); `nil` otherwise.
        package init?(_ text: String) {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
                let hour = Int(parts[0]), let minute = Int(parts[1])
            else { return nil }
            self.init(hour: hour, minute: minute)
        }

        /// `HH:MM`.
        package var description: String {
            (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
        }

        /// Decodes from `HH:MM`.
        package init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let time = LocalTime(text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "not a time HH:MM: \(text)")
                )
            }
            self = time
        }

        /// Encodes as `HH:MM`.
        package func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(description)
        }
    }

    /// When a tenant's users should not be disturbed, in each user's local time.
    package struct QuietHours: Sendable, Hashable, Codable {
        /// When quiet hours begin.
        package var start: LocalTime
        /// When they end (before `start` means they run past midnight).
        package var end: LocalTime
        /// The IANA time zone used for users whose devices did not report one.
        package var timeZone: String
        /// What happens to types not listed in ``actions``.
        package var defaultAction: QuietHoursAction
        /// What happens to each listed type, by notification type name.
        package var actions: [String: QuietHoursAction]

        /// Creates quiet hours.
        package init(
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
        package func action(for name: String) -> QuietHoursAction {
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

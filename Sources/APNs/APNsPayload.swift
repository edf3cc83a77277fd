import Foundation

/// A notification payload: Apple's `aps` dictionary plus custom top-level keys.
public struct APNsPayload: Sendable, Hashable, Encodable {
    /// The `aps` dictionary.
    public var aps: APS
    /// Custom keys placed beside `aps` (never inside it). A key named `aps` is rejected when encoding.
    public var custom: [String: JSONValue]

    /// A payload with these parts.
    public init(aps: APS = APS(), custom: [String: JSONValue] = [:]) {
        self.aps = aps
        self.custom = custom
    }

    /// Apple's `aps` keys. Every field is optional; nil fields are not encoded.
    public struct APS: Sendable, Hashable, Encodable {
        /// `alert`: a string or a dictionary.
        public var alert: Alert?
        /// `badge`: the number on the app icon (0 removes it).
        public var badge: Int?
        /// `sound`: a file name, or a critical-alert dictionary.
        public var sound: Sound?
        /// `thread-id`: groups notifications in Notification Center.
        public var threadID: String?
        /// `category`: the notification category with its actions.
        public var category: String?
        /// `content-available`: true encodes 1, a background update.
        public var contentAvailable: Bool?
        /// `mutable-content`: true encodes 1, lets a service extension modify the content.
        public var mutableContent: Bool?
        /// `target-content-id`: the window or content to bring forward.
        public var targetContentID: String?
        /// `interruption-level`.
        public var interruptionLevel: InterruptionLevel?
        /// `relevance-score`: 0 to 1, for the notification summary.
        public var relevanceScore: Double?
        /// `filter-criteria`: the Focus filter this notification matches.
        public var filterCriteria: String?
        /// Live Activity `timestamp` (seconds since 1970).
        public var timestamp: Int64?
        /// Live Activity `event`.
        public var event: LiveActivityEvent?
        /// Live Activity `content-state`.
        public var contentState: JSONValue?
        /// Live Activity `stale-date` (seconds since 1970).
        public var staleDate: Int64?
        /// Live Activity `dismissal-date` (seconds since 1970).
        public var dismissalDate: Int64?
        /// Live Activity `attributes-type` (to start an activity).
        public var attributesType: String?
        /// Live Activity `attributes` (to start an activity).
        public var attributes: JSONValue?
        /// Widgets `content-changed`: true encodes it.
        public var contentChanged: Bool?

        /// An empty `aps`; set the fields you need.
        public init(
            alert: Alert? = nil, badge: Int? = nil, sound: Sound? = nil, threadID: String? = nil,
            category: String? = nil, contentAvailable: Bool? = nil, mutableContent: Bool? = nil,
            targetContentID: String? = nil, interruptionLevel: InterruptionLevel? = nil,
            relevanceScore: Double? = nil, filterCriteria: String? = nil
        ) {
            self.alert = alert
            self.badge = badge
            self.sound = sound
            self.threadID = threadID
            self.category = category
            self.contentAvailable = contentAvailable
            self.mutableContent = mutableContent
            self.targetContentID = targetContentID
            self.interruptionLevel = interruptionLevel
            self.relevanceScore = relevanceScore
            self.filterCriteria = filterCriteria
        }

        enum CodingKeys: String, CodingKey {
            case alert, badge, sound, category, timestamp, event, attributes
            case threadID = "thread-id"
            case contentAvailable = "content-available"
            case mutableContent = "mutable-content"
            case targetContentID = "target-content-id"
            case interruptionLevel = "interruption-level"
            case relevanceScore = "relevance-score"
            case filterCriteria = "filter-criteria"
            case contentState = "content-state"
            case staleDate = "stale-date"
            case dismissalDate = "dismissal-date"
            case attributesType = "attributes-type"
            case contentChanged = "content-changed"
        }

        /// Encodes the keys that are set; booleans as Apple's `1`.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(alert, forKey: .alert)
            try c.encodeIfPresent(badge, forKey: .badge)
            try c.encodeIfPresent(sound, forKey: .sound)
            try c.encodeIfPresent(threadID, forKey: .threadID)
            try c.encodeIfPresent(category, forKey: .category)
            if contentAvailable == true { try c.encode(1, forKey: .contentAvailable) }
            if mutableContent == true { try c.encode(1, forKey: .mutableContent) }
            try c.encodeIfPresent(targetContentID, forKey: .targetContentID)
            try c.encodeIfPresent(interruptionLevel, forKey: .interruptionLevel)
            try c.encodeIfPresent(relevanceScore, forKey: .relevanceScore)
            try c.encodeIfPresent(filterCriteria, forKey: .filterCriteria)
            try c.encodeIfPresent(timestamp, forKey: .timestamp)
            try c.encodeIfPresent(event, forKey: .event)
            try c.encodeIfPresent(contentState, forKey: .contentState)
            try c.encodeIfPresent(staleDate, forKey: .staleDate)
            try c.encodeIfPresent(dismissalDate, forKey: .dismissalDate)
            try c.encodeIfPresent(attributesType, forKey: .attributesType)
            try c.encodeIfPresent(attributes, forKey: .attributes)
            if contentChanged == true { try c.encode(true, forKey: .contentChanged) }
        }
    }

    /// `alert`: a plain string, or a dictionary of title, body and localization keys.
    public enum Alert: Sendable, Hashable, Encodable {
        /// The alert's body text.
        case text(String)
        /// The full alert dictionary.
        case fields(AlertFields)

        /// Encodes a string or a dictionary.
        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .text(let s):
                var c = encoder.singleValueContainer()
                try c.encode(s)
            case .fields(let f): try f.encode(to: encoder)
            }
        }
    }

    /// The keys of an alert dictionary.
    public struct AlertFields: Sendable, Hashable, Encodable {
        /// `title`.
        public var title: String?
        /// `subtitle`.
        public var subtitle: String?
        /// `body`.
        public var body: String?
        /// `launch-image`.
        public var launchImage: String?
        /// `title-loc-key`.
        public var titleLocKey: String?
        /// `title-loc-args`.
        public var titleLocArgs: [String]?
        /// `subtitle-loc-key`.
        public var subtitleLocKey: String?
        /// `subtitle-loc-args`.
        public var subtitleLocArgs: [String]?
        /// `loc-key`.
        public var locKey: String?
        /// `loc-args`.
        public var locArgs: [String]?

        /// An alert dictionary with these keys.
        public init(
            title: String? = nil, subtitle: String? = nil, body: String? = nil, launchImage: String? = nil,
            titleLocKey: String? = nil, titleLocArgs: [String]? = nil, subtitleLocKey: String? = nil,
            subtitleLocArgs: [String]? = nil, locKey: String? = nil, locArgs: [String]? = nil
        ) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
            self.launchImage = launchImage
            self.titleLocKey = titleLocKey
            self.titleLocArgs = titleLocArgs
            self.subtitleLocKey = subtitleLocKey
            self.subtitleLocArgs = subtitleLocArgs
            self.locKey = locKey
            self.locArgs = locArgs
        }

        enum CodingKeys: String, CodingKey {
            case title, subtitle, body
            case launchImage = "launch-image"
            case titleLocKey = "title-loc-key"
            case titleLocArgs = "title-loc-args"
            case subtitleLocKey = "subtitle-loc-key"
            case subtitleLocArgs = "subtitle-loc-args"
            case locKey = "loc-key"
            case locArgs = "loc-args"
        }
    }

    /// `sound`: a file name, or the critical-alert dictionary.
    public enum Sound: Sendable, Hashable, Encodable {
        /// A sound file name (`default` for the system sound).
        case named(String)
        /// `{critical, name, volume}`; volume from 0 to 1.
        case critical(name: String, volume: Double)

        enum CodingKeys: String, CodingKey { case critical, name, volume }

        /// Encodes a string or a dictionary.
        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .named(let s):
                var c = encoder.singleValueContainer()
                try c.encode(s)
            case .critical(let name, let volume):
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(1, forKey: .critical)
                try c.encode(name, forKey: .name)
                try c.encode(volume, forKey: .volume)
            }
        }
    }

    /// `interruption-level`.
    public enum InterruptionLevel: String, Sendable, Hashable, Codable, CaseIterable {
        case passive, active, critical
        case timeSensitive = "time-sensitive"
    }

    /// Live Activity `event`.
    public enum LiveActivityEvent: String, Sendable, Hashable, Encodable {
        case start, update, end
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Encodes `aps` and the custom keys side by side.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(aps, forKey: Key(stringValue: "aps"))
        for (key, value) in custom {
            guard key != "aps" else {
                throw EncodingError.invalidValue(
                    value,
                    .init(codingPath: [], debugDescription: "custom keys go beside aps, never named aps")
                )
            }
            try c.encode(value, forKey: Key(stringValue: key))
        }
    }

    /// The payload as compact JSON bytes, with keys sorted so that equal payloads encode equally.
    public func jsonBytes() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self))
    }
}

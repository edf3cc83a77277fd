/// The value of the `apns-push-type` header, with the topic suffix Apple requires for it.
public enum APNsPushType: String, Sendable, Hashable, CaseIterable, Codable {
    /// A notification that shows an alert, plays a sound or badges the icon.
    case alert
    /// A silent `content-available` push that wakes the app in the background.
    case background
    /// A location query for a Location Push Service extension.
    case location
    /// A VoIP call (PushKit).
    case voip
    /// A watchOS complication update.
    case complication
    /// A File Provider change signal.
    case fileprovider
    /// A mobile-device-management wake-up; the topic is the MDM certificate's topic.
    case mdm
    /// A Live Activity start, update or end.
    case liveactivity
    /// A Push to Talk update.
    case pushtotalk
    /// A widget reload (`content-changed`).
    case widgets
    /// A control-center control reload.
    case controls

    /// The suffix appended to the bundle id to form `apns-topic`.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// The `apns-topic` for an app's bundle id (for `mdm`, the MDM topic itself).
    public func topic(forBundleID bundleID: String) -> String {
        bundleID + self.topicSuffix
    }

    /// The largest payload APNs accepts for this push type, in bytes.
    public var maximumPayloadSize: Int {
        self == .voip ? 5120 : 4096
    }

    /// The priority used when a notification does not set one.
    public var defaultPriority: APNsPriority {
        switch self {
        case .background, .fileprovider, .widgets, .controls: .powerAware
        default: .immediate
        }
    }
}

/// The value of the `apns-priority` header.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable, Codable {
    /// 10: deliver at once (not allowed for `background`).
    case immediate = 10
    /// 5: deliver with the device's power in mind.
    case powerAware = 5
    /// 1: lowest; power considerations first.
    case low = 1
}

/// The deployment environment of an APNs endpoint and of the device tokens issued by it.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com`: App Store and TestFlight builds.
    case production
    /// `api.sandbox.push.apple.com`: builds signed for development.
    case development

    /// Apple's host name for this environment.
    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .development: "api.sandbox.push.apple.com"
        }
    }
}

/// Where a pool connects: Apple's host for an environment (port 443 or 2197), or any host and port.
public struct APNsEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address.
    public var host: String
    /// The TCP port.
    public var port: Int

    /// An endpoint at an explicit host and port (the simulator, a proxy).
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Apple's endpoint for `environment`, on port 443 or the firewall-friendly 2197.
    public static func apple(_ environment: APNsEnvironment, alternatePort: Bool = false) -> APNsEndpoint {
        APNsEndpoint(host: environment.host, port: alternatePort ? 2197 : 443)
    }

    /// Parses `HOST:PORT` (or `[v6]:PORT`); nil when it is not of that form. The rules of the relay's `HostAndPort`,
    /// which this module, depending on none of the relay's, cannot use: an IPv6 address stands in brackets.
    public init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            return nil
        }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    /// `host:port`.
    public var description: String { "\(host):\(port)" }
}

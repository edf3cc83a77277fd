import APNs

/// A device token whose first eight hex digits choose the simulator's answer, when
/// ``APNsSimulatorFaults/scriptedTokens`` is on: how a backend's tests meet each outcome through a relay on the
/// simulator (Protocol/README.md, "Testing your client"). Any other token is answered as usual (200).
struct ScriptedToken: Sendable, Hashable {
    /// The first eight hex digits of each scripted token and the APNs reason it is answered with (eight, so that a
    /// random token is scripted once in about 800 million).
    static let scripts: [(prefix: String, reason: APNsReason)] = [
        ("deaddead", .unregistered),  // 410, Apple's timestamp now: the relay records dead_token and deactivates it
        ("bad0bad0", .badDeviceToken),  // 400: dead_token too
        ("04130413", .payloadTooLarge),  // 413: the notification is refused, recorded rejected
        ("04290429", .tooManyRequests),  // 429, every time: retried, then held (waiting) until it expires
        ("05030503", .serviceUnavailable),  // 503, every time: the same
    ]

    /// The reason the token is answered with.
    let reason: APNsReason

    /// The script of `token` (hex, either case), or `nil` for a token answered as usual.
    init?(_ token: String) {
        let prefix = token.prefix(8).lowercased()
        guard let script = Self.scripts.first(where: { $0.prefix == prefix }) else { return nil }
        reason = script.reason
    }
}

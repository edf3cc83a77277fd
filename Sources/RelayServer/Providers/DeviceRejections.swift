import Foundation

/// The notifications a destination's provider refused for one device each, by reason, since the relay started:
/// FCM's `SENDER_ID_MISMATCH` (a token of another Firebase project) and `THIRD_PARTY_AUTH_ERROR` (the APNs
/// credential at Firebase refused), and messages refused for their content. Each is recorded for its device and
/// never retried, and none stops the destination, since a stray token must not stop a tenant's delivery; a
/// destination where they keep coming is misconfigured all the same, so the status view and readiness name them.
struct DeviceRejections: Sendable, Hashable {
    /// The refusals of one reason.
    struct Reason: Sendable, Hashable {
        /// How many notifications.
        var count: Int
        /// When the first was recorded.
        var since: Date
        /// When the last was recorded.
        var last: Date
    }

    /// The most reasons kept per destination: a refusal's reason is its provider's code, so there are few.
    static let maximumReasons = 16

    /// The refusals by reason.
    private(set) var reasons: [String: Reason] = [:]

    /// No refusal yet.
    init() {}

    /// Counts `count` refusals of `reason` (the provider's code: what follows a `:` is left out) at `now`; a reason
    /// beyond ``maximumReasons`` is counted as `other`.
    mutating func record(_ reason: String, count: Int, at now: Date) {
        var code = String(reason.prefix { $0 != ":" })
        if reasons[code] == nil, reasons.count >= Self.maximumReasons - 1 { code = "other" }
        if var known = reasons[code] {
            known.count += count
            known.last = now
            reasons[code] = known
        } else {
            reasons[code] = Reason(count: count, since: now, last: now)
        }
    }

    /// What an operator does about refusals of `reason`, in a sentence.
    static func fix(for reason: String) -> String {
        switch reason {
        case "SENDER_ID_MISMATCH":
            "the devices' tokens belong to another Firebase project than the tenant file's fcm.project_id: check "
                + "the app's Firebase configuration (google-services.json) against it"
        case "THIRD_PARTY_AUTH_ERROR":
            "Apple refuses the APNs credential the Firebase project holds for its iOS app: upload a valid APNs key "
                + "in the Firebase console"
        default:
            "the provider refuses these messages: check the tenant file's mapping of the notification type"
        }
    }

    /// The refusals by reason, sorted by reason: all of them, or those whose last is at most `window` before `now`.
    func recent(within window: TimeInterval = .infinity, now: Date = Date()) -> [RelayStatus.Rejected] {
        reasons.filter { now.timeIntervalSince($0.value.last) <= window }.sorted { $0.key < $1.key }.map {
            RelayStatus.Rejected(reason: $0.key, count: $0.value.count, since: $0.value.since, last: $0.value.last)
        }
    }
}

import APNs
import FCM
import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

/// A job's notification rendered for FCM HTTP v1 once per job, as its type's FCM mapping
/// (``RelayStore/TenantConfiguration/FCMMapping``) says: the message every token of the job is sent, whose TTL and
/// `apns-expiration` follow each request's expiration (``message(expiringAt:now:)``, ``body(to:expiration:now:)``).
///
/// The `notification` is the send's `alert.title` and `alert.body`. The other alert fields have no FCM equivalent
/// here: the subtitle, the localization keys and arguments (FCM's own `*_loc_key` name Android string resources,
/// not the iOS app's), the launch image, and the `aps` fields (badge, sound, thread id, ...) outside the optional
/// `apns` block. The data is the mapping's templates, filled from the send's template values, beside the send's
/// `custom_json` top-level values as strings (FCM takes nothing else): a key both give takes the mapping's value.
struct FCMRendering: ProviderRendering {
    /// The message, with the TTL the mapping fixes, if it fixes one; no `apns-expiration` yet.
    var message: FCMMessage
    /// Whether Android's TTL is the request's time left (the mapping fixes none).
    var ttlFollowsExpiration: Bool
    /// The job's encoded bodies, shared by the copies of the rendering its pages hold.
    let templates = FCMBodyTemplates()

    /// `request` rendered for FCM with `type`'s mapping `fcm` and `plan`'s neutral fields (collapse id, and with
    /// `apns`, the `aps` payload's thread id, category and interruption level).
    ///
    /// - Throws: `INVALID_ARGUMENT` naming the field for a priority that is not 10, 5 or 1, a `custom_json` that is no
    ///   JSON object or sets a data key FCM reserves, a template value the mapping's templates need, a
    ///   notification-only message with neither title nor body, or a message FCM would refuse
    ///   (``FCM/FCMMessage/problem()``: its payload over 4 KiB).
    init(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType,
        fcm: TenantConfiguration.FCMMapping
    ) throws(ProtocolError) {
        let priority = request.hasPriority ? Int(request.priority) : type.priority
        guard [10, 5, 1].contains(priority) else {
            throw .invalidArgument("send.priority", "priority is 10, 5 or 1, not \(priority)")
        }
        var message = FCMMessage()
        if fcm.message.hasNotification {
            let title = request.hasAlert ? request.alert.title.nonEmpty : nil
            let body = request.hasAlert ? request.alert.body.nonEmpty : nil
            if title != nil || body != nil {
                message.notification = .init(title: title, body: body)
            } else if !fcm.message.hasData {
                throw .invalidArgument(
                    "send.alert",
                    "an FCM notification shows alert.title and alert.body, and this send has neither (localization "
                        + "keys have no FCM equivalent)")
            }
        }
        if fcm.message.hasData {
            message.data = try Self.data(request, mapping: fcm)
        }
        let values = request.templateValues
        var android = FCMMessage.Android(
            priority: .init(fcm.androidPriority ?? (priority == 10 ? .high : .normal)), ttlSeconds: fcm.ttl,
            channelID: fcm.channelID, clickAction: fcm.clickAction)
        android.collapseKey =
            try fcm.collapseKey.map { (template) throws(ProtocolError) in
                try SendPlan.fill(template, values: values, filling: "fcm.collapse_key")
            } ?? plan.collapseID
        android.tag = try fcm.tag.map { (template) throws(ProtocolError) in
            try SendPlan.fill(template, values: values, filling: "fcm.tag")
        }
        message.android = android
        if fcm.apns {
            message.apns = try Self.apns(request, plan: plan, type: type, priority: priority)
        }
        ttlFollowsExpiration = fcm.ttl == nil
        self.message = message
        // Checked as a request sent now would be.
        let now = Date()
        if let problem = self.message(expiringAt: plan.expiration(now: now), now: now).problem() {
            throw .invalidArgument("send", "the notification is not valid for FCM: \(problem)")
        }
    }

    /// The message of a request whose expiration is `expiration` (Unix seconds; `nil` for none, 0 for "now or
    /// never"), sent at `now`: Android's TTL is the time left (0 to 4 weeks; unless the mapping fixes it), and the
    /// `apns` block's `apns-expiration` is `expiration`.
    func message(expiringAt expiration: Int64?, now: Date) -> FCMMessage {
        var message = self.message
        guard let expiration else { return message }
        if let ttl = ttlLeft(expiringAt: expiration, now: now) { message.android?.ttlSeconds = ttl }
        message.apns?.headers["apns-expiration"] = String(expiration)
        return message
    }

    /// Android's TTL of a request expiring at `expiration` sent at `now` when the mapping fixes none: the time left,
    /// 0 to 4 weeks.
    private func ttlLeft(expiringAt expiration: Int64?, now: Date) -> Int? {
        guard ttlFollowsExpiration, let expiration else { return nil }
        let left = expiration == 0 ? 0 : expiration - Int64(now.timeIntervalSince1970)
        return Int(min(max(left, 0), Int64(FCMMessage.maximumTTLSeconds)))
    }

    /// The `messages:send` request body to `token` of ``message(expiringAt:now:)``: what the engine sends. The
    /// message is encoded once per expiration and TTL for the whole job (``FCMBodyTemplates``), and its bytes are
    /// shared by every token's body, the token's inserted as the engine writes it.
    func body(to token: String, expiration: Int64?, now: Date) -> HTTP2Request.Body {
        let key = FCMBodyTemplates.Key(expiration: expiration, ttlSeconds: ttlLeft(expiringAt: expiration, now: now))
        return templates.template(for: key) { message(expiringAt: expiration, now: now) }.body(to: token)
    }

    /// The message's data: `custom_json`'s top-level values as strings, then the mapping's templates filled.
    private static func data(
        _ request: Pushrelay_V1_Send, mapping: TenantConfiguration.FCMMapping
    ) throws(ProtocolError) -> [String: String] {
        var data: [String: String] = [:]
        if !request.customJson.isEmpty {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(request.customJson.utf8))
            else {
                throw .invalidArgument("send.custom_json", "custom_json must be a JSON object")
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for (key, value) in object where mapping.data[key] == nil {
                guard !FCMMessage.isReservedDataKey(key) else {
                    throw .invalidArgument(
                        "send.custom_json", "the key \"\(key)\" is reserved by FCM and cannot be sent to FCM devices")
                }
                if case .string(let text) = value {
                    data[key] = text
                } else {
                    // Encoding a decoded JSON value cannot fail.
                    data[key] = String(decoding: (try? encoder.encode(value)) ?? Data(), as: UTF8.self)
                }
            }
        }
        for (key, template) in mapping.data {
            data[key] = try SendPlan.fill(template, values: request.templateValues, filling: "fcm.data.\(key)")
        }
        return data
    }

    /// The `apns` block: the headers a direct APNs request of the type would have (but the expiration, set per
    /// request) and the `aps` payload ``APNsRendering`` builds.
    private static func apns(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType, priority: Int
    ) throws(ProtocolError) -> FCMMessage.APNs {
        var headers = ["apns-push-type": APNsPushType(type.pushType).rawValue, "apns-priority": String(priority)]
        headers["apns-collapse-id"] = plan.collapseID
        let payload: [UInt8]
        do {
            payload = try APNsPayload(aps: APNsRendering.aps(request, plan: plan), custom: [:]).jsonBytes()
        } catch {
            throw .invalidArgument("send", "the apns payload cannot be encoded: \(error)")
        }
        return FCMMessage.APNs(headers: headers, payload: Data(payload))
    }
}

extension FCMMessage.Android.Priority {
    /// The message's priority for a tenant file's `android_priority`.
    fileprivate init(_ priority: TenantConfiguration.FCMMapping.AndroidPriority) {
        switch priority {
        case .normal: self = .normal
        case .high: self = .high
        }
    }
}

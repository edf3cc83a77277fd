import APNs
import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

/// A job's notification rendered for APNs: the headers every request shares and the payload, encoded once.
struct APNsRendering: ProviderRendering {
    var bundleID: String
    var pushType: APNsPushType
    var priority: APNsPriority
    var collapseID: String?
    var payload: ByteBuffer

    /// The request to `token`, expiring at `expiration`.
    func notification(to token: String, expiration: Int64?) -> APNsNotification {
        APNsNotification(
            deviceToken: token, bundleID: bundleID, pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseID, payload: payload)
    }

    /// `request` rendered for APNs with `type`'s headers and `plan`'s neutral fields (thread id, category and
    /// interruption level after templates and defaults).
    ///
    /// - Throws: `INVALID_ARGUMENT` for a priority APNs does not know, a `custom_json` that is no JSON object or
    ///   sets `aps`, or a notification APNs would refuse (its payload too large for the push type, ...).
    init(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) {
        bundleID = type.bundleID
        pushType = APNsPushType(type.pushType)
        let priorityValue = request.hasPriority ? Int(request.priority) : type.priority
        guard let priority = APNsPriority(rawValue: priorityValue) else {
            throw .invalidArgument("send.priority", "priority is 10, 5 or 1, not \(priorityValue)")
        }
        self.priority = priority
        collapseID = plan.collapseID
        payload = ByteBuffer(bytes: try Self.payload(aps: Self.aps(request, plan: plan), request))
        do {
            try notification(to: String(repeating: "0", count: 64), expiration: plan.absoluteExpiration).validate()
        } catch {
            throw .invalidArgument("send", "the notification is not valid for APNs: \(error)")
        }
    }

    /// The `aps` dictionary of `request` with `plan`'s neutral fields: the APNs payload's, and that of FCM's `apns`
    /// block (``FCMRendering``).
    static func aps(_ request: Pushrelay_V1_Send, plan: SendPlan) -> APNsPayload.APS {
        var aps = APNsPayload.APS()
        if request.hasAlert {
            let alert = request.alert
            aps.alert = .fields(
                .init(
                    title: alert.title.nonEmpty, subtitle: alert.subtitle.nonEmpty, body: alert.body.nonEmpty,
                    launchImage: alert.launchImage.nonEmpty, titleLocKey: alert.titleLocKey.nonEmpty,
                    titleLocArgs: alert.titleLocArgs.nonEmpty, subtitleLocKey: alert.subtitleLocKey.nonEmpty,
                    subtitleLocArgs: alert.subtitleLocArgs.nonEmpty, locKey: alert.locKey.nonEmpty,
                    locArgs: alert.locArgs.nonEmpty
                )
            )
        }
        if request.hasBadge { aps.badge = Int(request.badge) }
        if !request.sound.isEmpty { aps.sound = .named(request.sound) }
        aps.threadID = plan.threadID
        aps.category = plan.category
        if request.contentAvailable { aps.contentAvailable = true }
        if request.mutableContent { aps.mutableContent = true }
        aps.interruptionLevel = plan.interruptionLevel.map(APNsPayload.InterruptionLevel.init)
        if request.hasRelevanceScore { aps.relevanceScore = request.relevanceScore }
        return aps
    }

    private static func payload(aps: APNsPayload.APS, _ request: Pushrelay_V1_Send) throws(ProtocolError) -> [UInt8] {
        var custom: [String: JSONValue] = [:]
        if !request.customJson.isEmpty {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(request.customJson.utf8))
            else {
                throw .invalidArgument("send.custom_json", "custom_json must be a JSON object")
            }
            guard object["aps"] == nil else {
                throw .invalidArgument("send.custom_json", "custom_json may not set \"aps\"; use the send's fields")
            }
            custom = object
        }
        do {
            return try APNsPayload(aps: aps, custom: custom).jsonBytes()
        } catch {
            throw .invalidArgument("send", "the payload cannot be encoded: \(error)")
        }
    }
}

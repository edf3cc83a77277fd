import Foundation
import Metrics
import PushRelayProtocol
import RelayStore

/// The relay's metrics, emitted through swift-metrics: whatever backend `MetricsSystem` was bootstrapped
/// with (Prometheus in `serve`, the no-op one in tests) receives them.
enum RelayMetrics {
    static let requestsLabel = "pushrelay_requests_total"
    static let notificationsLabel = "pushrelay_notifications_total"
    static let apnsLatencyLabel = "pushrelay_apns_latency_seconds"
    static let poolConnectionsLabel = "pushrelay_pool_connections"
    static let poolStreamsLabel = "pushrelay_pool_streams_in_flight"
    static let sendWindowLabel = "pushrelay_fanout_send_window"
    static let pagesDueLabel = "pushrelay_pages_due"
    static let scheduledLagLabel = "pushrelay_scheduled_job_lag_seconds"
    static let writeBatchLabel = "pushrelay_delivery_write_batch_size"

    /// Counts one answered request of `kind`: `ok`, or the wire name of the error it was refused with.
    /// Frames refused before reaching the service count too; one too broken to say its kind (`nil`) is
    /// counted under `unknown`.
    static func request(_ kind: FrameKind?, error: ProtocolError?) {
        Counter(
            label: requestsLabel,
            dimensions: [
                ("method", kind?.metricName ?? "unknown"), ("outcome", error.map { $0.code.name } ?? "ok"),
            ]
        ).increment()
    }

    /// Counts delivery rows as they are made, skips included.
    /// A fan-out's rows come in runs of the same tenant, outcome and reason: each run is counted as one.
    static func notifications(_ records: some Sequence<DeliveryRecord>) {
        var counts: [NotificationCountKey: Int] = [:]
        var run: (key: NotificationCountKey, count: Int)?
        for record in records {
            let key = NotificationCountKey(tenant: record.tenantID, outcome: record.outcome, reason: record.reason)
            if let current = run, current.key == key {
                run?.count += 1
                continue
            }
            if let run { counts[run.key, default: 0] += run.count }
            run = (key, 1)
        }
        if let run { counts[run.key, default: 0] += run.count }
        for (key, count) in counts {
            Counter(
                label: notificationsLabel,
                dimensions: [
                    ("tenant", key.tenant), ("outcome", key.outcome.rawValue), ("reason", reasonLabel(key.reason)),
                ]
            ).increment(by: count)
        }
    }

    /// Records the fan-out's window: the sends the process keeps in flight now.
    static func sendWindow(_ size: Int) {
        Gauge(label: sendWindowLabel).record(size)
    }

    /// Records the time APNs took to answer each of a batch of notifications.
    static func apnsLatencies(_ durations: [Duration]) {
        guard !durations.isEmpty else { return }
        let timer = Metrics.Timer(label: apnsLatencyLabel)
        for duration in durations {
            let (seconds, attoseconds) = duration.components
            timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
    }

    /// Records the size of one batch of delivery rows written by the fan-out.
    static func writeBatch(_ size: Int) {
        Recorder(label: writeBatchLabel, aggregate: true).record(size)
    }

    /// A bounded `reason` label: APNs' reason names and the relay's skip reasons are kept, anything else
    /// (transport failures described in prose) is `other`; no reason is `none`.
    static func reasonLabel(_ reason: String?) -> String {
        guard let reason, !reason.isEmpty else { return "none" }
        guard reason.utf8.count <= 40, reason.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "_") }) else {
            return "other"
        }
        return reason
    }
}

extension FrameKind {
    /// The request kind's name in metrics: `send`, `register_device`, ...; `0x....` for unknown kinds.
    var metricName: String {
        switch self {
        case .hello: "hello"
        case .ping: "ping"
        case .goodbye: "goodbye"
        case .registerDevice: "register_device"
        case .unregisterDevice: "unregister_device"
        case .listDevices: "list_devices"
        case .send: "send"
        case .jobStatus: "job_status"
        case .cancelJob: "cancel_job"
        case .queryDeliveries: "query_deliveries"
        case .listNotificationTypes: "list_notification_types"
        case .setPreferences: "set_preferences"
        case .getPreferences: "get_preferences"
        case .setMute: "set_mute"
        case .clearMute: "clear_mute"
        case .listMutes: "list_mutes"
        case .setPresence: "set_presence"
        case .subscribeResults: "subscribe_results"
        case .unsubscribeResults: "unsubscribe_results"
        default: "unknown"
        }
    }
}

/// What ``RelayMetrics/notifications(_:)`` counts a delivery row under, before its reason becomes a label.
private struct NotificationCountKey: Hashable {
    var tenant: String
    var outcome: DeliveryOutcome
    var reason: String?
}

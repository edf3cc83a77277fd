import Foundation
import Metrics
import NIOCore
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
    static let holdsLabel = "pushrelay_notification_holds_total"
    static let heldLabel = "pushrelay_notifications_held"
    static let heldOldestLabel = "pushrelay_notifications_held_oldest_seconds"
    static let providerFaultLabel = "pushrelay_provider_fault"
    static let sealedKeysUnreadableLabel = "pushrelay_signing_keys_unreadable"
    static let sendsRefusedLabel = "pushrelay_sends_refused_total"

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

    /// Counts devices held for their provider (each time: a device held over several rounds counts each round), by
    /// tenant and reason.
    static func held(tenant: String, reason: String, count: Int) {
        Counter(label: holdsLabel, dimensions: [("tenant", tenant), ("reason", reasonLabel(reason))])
            .increment(by: count)
    }

    /// Records the devices held now by tenant, environment and reason, and each of `tenants`' oldest hold (0 when
    /// none waits); label sets seen before and gone now are set to 0 (`previous` is what the last call recorded;
    /// returns this call's).
    static func heldNow(
        _ summary: [HeldDeliveries], previous: Set<[String]>, tenants: [String], now: Date
    ) -> Set<[String]> {
        var seen: Set<[String]> = []
        var oldest: [String: Date] = [:]
        for row in summary {
            let labels = [row.tenantID, row.environment, reasonLabel(row.reason)]
            seen.insert(labels)
            Gauge(
                label: heldLabel,
                dimensions: [("tenant", labels[0]), ("environment", labels[1]), ("reason", labels[2])]
            )
            .record(row.devices)
            oldest[row.tenantID] = min(oldest[row.tenantID] ?? row.oldestSince, row.oldestSince)
        }
        for labels in previous.subtracting(seen) {
            Gauge(
                label: heldLabel,
                dimensions: [("tenant", labels[0]), ("environment", labels[1]), ("reason", labels[2])]
            )
            .record(0)
        }
        for tenant in Set(previous.map { $0[0] }).union(oldest.keys).union(tenants) {
            let age = oldest[tenant].map { max(0, now.timeIntervalSince($0)) } ?? 0
            Gauge(label: heldOldestLabel, dimensions: [("tenant", tenant)]).record(age)
        }
        return seen
    }

    /// Makes the per-tenant series of faults and refusals exist at 0 for every tenant, so that alerts and `rate()`
    /// see them before the first fault: `pushrelay_sends_refused_total` for each refusal code and
    /// `pushrelay_provider_fault` with reason `none` for each environment.
    static func initialise(tenants: [TenantRecord]) {
        for tenant in tenants {
            for code in [Pushrelay_V1_ErrorCode.noProviderKey, .providerKeyUnreadable] {
                Counter(label: sendsRefusedLabel, dimensions: [("tenant", tenant.id), ("reason", code.name)])
                    .increment(by: 0)
            }
            var destinations = Set(tenant.configuration.bundleIDs.values.flatMap(\.environments).map(\.rawValue))
            if tenant.configuration.fcm != nil { destinations.insert(Destination(provider: .fcm).storedName) }
            for destination in destinations {
                providerFault(tenant: tenant.id, environment: destination, reason: "none", on: false)
            }
        }
    }

    /// Counts a SEND of `tenant` refused because no usable key could serve it, by the error's code.
    static func sendRefused(tenant: String, code: Pushrelay_V1_ErrorCode) {
        Counter(label: sendsRefusedLabel, dimensions: [("tenant", tenant), ("reason", code.name)]).increment()
    }

    /// Records whether `tenant`'s destination `environment` is faulted for `reason`.
    static func providerFault(tenant: String, environment: String, reason: String, on: Bool) {
        Gauge(
            label: providerFaultLabel,
            dimensions: [("tenant", tenant), ("environment", environment), ("reason", reasonLabel(reason))]
        ).record(on ? 1 : 0)
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
            timer.recordNanoseconds(TimeAmount(duration).nanoseconds)
        }
    }

    /// Records the size of one batch of delivery rows written by the fan-out.
    static func writeBatch(_ size: Int) {
        Recorder(label: writeBatchLabel, aggregate: true).record(size)
    }

    /// A bounded `reason` label: APNs' reason names, the relay's skip and hold reasons (`connect_failed`,
    /// `no_signing_key`, ...) are kept, anything else (prose) is `other`; no reason is `none`.
    static func reasonLabel(_ reason: String?) -> String {
        guard let reason, !reason.isEmpty else { return "none" }
        guard reason.utf8.count <= 40, reason.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
        else {
            return "other"
        }
        return reason
    }
}

extension FrameKind {
    /// The request kind's name in metrics and logs (``RequestKind/name``: `send`, `register_device`, ...); `unknown`
    /// for a kind that is no request kind.
    var metricName: String { RequestKind(self)?.name ?? "unknown" }
}

/// What ``RelayMetrics/notifications(_:)`` counts a delivery row under, before its reason becomes a label.
private struct NotificationCountKey: Hashable {
    var tenant: String
    var outcome: DeliveryOutcome
    var reason: String?
}

import APNs
import Foundation
import Metrics
import NIOCore
import Prometheus
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Testing

@testable import RelayServer

/// The registry swift-metrics is bootstrapped with in this test process (once: `MetricsSystem` can be
/// bootstrapped only once; tests that do not look at metrics do not mind it).
let testMetricsRegistry: PrometheusCollectorRegistry = {
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
}()

extension RelayServerSuites {
    /// The relay's metrics reach the bootstrapped backend: requests, notifications, APNs latency, write
    /// batches, the queue and pool gauges; readiness answers through the service.
    @Suite struct RelayMetricsTests {
        @Test func aSendIsCountedAndTheGaugesAreSampled() async throws {
            let registry = testMetricsRegistry
            try await RelayHarness.with { relay in
                await relay.pools.warm([(tenant: "circl", destination: .apns(.production))])
                #expect(await relay.readiness.notReadyReason() == nil)
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                _ = try await client.registerDevice(registration(user: "gone", token: RelayHarness.deadToken))
                _ = try await client.send(circlMessage(to: ["ada", "gone", "nobody"]))
                let refused = await errorCode { try await client.listDevices(userID: "") }
                #expect(refused == .invalidArgument)
                await relay.relay.metrics.sample()
                await client.close()
            }
            let text = registry.emitToString()
            #expect(text.contains(#"pushrelay_requests_total{method="send",outcome="ok"}"#))
            #expect(text.contains(#"pushrelay_requests_total{method="register_device",outcome="ok"}"#))
            #expect(text.contains(#"pushrelay_requests_total{method="list_devices",outcome="INVALID_ARGUMENT"}"#))
            #expect(text.contains(#"pushrelay_requests_total{method="hello",outcome="ok"}"#))
            #expect(
                text.contains(#"pushrelay_notifications_total{tenant="circl",outcome="delivered",reason="none"}"#))
            #expect(
                text.contains(
                    #"pushrelay_notifications_total{tenant="circl",outcome="token_dead",reason="Unregistered"}"#))
            #expect(
                text.contains(#"pushrelay_notifications_total{tenant="circl",outcome="skipped",reason="no_device"}"#))
            #expect(text.contains("pushrelay_apns_latency_seconds_count"))
            #expect(text.contains("pushrelay_delivery_write_batch_size_count"))
            #expect(text.contains("pushrelay_pages_due 0.0"))
            #expect(text.contains("pushrelay_scheduled_job_lag_seconds 0.0"))
            #expect(text.contains(#"pushrelay_pool_connections{tenant="circl",environment="production"} 1.0"#))
            #expect(text.contains(#"pushrelay_pool_streams_in_flight{tenant="circl",environment="production"} 0.0"#))
            // The Grafana dashboard and the alert rules in Ops/ ask only for series the relay exports.
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            for file in ["Ops/deploy/grafana-dashboard.json", "Ops/deploy/prometheus-alerts.yml"] {
                let ops = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                let names = Set(ops.matches(of: /pushrelay_[a-z_]+/).map { String($0.output) })
                #expect(!names.isEmpty, "\(file) names no pushrelay series")
                for name in names {
                    #expect(text.contains(name), "\(file) uses \(name), which the relay does not export")
                }
            }
        }

        @Test func framesRefusedBeforeTheServiceAreCounted() async throws {
            let registry = testMetricsRegistry
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                try await connection.send(kind: .listDevices, requestID: 5, message: Pushrelay_V1_ListDevices())
                #expect(await connection.nextError() == .helloRequired)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                try await connection.send(frameHeader(length: 0, kind: 0x0777, requestID: 6))
                #expect(await connection.nextError() == .unknownKind)
                try await connection.send(
                    frameHeader(length: 4, flags: 0x01, kind: 0x0020, requestID: 7) + [1, 2, 3, 4])
                #expect(await connection.nextError() == .badCompression)
                try await connection.send(kind: .ping, requestID: 0, message: Pushrelay_V1_Ping())
                #expect(await connection.nextError() == .invalidArgument)
                #expect(try await connection.pingWorks())
                try await connection.send(frameHeader(length: 50_000_000, kind: 0x0020, requestID: 8))
                #expect(await connection.nextError() == .frameTooLarge)
                #expect(await connection.isClosedByRelay())
                await connection.close()
            }
            let text = registry.emitToString()
            for line in [
                #"pushrelay_requests_total{method="list_devices",outcome="HELLO_REQUIRED"}"#,
                #"pushrelay_requests_total{method="unknown",outcome="UNKNOWN_KIND"}"#,
                #"pushrelay_requests_total{method="send",outcome="BAD_COMPRESSION"}"#,
                #"pushrelay_requests_total{method="ping",outcome="INVALID_ARGUMENT"}"#,
                #"pushrelay_requests_total{method="ping",outcome="ok"}"#,
                #"pushrelay_requests_total{method="unknown",outcome="FRAME_TOO_LARGE"}"#,
            ] {
                #expect(text.contains(line), "missing \(line)")
            }
        }

        @Test func notificationsAreCountedByTenantOutcomeAndReasonAcrossRuns() {
            let registry = testMetricsRegistry
            func row(_ outcome: DeliveryOutcome, _ reason: String? = nil, tenant: String = "metrics-runs")
                -> DeliveryRecord
            {
                DeliveryRecord(
                    tenantID: tenant, jobID: "job", token: "ab", outcome: outcome, reason: reason, attempt: 1,
                    sentAt: Date())
            }
            // Runs broken up and taken up again, a reason under another tenant, prose folded into `other`.
            RelayMetrics.notifications(
                [row(.delivered), row(.delivered), row(.tokenDead, "Unregistered"), row(.delivered)]
                    + [row(.delivered, tenant: "metrics-runs-2"), row(.delivered), row(.retryLater, "timed out")]
                    + [row(.retryLater, "connection reset"), row(.tokenDead, "Unregistered")])
            let text = registry.emitToString()
            for line in [
                #"pushrelay_notifications_total{tenant="metrics-runs",outcome="delivered",reason="none"} 4"#,
                #"pushrelay_notifications_total{tenant="metrics-runs",outcome="token_dead",reason="Unregistered"} 2"#,
                #"pushrelay_notifications_total{tenant="metrics-runs",outcome="retry_later",reason="other"} 2"#,
                #"pushrelay_notifications_total{tenant="metrics-runs-2",outcome="delivered",reason="none"} 1"#,
            ] {
                #expect(text.contains(line), "missing \(line)")
            }
        }

        @Test func scheduledLagCountsDueJobsNotPlannedYet() async throws {
            let registry = testMetricsRegistry
            // No fan-out worker: the accepted job stays unplanned, as when every planner is busy or down.
            try await RelayHarness.with(fanOut: false) { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                // Due an hour ago, and nobody has planned it.
                var send = circlMessage(to: ["ada"], wait: false)
                send.sendAtMs = Int64(Date().timeIntervalSince1970 * 1_000) - 3_600_000
                _ = try await client.send(send)
                await client.close()
                await relay.relay.metrics.sample()
            }
            let lag = try #require(gaugeValue(RelayMetricsTests.lagLabel, in: registry.emitToString()))
            #expect(lag >= 3_600)
            #expect(lag < 7_200)
        }

        static let lagLabel = "pushrelay_scheduled_job_lag_seconds"
    }
}

/// The value of an unlabelled gauge in a Prometheus text exposition.
private func gaugeValue(_ name: String, in text: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
}

/// A frame header with any fields, valid or not.
func frameHeader(length: UInt32, version: UInt8 = 1, flags: UInt8 = 0, kind: UInt16, requestID: UInt32) -> [UInt8] {
    var buffer = ByteBuffer()
    FrameHeader(
        length: length, version: version, flags: FrameFlags(rawValue: flags), kind: FrameKind(rawValue: kind),
        requestID: requestID
    ).write(to: &buffer)
    return Array(buffer.readableBytesView)
}

import APNs
import Foundation
import Metrics
import Prometheus
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

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
                await relay.pools.warm([(tenant: "circl", environment: .production)])
                #expect(await relay.service.notReadyReason() == nil)
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                _ = try await client.registerDevice(registration(user: "gone", token: RelayHarness.deadToken))
                _ = try await client.send(circlMessage(to: ["ada", "gone", "nobody"]))
                let refused = await errorCode { try await client.listDevices(userID: "") }
                #expect(refused == .invalidArgument)
                await relay.service.recordMetrics()
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
        }
    }
}

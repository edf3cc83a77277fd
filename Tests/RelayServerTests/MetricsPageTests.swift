import Foundation
import Prometheus
import PushRelayProtocol
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// What `GET /metrics` serves beyond the registry: help on every family, the process's own series, the
    /// build's version, and the request counters there from the start.
    @Suite struct MetricsPageTests {
        @Test func everyFamilyHasHelpAndTheProcessAndBuildSeriesFollow() throws {
            let registry = PrometheusCollectorRegistry()
            // Registered as swift-metrics registers them: without help.
            let factory = PrometheusMetricsFactory(registry: registry)
            factory.makeCounter(label: RelayMetrics.requestsLabel, dimensions: [("method", "send"), ("outcome", "ok")])
                .increment(by: 1)
            factory.makeRecorder(label: "some_library_connections", dimensions: [], aggregate: false).record(2.0)
            let text = String(decoding: MetricsPage.render(registry), as: UTF8.self)
            let lines = text.split(separator: "\n")
            for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
                let name = line.split(separator: " ")[2]
                #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "no help for \(name)")
            }
            #expect(text.contains("# HELP pushrelay_requests_total Requests answered, by kind and outcome"))
            #expect(text.contains("# HELP some_library_connections some library connections\n"))
            #expect(text.contains("pushrelay_build_info{version=\"\(RelayVersion.current)\"} 1\n"))
            let process = try #require(ProcessMetrics.current())
            #expect(process.cpuSeconds > 0)
            #expect(process.residentBytes > 0)
            #expect(process.openFDs > 0)
            #expect(process.maxFDs >= process.openFDs)
            #expect(process.startTimeSeconds > Date().timeIntervalSince1970 - 86_400 * 365)
            #expect(process.startTimeSeconds <= Date().timeIntervalSince1970)
            for name in [
                "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                "process_open_fds", "process_max_fds", "process_start_time_seconds",
            ] {
                #expect(text.contains("\n\(name) "), "no \(name)")
            }
        }

        @Test func everyRequestKindIsCountedFromZeroUnderOk() {
            let registry = testMetricsRegistry  // bootstraps swift-metrics on first use
            RelayMetrics.startKnownSeries()
            let text = registry.emitToString()
            for kind in FrameKind.requests {
                #expect(text.contains("pushrelay_requests_total{method=\"\(kind.metricName)\",outcome=\"ok\"} "))
            }
        }
    }
}

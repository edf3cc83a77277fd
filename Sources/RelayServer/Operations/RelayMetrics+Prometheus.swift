import Metrics
package import Prometheus

/// The relay's metrics exported in Prometheus' format.
package enum PrometheusExport {
    /// Makes a Prometheus registry the backend of swift-metrics, with buckets fitting the relay's histograms, and
    /// returns it (for the operator port's `/metrics`), with the series of known labels started at zero. Call it once per process: swift-metrics can be
    /// bootstrapped only once.
    package static func bootstrap() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[RelayMetrics.apnsLatencyLabel] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10),
        ]
        factory.valueHistogramBuckets[RelayMetrics.writeBatchLabel] = [
            1, 2, 5, 10, 25, 50, 100, 128, 250, 500, 1_000,
        ]
        MetricsSystem.bootstrap(factory)
        RelayMetrics.startKnownSeries()
        return registry
    }
}

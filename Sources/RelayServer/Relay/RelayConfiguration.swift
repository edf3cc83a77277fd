import APNs
package import NIOCore
package import Prometheus
package import RelayStore

extension Relay {
    /// What a ``Relay`` is built from: the listener, where APNs is, the master key, the request limits, the
    /// operator port and which background parts run. `pushrelay serve` makes one from its settings; the tests
    /// make theirs.
    package struct Configuration: Sendable {
        /// The wire protocol's listener: address, limits, timeouts, TLS.
        package var server: RelayListenerConfiguration
        /// Where the APNs pools connect, and with how many connections.
        package var target: APNsTarget
        /// Where the FCM pools connect, and with how many connections.
        package var fcmTarget = FCMTarget()
        /// The key that unseals stored signing keys; `nil`: stored keys cannot be used.
        package var masterKey: MasterKey?
        /// Requests per second each credential may make.
        package var requestsPerSecond: Double = 1_000
        /// Requests a credential may make in a burst above that rate.
        package var requestBurst: Int = 2_000
        /// Database statements one tenant's requests run at once; more wait their turn.
        package var statementsPerTenant: Int = 4
        /// Days of delivery rows kept by the hourly maintenance.
        package var retentionDays: Int = 30
        /// Where the operators' HTTP port (`/metrics`, `/healthz`, `/readyz`) listens and the registry its
        /// `/metrics` shows; `nil`: not opened.
        package var operatorPort: (host: String, port: Int, registry: PrometheusCollectorRegistry)?
        /// Whether the pools of every enabled tenant's environments are built at start, so the first send finds
        /// them warm.
        package var warmsPools = true
        /// Whether this process runs the fan-out worker (without it, accepted jobs wait for another relay).
        package var runsFanOut = true
        /// Whether the background parts run: maintenance, the node heartbeat, the metrics sampler and the
        /// key-change follower.
        package var runsBackgroundParts = true
        /// How long the pools let requests in flight finish at shutdown.
        package var poolShutdownGrace: TimeAmount = .seconds(5)
        /// How often maintenance runs (partitions made and dropped, old rows removed).
        package var maintenanceInterval: Duration = .seconds(3_600)
        /// How often pool gauges are sampled.
        package var metricsInterval: Duration = .seconds(5)
        /// The fan-out's page sizes, sends in flight and leases.
        package var fanOutTuning: FanOutTuning = .standard
        /// Push services beside APNs (the tests' recording provider); one of APNs' provider replaces APNs.
        var additionalServices: [any PushService] = []

        /// A configuration with the listener `server` sending to `target`, and the defaults for the rest.
        package init(server: RelayListenerConfiguration, target: APNsTarget, masterKey: MasterKey?) {
            self.server = server
            self.target = target
            self.masterKey = masterKey
        }
    }
}

import Foundation
import Logging
import Metrics
import RelayStore
import Synchronization

/// The metrics sampler, a part of the relay: every few seconds, the gauges that are states rather than events (the
/// fan-out queue, held notifications, the pools, configuration faults, unreadable keys).
package final class MetricsSampler: Sendable {
    private let store: RelayStore
    private let pools: PoolRegistry
    private let logger: Logger
    /// The label sets of `pushrelay_notifications_held` recorded last (set to 0 when they are gone).
    private let heldGaugeLabels = Mutex<Set<[String]>>([])

    /// A sampler of `store`'s queue and `pools`.
    init(store: RelayStore, pools: PoolRegistry, logger: Logger) {
        self.store = store
        self.pools = pools
        self.logger = logger
    }

    /// Samples the fan-out queue and the pools into their gauges: `pushrelay_pages_due`,
    /// `pushrelay_scheduled_job_lag_seconds` (how late the oldest due work nobody holds is: a page, or a
    /// job not planned yet), `pushrelay_notifications_held` and `pushrelay_notifications_held_oldest_seconds`,
    /// `pushrelay_pool_connections`, `pushrelay_pool_streams_in_flight`, `pushrelay_provider_fault` and
    /// `pushrelay_signing_keys_unreadable`. A failed query leaves the queue gauges as they were.
    package func sample() async {
        do {
            let (due, oldestPage) = try await store.pagesDue()
            let oldestJob = try await store.oldestUnclaimedDueJob()
            Gauge(label: RelayMetrics.pagesDueLabel).record(due)
            let oldest = [oldestPage, oldestJob].compactMap(\.self).min()
            Gauge(label: RelayMetrics.scheduledLagLabel).record(
                oldest.map { max(0, Date().timeIntervalSince($0)) } ?? 0)
            let held = try await store.heldDeliveries()
            let tenants = try await store.listTenants()
            heldGaugeLabels.withLock { labels in
                labels = RelayMetrics.heldNow(
                    held, previous: labels, tenants: tenants.map(\.id), now: Date())
            }
            RelayMetrics.initialise(tenants: tenants)
        } catch {
            logger.debug("queue metrics not sampled", metadata: ["error": "\(error)"])
        }
        await pools.recordMetrics()
    }

    /// Samples the metrics every `interval` until the calling task is cancelled.
    package func run(every interval: Duration) async {
        while !Task.isCancelled {
            await sample()
            try? await Task.sleep(for: interval)
        }
    }
}

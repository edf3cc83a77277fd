import Foundation
import Metrics
import RelayStore

extension RelayService {
    /// Samples the fan-out queue and the pools into their gauges: `pushrelay_pages_due`,
    /// `pushrelay_scheduled_job_lag_seconds` (how late the oldest due work nobody holds is: a page, or a
    /// job not planned yet), `pushrelay_pool_connections` and `pushrelay_pool_streams_in_flight`. A failed
    /// query leaves the queue gauges as they were.
    public func recordMetrics() async {
        do {
            let (due, oldestPage) = try await store.pagesDue()
            let oldestJob = try await store.oldestUnclaimedDueJob()
            Gauge(label: RelayMetrics.pagesDueLabel).record(due)
            let oldest = [oldestPage, oldestJob].compactMap(\.self).min()
            Gauge(label: RelayMetrics.scheduledLagLabel).record(
                oldest.map { max(0, Date().timeIntervalSince($0)) } ?? 0)
        } catch {
            logger.debug("queue metrics not sampled", metadata: ["error": "\(error)"])
        }
        await pools.recordMetrics()
    }

    /// Samples the metrics every `interval` until the calling task is cancelled.
    public func recordMetrics(every interval: Duration) async {
        while !Task.isCancelled {
            await recordMetrics()
            try? await Task.sleep(for: interval)
        }
    }

    /// Why the relay is not ready to serve, or `nil` when it is: the database answers `SELECT 1` and every
    /// warmed APNs pool has a ready connection.
    public func notReadyReason() async -> String? {
        do {
            try await store.ping()
        } catch {
            return "the database does not answer: \(String(describing: error).prefix(200))"
        }
        return await pools.notReadyReason()
    }

    /// Beats relay `node`'s heartbeat in `relay_nodes` every `interval` and gives `share` what it saw (the
    /// live relays, each tenant's leased pages), until the calling task is cancelled; then removes the
    /// node's row, so the others take its share at their next beat. A failed beat keeps the last findings.
    /// `node` is the fan-out worker's lease owner name, so that the pages it holds are counted as its own.
    public func runHeartbeat(node: String, every interval: Duration = .seconds(2), share: RelayShare = .process) async {
        while !Task.isCancelled {
            do {
                let beat = try await store.heartbeat(node: node)
                if beat.liveRelays != share.liveRelays {
                    logger.info(
                        "live relays changed; each paces its share of the tenants' rates",
                        metadata: ["node": "\(node)", "relays": "\(beat.liveRelays)"]
                    )
                }
                share.update(beat)
            } catch {
                logger.warning("heartbeat failed", metadata: ["node": "\(node)", "error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
        // In a task of its own: this one is cancelled, and would cancel the query.
        let store = self.store
        let removal = Task { try await store.removeNode(node) }
        do {
            try await removal.value
        } catch {
            logger.warning("node row not removed", metadata: ["node": "\(node)", "error": "\(error)"])
        }
    }
}

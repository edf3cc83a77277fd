import Foundation
import Metrics
import RelayStore

extension RelayService {
    /// Samples the fan-out queue and the pools into their gauges: `pushrelay_pages_due`,
    /// `pushrelay_scheduled_job_lag_seconds` (how late the oldest due work nobody holds is: a page, or a
    /// job not planned yet), `pushrelay_notifications_held` and `pushrelay_notifications_held_oldest_seconds`,
    /// `pushrelay_pool_connections`, `pushrelay_pool_streams_in_flight`, `pushrelay_provider_fault` and
    /// `pushrelay_signing_keys_unreadable`. A failed query leaves the queue gauges as they were.
    package func recordMetrics() async {
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
    package func recordMetrics(every interval: Duration) async {
        while !Task.isCancelled {
            await recordMetrics()
            try? await Task.sleep(for: interval)
        }
    }

    /// Why the relay cannot accept, durably store and, as a whole, deliver work, or `nil` when it can: its listener
    /// takes connections (from start until it begins to stop), the database answers `SELECT 1`, and the master key
    /// opens the stored signing keys (a relay without it, or with
    /// the wrong one, is not ready, so a load balancer prefers a relay configured right). One tenant's or one
    /// environment's delivery health never makes the relay unready: it is in ``status()``. Answered within
    /// ``readinessDeadline`` whatever the database does.
    package func notReadyReason() async -> String? {
        guard listening.load(ordering: .relaxed) else { return "the relay's listener is not accepting connections" }
        let store = store
        let pools = pools
        let deadline = Self.readinessDeadline
        // The check runs in a task of its own: a database that does not answer may not end it at once, and the
        // answer does not wait for it.
        return await answer(within: deadline, orElse: "the database did not answer within \(deadline)") {
            do {
                try await store.ping()
            } catch {
                return "the database does not answer: \(String(describing: error).prefix(200))"
            }
            return await pools.sealedKeysProblem()
        }
    }

    /// The relay's delivery health per tenant and environment (the operator port's `/status`): pools, keys,
    /// configuration faults and held notifications, with the relay's readiness.
    package func status() async -> RelayStatus {
        let reason = await notReadyReason()
        var status = RelayStatus(
            ready: reason == nil, notReadyReason: reason, version: RelayVersion.current, generatedAt: Date(),
            tenants: [])
        guard let tenants = try? await store.listTenants() else { return status }
        let held = (try? await store.heldDeliveries()) ?? []
        for tenant in tenants.sorted(by: { $0.id < $1.id }) {
            var entry = RelayStatus.Tenant(tenant: tenant.id, enabled: tenant.enabled, environments: [])
            let destinations = Set(
                tenant.configuration.notificationTypes.values.flatMap { type in
                    pools.services.all.flatMap { $0.destinations(of: type, tenant: tenant.configuration) }
                })
            for name in destinations.sorted() {
                var destination = await pools.destinationStatus(tenant: tenant.id, destination: name)
                destination.held = held.filter { $0.tenantID == tenant.id && $0.environment == name.storedName }
                    .map {
                        RelayStatus.Held(
                            reason: $0.reason, devices: $0.devices, oldestSince: $0.oldestSince,
                            nextAttempt: $0.nextAttempt)
                    }
                entry.environments.append(destination)
            }
            status.tenants.append(entry)
        }
        return status
    }

    /// How long readiness waits for the database before it answers "not ready".
    package static let readinessDeadline: Duration = .milliseconds(900)

    /// Beats relay `node`'s heartbeat in `relay_nodes` every `interval` and gives `share` what it saw (the
    /// live relays, each tenant's leased pages), until the calling task is cancelled; then removes the
    /// node's row, so the others take its share at their next beat. A failed beat keeps the last findings.
    /// `node` is the fan-out worker's lease owner name, so that the pages it holds are counted as its own.
    package func runHeartbeat(node: String, every interval: Duration = .seconds(2), share: RelayShare = .process) async
    {
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

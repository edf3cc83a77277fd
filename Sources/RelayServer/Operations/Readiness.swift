import Foundation
import RelayStore
import Synchronization

/// Whether the relay can take work (the operator port's `/readyz`) and how delivery goes per tenant and destination
/// (`/status`).
package final class Readiness: Sendable {
    private let store: RelayStore
    private let pools: PoolRegistry
    /// Whether the relay's listener takes connections: set once it listens, cleared when it starts to stop, so that
    /// readiness sends no new backend to a relay that is not (or no longer) listening.
    private let listening = Atomic<Bool>(false)

    /// The readiness of a relay over `store` sending through `pools`.
    init(store: RelayStore, pools: PoolRegistry) {
        self.store = store
        self.pools = pools
    }

    /// Says whether the listener takes connections (from when it listens until it starts to stop).
    package func setListening(_ value: Bool) {
        listening.store(value, ordering: .relaxed)
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

    /// What readiness adds to its answer while the relay stays ready: a line per destination and reason whose
    /// provider refused notifications for their devices in the last hour (``DeviceRejections``).
    package func warnings() async -> [String] {
        await pools.rejectionWarnings(now: Date())
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
}

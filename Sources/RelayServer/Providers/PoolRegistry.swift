import Foundation
package import Logging
package import NIOCore
import PushRelayProtocol
package import RelayStore

/// The relay's provider pools: one per tenant and destination (a provider and its scope: an APNs environment),
/// each built by its provider's ``PushService`` with the tenant's current credential (APNs: its newest usable
/// signing key), warm before first use, and rebuilt (only that tenant's) when its keys change.
///
/// When a tenant's keys change, the pools made with the old key are taken out of service at once and
/// shut down after their in-flight requests are answered: the old key is retired after its in-flight work.
///
/// A destination whose configuration its provider refuses, or for which the relay has no usable credential, is
/// faulted (<doc:Outages>): its pool takes no sends, which are held instead, until a key change or a probe every
/// ``faultProbeInterval`` finds it fixed.
package actor PoolRegistry {
    struct PoolKey: Hashable, Comparable {
        var tenant: String
        var destination: Destination

        static func < (lhs: PoolKey, rhs: PoolKey) -> Bool {
            (lhs.tenant, lhs.destination) < (rhs.tenant, rhs.destination)
        }
    }

    struct Entry {
        var generation: Int
        var task: Task<(pool: any ProviderPool, credentialID: String), any Error>
    }

    /// A destination that cannot deliver until its configuration is fixed.
    struct Fault: Sendable {
        /// The provider's reason or the relay's (`no_signing_key`, `master_key_mismatch`, ...).
        var reason: String
        /// What to fix.
        var detail: String
        /// When it was first met.
        var since: Date
        /// When a send may next go through to find out whether it is fixed.
        var probeAt: ContinuousClock.Instant
    }

    /// How long a faulted destination holds every send before one page goes through to try again.
    static let faultProbeInterval: Duration = .seconds(30)
    /// How long the answer to "does this destination have a usable key" is kept for SEND's check.
    static let keyCheckLifetime: Duration = .seconds(10)

    let store: RelayStore
    let masterKey: MasterKey?
    /// The push services whose pools it builds.
    nonisolated let services: PushServices
    let logger: Logger
    /// The name this relay reports faults under (its fan-out's owner name).
    let relayName: String
    var pools: [PoolKey: Entry] = [:]
    private var generation = 0
    private var rebuilds: [String: Int] = [:]
    /// Every pool built so far, at start (``warm(_:)``) or later on first use: the status view lists them. A pool
    /// leaves the set only when its tenant no longer has a usable key after a key change.
    private var built: Set<PoolKey> = []
    var faults: [PoolKey: Fault] = [:]
    /// Destinations whose fault was cleared since the metrics were last sampled, with its reason: their gauge
    /// goes to 0.
    var clearedFaults: [PoolKey: String] = [:]
    /// The notifications each destination's provider refused for one device each (never a fault of it).
    var rejections: [PoolKey: DeviceRejections] = [:]
    /// Whether each destination has a usable key (`nil`) or why not, and when that was found.
    var keyChecks: [PoolKey: (problem: PoolUnavailable?, at: ContinuousClock.Instant)] = [:]
    /// The refusal code each tenant's SENDs were last logged with (logged once per change).
    var refusalsLogged: [String: Pushrelay_V1_ErrorCode] = [:]
    /// Whether the master key opens every stored key (`nil`) or why not, and when that was found.
    var sealedKeysCheck: (problem: String?, at: ContinuousClock.Instant)?

    /// A registry of APNs pools only, connecting to `target` on `group` with keys from `store`, unsealed with
    /// `masterKey`; it reports faults as `relayName`.
    package init(
        store: RelayStore, masterKey: MasterKey?, target: APNsTarget, group: any EventLoopGroup, logger: Logger,
        relayName: String = ProcessInfo.processInfo.hostName
    ) {
        self.init(
            store: store, masterKey: masterKey,
            services: PushServices([APNsService(store: store, masterKey: masterKey, target: target, group: group)]),
            logger: logger, relayName: relayName)
    }

    /// A registry of `services`' pools, with the keys of `store` unsealed with `masterKey`.
    init(store: RelayStore, masterKey: MasterKey?, services: PushServices, logger: Logger, relayName: String) {
        self.store = store
        self.masterKey = masterKey
        self.services = services
        self.logger = logger
        self.relayName = relayName
    }

    /// The service of `destination`'s provider, or why there is none (a configuration fault).
    func service(for destination: Destination) throws(PoolUnavailable) -> any PushService {
        guard let service = services[destination.provider] else {
            throw PoolUnavailable(
                reason: "provider_not_served", message: "this relay does not send to \(destination.provider)",
                isConfiguration: true)
        }
        return service
    }

    /// The warm pool for `tenant`'s `destination`, built on first use.
    ///
    /// - Throws: ``PoolUnavailable`` when the destination is faulted (until its next probe), the tenant has no
    ///   usable credential for it (which faults it), or the pool cannot connect.
    func pool(tenant: String, destination: Destination) async throws(PoolUnavailable) -> any ProviderPool {
        let key = PoolKey(tenant: tenant, destination: destination)
        if let fault = faults[key] {
            let now = ContinuousClock.now
            guard now >= fault.probeAt else {
                throw PoolUnavailable(reason: fault.reason, message: fault.detail, isConfiguration: true)
            }
            // This caller tries it; the others keep holding until the next probe.
            faults[key]?.probeAt = now + Self.faultProbeInterval
        }
        let entry: Entry
        if let existing = pools[key] {
            entry = existing
        } else {
            generation += 1
            let build = Task { try await self.build(tenant: tenant, destination: destination) }
            entry = Entry(generation: generation, task: build)
            pools[key] = entry
        }
        do {
            let pool = try await entry.task.value.pool
            built.insert(key)
            return pool
        } catch {
            // A failed build is forgotten, so the next send tries again.
            if pools[key]?.generation == entry.generation { pools[key] = nil }
            let unavailable =
                error as? PoolUnavailable
                ?? PoolUnavailable(
                    reason: "connect_failed",
                    message: "pool for \(tenant) (\(destination)): \(error)", isConfiguration: false)
            if unavailable.isConfiguration {
                await reportFault(tenant: tenant, destination: destination, reason: unavailable.reason)
            }
            throw unavailable
        }
    }

    /// How many times `tenant`'s pools were rebuilt after a key change.
    package func rebuildCount(tenant: String) -> Int {
        rebuilds[tenant, default: 0]
    }

    /// After a change of `tenant`'s keys: each of its pools whose signing key is no longer the one to use is
    /// taken out of service and built again with the current key; the old pool finishes its in-flight
    /// requests, then closes, and keys that were `retiring` are then marked retired. Pools whose key is
    /// unchanged, and other tenants' pools, are untouched. The tenant's faults are cleared and its held
    /// notifications made due: the new key is tried at once (and faults again if it is refused too).
    package func keysChanged(tenant: String) async {
        keyChecks = keyChecks.filter { $0.key.tenant != tenant }
        sealedKeysCheck = nil
        for key in faults.keys where key.tenant == tenant {
            await clearFault(key, why: "the tenant's signing keys changed")
        }
        let affected = pools.filter { $0.key.tenant == tenant }
        var replaced: [any ProviderPool] = []
        for (key, entry) in affected {
            let current = try? await entry.task.value
            let wanted = try? await service(for: key.destination).credentialID(
                tenant: tenant, destination: key.destination)
            guard current?.credentialID != wanted || current == nil else { continue }
            if pools[key]?.generation == entry.generation { pools[key] = nil }
            if let current { replaced.append(current.pool) }
            rebuilds[tenant, default: 0] += 1
            logger.info(
                "signing key changed; rebuilding the pool",
                metadata: ["tenant": "\(tenant)", "destination": "\(key.destination)"]
            )
            do {
                _ = try await pool(tenant: tenant, destination: key.destination)
            } catch {
                // No usable key left for the destination: there is no pool to list.
                built.remove(key)
                logger.warning(
                    "pool not rebuilt after a key change",
                    metadata: [
                        "tenant": "\(tenant)", "destination": "\(key.destination)", "error": "\(error.message)",
                    ]
                )
            }
        }
        guard !replaced.isEmpty else { return }
        for old in replaced { await old.shutdown(gracePeriod: .seconds(30)) }
        do {
            for record in try await store.listSigningKeys(tenant: tenant) where record.status == .retiring {
                try await store.retireSigningKey(tenant: tenant, keyID: record.keyID)
                logger.info("retired a rotated key after its in-flight work", metadata: ["key_id": "\(record.keyID)"])
            }
        } catch {
            logger.warning("could not retire rotated keys", metadata: ["tenant": "\(tenant)", "error": "\(error)"])
        }
    }

    /// Builds the pools of every listed tenant and destination now, so the first send finds them warm.
    /// Tenants without a usable key are faulted (logged once) and skipped.
    package func warm(_ tenants: [(tenant: String, destination: Destination)]) async {
        for (tenant, destination) in tenants {
            do {
                _ = try await pool(tenant: tenant, destination: destination)
            } catch {
                guard !error.isConfiguration else { continue }
                logger.warning(
                    "pool not warmed; it connects again on first use",
                    metadata: ["tenant": "\(tenant)", "destination": "\(destination)", "error": "\(error.message)"]
                )
            }
        }
    }

    /// Follows `NOTIFY pushrelay_keys` and rebuilds the pools of the tenant named in each notification,
    /// until the task is cancelled. Reconnects after a lost database connection.
    package func followKeyChanges() async {
        while !Task.isCancelled {
            do {
                try await store.followKeyChanges { tenant in await self.keysChanged(tenant: tenant) }
            } catch {
                if Task.isCancelled { return }
                logger.warning("key change listener lost its connection; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Each built pool's status, by destination (a pool that does not answer is left out).
    func statuses() async -> [(key: PoolKey, status: ProviderPoolStatus)] {
        var found: [(key: PoolKey, status: ProviderPoolStatus)] = []
        for key in built.sorted() {
            guard let entry = pools[key], let current = try? await entry.task.value,
                let status = await current.pool.status()
            else { continue }
            found.append((key, status))
        }
        return found
    }

    /// Shuts every pool down, waiting up to `gracePeriod` for in-flight requests.
    package func shutdown(gracePeriod: TimeAmount = .seconds(5)) async {
        let all = pools.values
        pools = [:]
        for entry in all {
            if let current = try? await entry.task.value { await current.pool.shutdown(gracePeriod: gracePeriod) }
        }
    }

    private func build(
        tenant: String, destination: Destination
    ) async throws -> (pool: any ProviderPool, credentialID: String) {
        var logger = self.logger
        logger[metadataKey: "tenant"] = "\(tenant)"
        logger[metadataKey: "destination"] = "\(destination)"
        return try await service(for: destination).makePool(tenant: tenant, destination: destination, logger: logger)
    }
}

/// Why the relay has no pool for a destination now: a fault of the tenant's configuration (no key, a key the relay
/// cannot open, or one the provider refuses), or of the connection (the provider unreachable when the pool was
/// built).
struct PoolUnavailable: Error, Sendable, Hashable {
    /// A short cause (`no_signing_key`, `master_key_mismatch`, `InvalidProviderToken`, `connect_failed`, ...).
    var reason: String
    /// A sentence saying what is wrong.
    var message: String
    /// Whether only an operator's fix makes it go away.
    var isConfiguration: Bool
}

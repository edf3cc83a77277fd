public import APNs
public import Foundation
public import Logging
public import NIOCore
import PushRelayProtocol
public import RelayStore

/// Where the relay's APNs pools connect and how large they are.
public struct APNsTarget: Sendable {
    /// One endpoint for every environment (the simulator), or `nil` for Apple's endpoints.
    public var endpointOverride: APNsEndpoint?
    /// A CA file to trust instead of the system's (the simulator's CA).
    public var caFile: String?
    /// HTTP/2 connections each pool keeps open however idle (its floor).
    public var connectionsPerPool: Int
    /// HTTP/2 connections each pool may open while its streams stay near APNs' limit (its cap; below
    /// ``connectionsPerPool``, pools of a fixed size).
    public var maximumConnectionsPerPool: Int
    /// Signing keys used for tenants that have no stored key for an environment, by tenant id
    /// (the ephemeral keys `serve --apns-simulator` makes).
    public var fallbackKeys: [String: APNsSigningKey]

    /// A target; the defaults are Apple's endpoints with pools of two to sixteen connections.
    public init(
        endpointOverride: APNsEndpoint? = nil,
        caFile: String? = nil,
        connectionsPerPool: Int = 2,
        maximumConnectionsPerPool: Int = 16,
        fallbackKeys: [String: APNsSigningKey] = [:]
    ) {
        self.endpointOverride = endpointOverride
        self.caFile = caFile
        self.connectionsPerPool = connectionsPerPool
        self.maximumConnectionsPerPool = maximumConnectionsPerPool
        self.fallbackKeys = fallbackKeys
    }

    /// The endpoint a pool for `environment` connects to.
    public func endpoint(for environment: APNsEnvironment) -> APNsEndpoint {
        endpointOverride ?? .apple(environment)
    }
}

/// The relay's APNs pools: one per tenant and environment, built from the tenant's newest usable signing
/// key, warm before first use, and rebuilt (only that tenant's) when its keys change.
///
/// When a tenant's keys change, the pools signed with the old key are taken out of service at once and
/// shut down after their in-flight requests are answered: the old key is retired after its in-flight work.
///
/// A destination (tenant and environment) whose configuration APNs refuses, or for which the relay has no usable
/// key, is faulted (<doc:Outages>): its pool takes no sends, which are held instead, until a key change or a
/// probe every ``faultProbeInterval`` finds it fixed.
public actor PoolRegistry {
    struct PoolKey: Hashable, Comparable {
        var tenant: String
        var environment: APNsEnvironment

        static func < (lhs: PoolKey, rhs: PoolKey) -> Bool {
            (lhs.tenant, lhs.environment.rawValue) < (rhs.tenant, rhs.environment.rawValue)
        }
    }

    struct Entry {
        var generation: Int
        var task: Task<(pool: APNsPool, keyID: String), any Error>
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
    private let target: APNsTarget
    private let group: any EventLoopGroup
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
    /// Whether each destination has a usable key (`nil`) or why not, and when that was found.
    var keyChecks: [PoolKey: (problem: PoolUnavailable?, at: ContinuousClock.Instant)] = [:]
    /// The refusal code each tenant's SENDs were last logged with (logged once per change).
    var refusalsLogged: [String: Pushrelay_V1_ErrorCode] = [:]
    /// Whether the master key opens every stored key (`nil`) or why not, and when that was found.
    var sealedKeysCheck: (problem: String?, at: ContinuousClock.Instant)?

    /// A registry that builds pools on `group` with keys from `store`, unsealed with `masterKey`; it reports
    /// faults as `relayName`.
    public init(
        store: RelayStore, masterKey: MasterKey?, target: APNsTarget, group: any EventLoopGroup, logger: Logger,
        relayName: String = ProcessInfo.processInfo.hostName
    ) {
        self.store = store
        self.masterKey = masterKey
        self.target = target
        self.group = group
        self.logger = logger
        self.relayName = relayName
    }

    /// The warm pool for `tenant` in `environment`, built on first use.
    ///
    /// - Throws: ``PoolUnavailable`` when the destination is faulted (until its next probe), the tenant has no
    ///   usable key for it (which faults it), or the pool cannot connect.
    func pool(tenant: String, environment: APNsEnvironment) async throws(PoolUnavailable) -> APNsPool {
        let key = PoolKey(tenant: tenant, environment: environment)
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
            let build = Task { try await self.build(tenant: tenant, environment: environment) }
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
                    reason: (error as? APNsPoolError)?.code ?? "connect_failed",
                    message: "APNs pool for \(tenant) (\(environment.rawValue)): \(error)", isConfiguration: false)
            if unavailable.isConfiguration {
                await reportFault(tenant: tenant, environment: environment, reason: unavailable.reason)
            }
            throw unavailable
        }
    }

    /// How many times `tenant`'s pools were rebuilt after a key change.
    public func rebuildCount(tenant: String) -> Int {
        rebuilds[tenant, default: 0]
    }

    /// After a change of `tenant`'s keys: each of its pools whose signing key is no longer the one to use is
    /// taken out of service and built again with the current key; the old pool finishes its in-flight
    /// requests, then closes, and keys that were `retiring` are then marked retired. Pools whose key is
    /// unchanged, and other tenants' pools, are untouched. The tenant's faults are cleared and its held
    /// notifications made due: the new key is tried at once (and faults again if it is refused too).
    public func keysChanged(tenant: String) async {
        keyChecks = keyChecks.filter { $0.key.tenant != tenant }
        sealedKeysCheck = nil
        for key in faults.keys where key.tenant == tenant {
            await clearFault(key, why: "the tenant's signing keys changed")
        }
        let affected = pools.filter { $0.key.tenant == tenant }
        var replaced: [APNsPool] = []
        for (key, entry) in affected {
            let current = try? await entry.task.value
            let wanted = try? await signingKey(tenant: tenant, environment: key.environment).keyID
            guard current?.keyID != wanted || current == nil else { continue }
            if pools[key]?.generation == entry.generation { pools[key] = nil }
            if let current { replaced.append(current.pool) }
            rebuilds[tenant, default: 0] += 1
            logger.info(
                "signing key changed; rebuilding the pool",
                metadata: ["tenant": "\(tenant)", "apns.environment": "\(key.environment.rawValue)"]
            )
            do {
                _ = try await pool(tenant: tenant, environment: key.environment)
            } catch {
                // No usable key left for the environment: there is no pool to list.
                built.remove(key)
                logger.warning(
                    "pool not rebuilt after a key change",
                    metadata: [
                        "tenant": "\(tenant)", "apns.environment": "\(key.environment.rawValue)",
                        "error": "\(error.message)",
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

    /// Builds the pools of every listed tenant and environment now, so the first send finds them warm.
    /// Tenants without a usable key are faulted (logged once) and skipped.
    public func warm(_ tenants: [(tenant: String, environment: APNsEnvironment)]) async {
        for (tenant, environment) in tenants {
            do {
                _ = try await pool(tenant: tenant, environment: environment)
            } catch {
                guard !error.isConfiguration else { continue }
                logger.warning(
                    "APNs pool not warmed; it connects again on first use",
                    metadata: [
                        "tenant": "\(tenant)", "apns.environment": "\(environment.rawValue)",
                        "error": "\(error.message)",
                    ]
                )
            }
        }
    }

    /// Follows `NOTIFY pushrelay_keys` and rebuilds the pools of the tenant named in each notification,
    /// until the task is cancelled. Reconnects after a lost database connection.
    public func followKeyChanges() async {
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

    /// Each built pool's snapshot, by destination (a pool that does not answer is left out).
    func snapshots() async -> [(key: PoolKey, snapshot: APNsPoolSnapshot)] {
        var found: [(key: PoolKey, snapshot: APNsPoolSnapshot)] = []
        for key in built.sorted() {
            guard let entry = pools[key], let current = try? await entry.task.value,
                let snapshot = try? await current.pool.snapshot()
            else { continue }
            found.append((key, snapshot))
        }
        return found
    }

    /// Shuts every pool down, waiting up to `gracePeriod` for in-flight requests.
    public func shutdown(gracePeriod: TimeAmount = .seconds(5)) async {
        let all = pools.values
        pools = [:]
        for entry in all {
            if let current = try? await entry.task.value { await current.pool.shutdown(gracePeriod: gracePeriod) }
        }
    }

    private func build(tenant: String, environment: APNsEnvironment) async throws -> (pool: APNsPool, keyID: String) {
        let signingKey = try await signingKey(tenant: tenant, environment: environment)
        var configuration = APNsPoolConfiguration(
            endpoint: target.endpoint(for: environment), credential: .token(signingKey), caFile: target.caFile
        )
        configuration.connections = target.connectionsPerPool
        configuration.maximumConnections = target.maximumConnectionsPerPool
        var logger = self.logger
        logger[metadataKey: "tenant"] = "\(tenant)"
        logger[metadataKey: "apns.environment"] = "\(environment.rawValue)"
        let pool = try APNsPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        do {
            try await pool.start()
        } catch {
            await pool.shutdown(gracePeriod: .zero)
            throw error
        }
        logger.info("APNs pool warm", metadata: ["key_id": "\(signingKey.keyID)"])
        return (pool, signingKey.keyID)
    }

    /// The key `tenant` signs with in `environment`: its newest active stored key for it, else the fallback
    /// key (the simulator's).
    ///
    /// - Throws: ``PoolUnavailable`` (a configuration fault) when there is none, or the relay cannot open it.
    func signingKey(tenant: String, environment: APNsEnvironment) async throws(PoolUnavailable) -> APNsSigningKey {
        let records: [SigningKeyRecord]
        do {
            records = try await store.listSigningKeys(tenant: tenant).filter {
                $0.status != .retired && $0.environment.covers(environment)
            }
        } catch {
            throw PoolUnavailable(
                reason: "database", message: "signing keys not read: \(error)", isConfiguration: false)
        }
        if !records.isEmpty {
            guard let masterKey else {
                throw PoolUnavailable(
                    reason: "no_master_key",
                    message: "tenant \(tenant) has stored signing keys but the relay has no master key "
                        + "(give it master_key_file or PUSHRELAY_MASTER_KEY)",
                    isConfiguration: true)
            }
            let keys: [UnsealedSigningKey]
            do {
                keys = try await store.loadSigningKeys(tenant: tenant, masterKey: masterKey)
            } catch  where error.code == .wrongMasterKey {
                throw PoolUnavailable(
                    reason: "master_key_mismatch",
                    message: "the relay's master key does not open the stored signing keys of \(tenant) "
                        + "(it is not the master key that sealed them)",
                    isConfiguration: true)
            } catch {
                throw PoolUnavailable(
                    reason: error.isTransient ? "database" : "invalid_signing_key", message: "\(error)",
                    isConfiguration: !error.isTransient)
            }
            if let newest = keys.first(where: {
                $0.record.status == .active && $0.record.environment.covers(environment)
            })
                ?? keys.first(where: { $0.record.environment.covers(environment) })
            {
                return newest.key
            }
        }
        if let fallback = target.fallbackKeys[tenant] { return fallback }
        throw PoolUnavailable(
            reason: "no_signing_key",
            message: "tenant \(tenant) has no APNs signing key for \(environment.rawValue) "
                + "(pushrelay admin key add \(tenant) ...)",
            isConfiguration: true)
    }
}

/// Why the relay has no pool for a destination now: a fault of the tenant's configuration (no key, a key the relay
/// cannot open, or one APNs refuses), or of the connection (APNs unreachable when the pool was built).
struct PoolUnavailable: Error, Sendable, Hashable {
    /// A short cause (`no_signing_key`, `master_key_mismatch`, `InvalidProviderToken`, `connect_failed`, ...).
    var reason: String
    /// A sentence saying what is wrong.
    var message: String
    /// Whether only an operator's fix makes it go away.
    var isConfiguration: Bool
}

extension SigningKeyEnvironment {
    /// Whether a key for this environment signs for `environment`.
    package func covers(_ environment: APNsEnvironment) -> Bool {
        switch self {
        case .both: true
        case .production: environment == .production
        case .development: environment == .development
        }
    }
}

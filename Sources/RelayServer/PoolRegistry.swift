public import APNs
public import Logging
import Metrics
public import NIOCore
public import PushRelayProtocol
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
public actor PoolRegistry {
    private struct PoolKey: Hashable {
        var tenant: String
        var environment: APNsEnvironment
    }

    private struct Entry {
        var generation: Int
        var task: Task<(pool: APNsPool, keyID: String), any Error>
    }

    private let store: RelayStore
    private let masterKey: MasterKey?
    private let target: APNsTarget
    private let group: any EventLoopGroup
    private let logger: Logger
    private var pools: [PoolKey: Entry] = [:]
    private var generation = 0
    private var rebuilds: [String: Int] = [:]
    /// Every pool built so far, at start (``warm(_:)``) or later on first use: readiness wants each of them
    /// up. A pool leaves the set only when its tenant no longer has a usable key after a key change.
    private var built: Set<PoolKey> = []

    /// A registry that builds pools on `group` with keys from `store`, unsealed with `masterKey`.
    public init(store: RelayStore, masterKey: MasterKey?, target: APNsTarget, group: any EventLoopGroup, logger: Logger)
    {
        self.store = store
        self.masterKey = masterKey
        self.target = target
        self.group = group
        self.logger = logger
    }

    /// The warm pool for `tenant` in `environment`, built on first use.
    ///
    /// - Throws: `UNAVAILABLE` when the tenant has no usable key for the environment or the pool cannot connect.
    public func pool(tenant: String, environment: APNsEnvironment) async throws(ProtocolError) -> APNsPool {
        let key = PoolKey(tenant: tenant, environment: environment)
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
            if let error = error as? ProtocolError { throw error }
            throw ProtocolError(.unavailable, "APNs pool for \(tenant) (\(environment.rawValue)): \(error)")
        }
    }

    /// How many times `tenant`'s pools were rebuilt after a key change.
    public func rebuildCount(tenant: String) -> Int {
        rebuilds[tenant, default: 0]
    }

    /// After a change of `tenant`'s keys: each of its pools whose signing key is no longer the one to use is
    /// taken out of service and built again with the current key; the old pool finishes its in-flight
    /// requests, then closes, and keys that were `retiring` are then marked retired. Pools whose key is
    /// unchanged, and other tenants' pools, are untouched.
    public func keysChanged(tenant: String) async {
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
                // No usable key left for the environment: there is no pool for readiness to wait for.
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
    /// Tenants without a usable key are logged and skipped.
    public func warm(_ tenants: [(tenant: String, environment: APNsEnvironment)]) async {
        for (tenant, environment) in tenants {
            do {
                _ = try await pool(tenant: tenant, environment: environment)
            } catch {
                logger.warning(
                    "APNs pool not warmed", metadata: ["tenant": "\(tenant)", "error": "\(error.message)"]
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

    /// Samples every built pool into the `pushrelay_pool_connections` (ready connections) and
    /// `pushrelay_pool_streams_in_flight` gauges, by tenant and environment.
    public func recordMetrics() async {
        for (key, entry) in pools {
            guard let current = try? await entry.task.value, let snapshot = try? await current.pool.snapshot() else {
                continue
            }
            let dimensions = [("tenant", key.tenant), ("environment", key.environment.rawValue)]
            Gauge(label: RelayMetrics.poolConnectionsLabel, dimensions: dimensions)
                .record(snapshot.connections.count(where: \.isReady))
            Gauge(label: RelayMetrics.poolStreamsLabel, dimensions: dimensions).record(snapshot.streamsInFlight)
        }
    }

    /// Why the relay cannot send right now, or `nil` when every pool built so far (warmed at start or built
    /// on first use after it) has at least one ready connection and no tenant's stored keys wait for a master
    /// key the relay was not given.
    public func notReadyReason() async -> String? {
        if masterKey == nil, let locked = await tenantsWithLockedKeys(), !locked.isEmpty {
            return "no master key: the stored signing keys of \(locked.joined(separator: ", ")) cannot be opened "
                + "(give --master-key-file or PUSHRELAY_MASTER_KEY)"
        }
        for key in built.sorted(by: { ($0.tenant, $0.environment.rawValue) < ($1.tenant, $1.environment.rawValue) }) {
            let name = "\(key.tenant) (\(key.environment.rawValue))"
            guard let entry = pools[key], let current = try? await entry.task.value else {
                return "APNs pool \(name) is not built"
            }
            guard let snapshot = try? await current.pool.snapshot(), snapshot.connections.contains(where: \.isReady)
            else {
                return "APNs pool \(name) has no ready connection"
            }
        }
        return nil
    }

    /// The enabled tenants that have stored signing keys in use (none retired), which only a master key opens;
    /// `nil` when the database does not answer.
    private func tenantsWithLockedKeys() async -> [String]? {
        guard let tenants = try? await store.listTenants().filter(\.enabled) else { return nil }
        var locked: [String] = []
        for tenant in tenants {
            guard let keys = try? await store.listSigningKeys(tenant: tenant.id) else { return nil }
            if keys.contains(where: { $0.status != .retired }) { locked.append(tenant.id) }
        }
        return locked.sorted()
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

    private func signingKey(tenant: String, environment: APNsEnvironment) async throws -> APNsSigningKey {
        let records = try await store.listSigningKeys(tenant: tenant).filter {
            $0.status != .retired && $0.environment.covers(environment)
        }
        if !records.isEmpty {
            guard let masterKey else {
                throw ProtocolError(
                    .unavailable, "tenant \(tenant) has stored signing keys but the relay has no master key"
                )
            }
            let keys = try await store.loadSigningKeys(tenant: tenant, masterKey: masterKey)
            if let newest = keys.first(where: {
                $0.record.status == .active && $0.record.environment.covers(environment)
            })
                ?? keys.first(where: { $0.record.environment.covers(environment) })
            {
                return newest.key
            }
        }
        if let fallback = target.fallbackKeys[tenant] { return fallback }
        throw ProtocolError(.unavailable, "tenant \(tenant) has no signing key for \(environment.rawValue)")
    }
}

extension SigningKeyEnvironment {
    /// Whether a key for this environment signs for `environment`.
    func covers(_ environment: APNsEnvironment) -> Bool {
        switch self {
        case .both: true
        case .production: environment == .production
        case .development: environment == .development
        }
    }
}

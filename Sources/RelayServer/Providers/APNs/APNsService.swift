import APNs
import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore

/// APNs behind the provider seam: renders a job's notification into its headers and payload, reaches the
/// environments of a type's bundle id, and builds a tenant's pool for an environment with the tenant's newest usable
/// signing key (or the simulator's fallback key).
struct APNsService: PushService {
    let store: RelayStore
    let masterKey: MasterKey?
    let target: APNsTarget
    let group: any EventLoopGroup

    var provider: PushProvider { .apns }

    func destinations(
        of type: TenantConfiguration.NotificationType, tenant: TenantConfiguration
    ) -> Set<Destination> {
        Set((tenant.bundleIDs[type.bundleID]?.environments ?? []).map(Destination.apns))
    }

    func render(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) -> (any ProviderRendering)? {
        try APNsRendering(request, plan: plan, type: type)
    }

    func credentialID(tenant: String, destination: Destination) async throws(PoolUnavailable) -> String {
        try await signingKey(tenant: tenant, environment: environment(of: destination)).keyID
    }

    func makePool(
        tenant: String, destination: Destination, logger: Logger
    ) async throws -> (pool: any ProviderPool, credentialID: String) {
        let environment = try environment(of: destination)
        let signingKey = try await signingKey(tenant: tenant, environment: environment)
        var configuration = APNsPoolConfiguration(
            endpoint: target.endpoint(for: APNsEnvironment(environment)), credential: .token(signingKey),
            caFile: target.caFile
        )
        configuration.connections = target.connectionsPerPool
        configuration.maximumConnections = target.maximumConnectionsPerPool
        let pool = try APNsPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        do {
            try await pool.start()
        } catch {
            await pool.shutdown(gracePeriod: .zero)
            throw PoolUnavailable(
                reason: (error as? APNsPoolError)?.code.description ?? "connect_failed",
                message: "APNs pool for \(tenant) (\(environment.rawValue)): \(error)", isConfiguration: false)
        }
        logger.info("APNs pool warm", metadata: ["key_id": "\(signingKey.keyID)"])
        return (APNsProviderPool(pool), signingKey.keyID)
    }

    private func environment(of destination: Destination) throws(PoolUnavailable) -> TenantConfiguration.Environment {
        guard let environment = destination.apnsEnvironment else {
            throw PoolUnavailable(
                reason: "unknown_destination", message: "\(destination) is not an APNs environment",
                isConfiguration: true)
        }
        return environment
    }

    /// The key `tenant` signs with in `environment`: its newest active stored `.p8` for it, else the fallback
    /// key (the simulator's). Stored credentials of other kinds (an FCM service account) are not APNs keys and are
    /// passed over.
    ///
    /// - Throws: ``PoolUnavailable`` (a configuration fault) when there is none, or the relay cannot open it.
    func signingKey(
        tenant: String, environment: TenantConfiguration.Environment
    ) async throws(PoolUnavailable) -> APNsSigningKey {
        let stored = StoredCredentials(store: store, masterKey: masterKey)
        let records = try await stored.records(tenant: tenant, kind: .apnsP8) { $0.environment.covers(environment) }
        if !records.isEmpty {
            let keys = try await stored.unsealed(tenant: tenant, kind: .apnsP8)
            if let newest = keys.first(where: {
                $0.record.status == .active && $0.record.environment.covers(environment)
            })
                ?? keys.first(where: { $0.record.environment.covers(environment) })
            {
                return try Self.decode(newest)
            }
        }
        if let fallback = target.fallbackKeys[tenant] { return fallback }
        throw PoolUnavailable(
            reason: "no_signing_key",
            message: "tenant \(tenant) has no APNs signing key for \(environment.rawValue) "
                + "(pushrelay admin key add \(tenant) ...)",
            isConfiguration: true)
    }

    /// The engine's key of an unsealed `.p8`.
    static func decode(_ key: UnsealedSigningKey) throws(PoolUnavailable) -> APNsSigningKey {
        do {
            return try key.apnsSigningKey()
        } catch {
            throw PoolUnavailable(
                reason: "invalid_signing_key",
                message: "stored key \(key.record.keyID) of \(key.record.tenantID) is unusable: \(error)",
                isConfiguration: true)
        }
    }
}

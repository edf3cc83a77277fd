import FCM
import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore

/// FCM HTTP v1 behind the provider seam: renders a job's notification into an FCM message once per job by the
/// type's `fcm` mapping, reaches the tenant's Firebase project, and builds a tenant's pool with its newest usable
/// service account (or the simulator's fallback account).
struct FCMService: PushService {
    let store: RelayStore
    let masterKey: MasterKey?
    let target: FCMTarget
    let group: any EventLoopGroup

    /// The one destination of FCM devices: the tenant's Firebase project.
    static let destination = Destination(provider: .fcm)

    var provider: PushProvider { .fcm }

    func destinations(
        of type: TenantConfiguration.NotificationType, tenant: TenantConfiguration
    ) -> Set<Destination> {
        tenant.fcm != nil && type.fcm != nil ? [Self.destination] : []
    }

    func render(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) -> (any ProviderRendering)? {
        guard let fcm = type.fcm else { return nil }
        return try FCMRendering(request, plan: plan, type: type, fcm: fcm)
    }

    func credentialID(tenant: String, destination: Destination) async throws(PoolUnavailable) -> String {
        try await serviceAccount(tenant: tenant).keyID
    }

    func makePool(
        tenant: String, destination: Destination, logger: Logger
    ) async throws -> (pool: any ProviderPool, credentialID: String) {
        let (account, keyID) = try await serviceAccount(tenant: tenant)
        var configuration = FCMPoolConfiguration(account: account, endpoint: target.endpoint, caFile: target.caFile)
        configuration.messages.connections = target.connectionsPerPool
        configuration.messages.maximumConnections = max(target.maximumConnectionsPerPool, target.connectionsPerPool)
        configuration.messagesPerMinute = target.messagesPerMinute
        let pool = try FCMPool(configuration: configuration, eventLoop: group.next(), logger: logger)
        do {
            try await pool.start()
        } catch {
            await pool.shutdown(gracePeriod: .zero)
            let refused = (error as? FCMCredentialError)?.code == .tokenRefused
            throw PoolUnavailable(
                reason: refused ? "token_refused" : "connect_failed",
                message: "FCM pool for \(tenant) (project \(account.projectID)): \(error)", isConfiguration: refused)
        }
        logger.info("FCM pool warm", metadata: ["key_id": "\(keyID)", "project": "\(account.projectID)"])
        return (FCMProviderPool(pool), keyID)
    }

    /// The service account `tenant` sends with: its newest active stored one, else the fallback account (the
    /// simulator's); with the id of its key.
    ///
    /// - Throws: ``PoolUnavailable`` (a configuration fault) when there is none, or the relay cannot open it.
    func serviceAccount(tenant: String) async throws(PoolUnavailable) -> (account: FCMServiceAccount, keyID: String) {
        let stored = StoredCredentials(store: store, masterKey: masterKey)
        if try await !stored.records(tenant: tenant, kind: .fcmServiceAccount).isEmpty {
            let keys = try await stored.unsealed(tenant: tenant, kind: .fcmServiceAccount)
            if let newest = keys.first(where: { $0.record.status == .active })
                ?? keys.first(where: { $0.record.status != .retired })
            {
                do {
                    return (try FCMServiceAccount(json: newest.material), newest.record.keyID)
                } catch {
                    throw PoolUnavailable(
                        reason: "invalid_service_account",
                        message: "stored service account \(newest.record.keyID) of \(tenant) is unusable: \(error)",
                        isConfiguration: true)
                }
            }
        }
        if let fallback = target.fallbackAccounts[tenant] { return (fallback, fallback.privateKeyID) }
        throw PoolUnavailable(
            reason: "no_service_account",
            message: "tenant \(tenant) has no FCM service account "
                + "(pushrelay admin key add \(tenant) --fcm-service-account FILE.json)",
            isConfiguration: true)
    }
}

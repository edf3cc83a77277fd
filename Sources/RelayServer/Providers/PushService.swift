import Logging
import PushRelayProtocol
import RelayStore

/// One push service the relay sends through (APNs; the tests' recording provider): it renders a job's
/// notification for its devices once per job, says which destinations a notification type reaches, and builds the
/// tenants' pools with their credentials. The fan-out, the policy, the holds and the records are the same for
/// every service; only this differs.
protocol PushService: Sendable {
    /// The provider whose devices it serves.
    var provider: PushProvider { get }

    /// The destinations a notification of `type` may reach through this service for `tenant` (APNs: the
    /// environments of the type's bundle id). A device of the provider outside them is a configuration fault.
    func destinations(
        of type: TenantConfiguration.NotificationType, tenant: TenantConfiguration
    ) -> Set<Destination>

    /// The notification of `request` rendered for this provider (neutral fields from `plan`), once per job; `nil`
    /// when `type` cannot reach this provider's devices.
    ///
    /// - Throws: `INVALID_ARGUMENT` naming the field when the provider would refuse the notification.
    func render(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) -> (any ProviderRendering)?

    /// The id of the credential a pool for `tenant`'s `destination` would use now (a key change rebuilds the pools
    /// whose credential is no longer this one).
    ///
    /// - Throws: ``PoolUnavailable``: a configuration fault when there is no usable credential, else a passing
    ///   one (the database did not answer).
    func credentialID(tenant: String, destination: Destination) async throws(PoolUnavailable) -> String

    /// A pool for `tenant`'s `destination`, connected, and the id of the credential it uses.
    func makePool(
        tenant: String, destination: Destination, logger: Logger
    ) async throws -> (pool: any ProviderPool, credentialID: String)
}

/// The push services of a relay, by provider: APNs, and whatever its configuration adds.
struct PushServices: Sendable {
    private let byProvider: [PushProvider: any PushService]

    /// The services, one per provider (a later one replaces an earlier one of the same provider).
    init(_ services: [any PushService]) {
        byProvider = Dictionary(services.map { ($0.provider, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Every service, by provider name.
    var all: [any PushService] {
        byProvider.keys.sorted().compactMap { byProvider[$0] }
    }

    /// The service of `provider`, or `nil` when the relay does not serve it.
    subscript(provider: PushProvider) -> (any PushService)? {
        byProvider[provider]
    }
}

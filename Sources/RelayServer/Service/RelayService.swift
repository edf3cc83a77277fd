import Foundation
package import Logging
package import PushRelayProtocol
package import RelayStore
import SwiftProtobuf
import Synchronization

/// What the relay does for each request, independent of the connection it came on: authentication,
/// devices, sends, jobs, deliveries, preferences, mutes and presence, all scoped by the caller's tenant.
package final class RelayService: Sendable {
    /// The store every request reads and writes.
    package let store: RelayStore
    /// The APNs pools.
    package let pools: PoolRegistry
    /// The result streams.
    package let results: ResultBroadcaster
    /// The limits of every connection.
    package let limits: ProtocolLimits
    /// The request limit of each credential (`RATE_LIMITED` beyond it).
    package let requests: RequestLimiter
    /// The fan-out worker of this process; run it with ``runFanOut()``.
    package let worker: FanOutWorker
    let logger: Logger
    private let tenants: TenantDirectory
    private let credentials: CredentialDirectory
    private let dispatcher: JobDispatcher
    /// Each tenant's share of the database: its requests' statements at once.
    private let statements: TenantStatementGate

    /// A service over `store` sending through `pools`.
    package init(
        store: RelayStore,
        pools: PoolRegistry,
        limits: ProtocolLimits,
        requestsPerSecond: Double = 1_000,
        requestBurst: Int = 2_000,
        statementsPerTenant: Int = 4,
        fanOutTuning: FanOutTuning = .standard,
        logger: Logger
    ) {
        self.requests = RequestLimiter(requestsPerSecond: requestsPerSecond, burst: requestBurst)
        self.store = store
        self.pools = pools
        self.results = ResultBroadcaster()
        self.limits = limits
        self.logger = logger
        let tenants = TenantDirectory(store: store)
        self.tenants = tenants
        self.credentials = CredentialDirectory(store: store)
        self.worker = FanOutWorker(
            store: store, pools: pools, results: results, tenants: tenants, logger: logger, tuning: fanOutTuning)
        self.statements = TenantStatementGate(limit: statementsPerTenant)
        self.dispatcher = JobDispatcher(store: store, worker: worker, pools: pools, statements: statements)
    }

    /// Checks a HELLO: the credential must belong to the named tenant, which must be enabled.
    /// Returns the credential the connection is bound to, with its tenant.
    ///
    /// The error never repeats what HELLO carried: a client that swapped its tenant and its secret must not
    /// see its secret echoed.
    package func authenticate(_ hello: Pushrelay_V1_Hello) async throws(ProtocolError) -> VerifiedCredential {
        let store = store
        let credential = try await fromStore { try await store.verifyCredential(hello.credential) }
        guard let credential, credential.tenantID == hello.tenant else {
            throw ProtocolError(.authenticationFailed, "the credential is not valid for the tenant HELLO names")
        }
        guard let tenant = try await tenants.refresh(credential.tenantID), tenant.enabled else {
            throw ProtocolError(.authenticationFailed, "tenant '\(credential.tenantID)' is disabled")
        }
        return credential
    }

    /// Whether `credential` still gives its rights: `AUTHENTICATION_FAILED` once it is revoked or its tenant
    /// disabled, as read at most a few seconds ago (``rightsLifetime``).
    package func checkRights(_ credential: VerifiedCredential) async throws(ProtocolError) {
        guard try await credentials.isValid(credential.id) else {
            throw ProtocolError(.authenticationFailed, "the credential was revoked")
        }
        guard let record = try await tenants.tenant(credential.tenantID), record.enabled else {
            throw ProtocolError(.authenticationFailed, "tenant '\(credential.tenantID)' is disabled")
        }
    }

    /// The longest a revoke or a tenant's disabling goes unseen by a connection's requests.
    package static var rightsLifetime: Duration { max(CredentialDirectory.lifetime, TenantDirectory.lifetime) }

    /// Answers one request of an authenticated connection of `tenant`: the answer's kind and body.
    /// `logger` carries the request's metadata (`tenant`, `connection`, `request`); failures of the relay
    /// itself (`INTERNAL`, `UNAVAILABLE`) are logged with it, and accepted sends with their `job`. `jobStored` is
    /// called when a SEND's job is stored, before the SEND waits for outcomes (``RequestOrder``).
    package func handle(
        _ frame: Frame,
        caller: VerifiedCredential,
        logger: Logger,
        jobStored: @Sendable () -> Void
    ) async throws(ProtocolError) -> (FrameKind, [UInt8]) {
        do {
            try await checkRights(caller)
            return try await answer(frame, tenant: caller.tenantID, logger: logger, jobStored: jobStored)
        } catch var error {
            error = error.namingRequest(frame.kind)
            if error.code == .internal || error.code == .unavailable {
                logger.warning(
                    "request failed",
                    metadata: [
                        "method": "\(frame.kind.metricName)", "code": "\(error.code.name)",
                        "error": "\(error.message)",
                    ]
                )
            }
            throw error
        }
    }

    private func answer(
        _ frame: Frame,
        tenant tenantID: String,
        logger: Logger,
        jobStored: @Sendable () -> Void
    ) async throws(ProtocolError) -> (FrameKind, [UInt8]) {
        guard let record = try await tenants.tenant(tenantID) else {
            throw ProtocolError(.authenticationFailed, "tenant '\(tenantID)' is gone")
        }
        let tenant = record.configuration
        let request = try Request(frame, limits: limits, nowMilliseconds: Date().unixMilliseconds)
        switch request {
        case .send(let send):
            // A SEND takes its tenant's database slots step by step: a SEND that waits holds none while it waits.
            let answer = try await dispatcher.send(
                send, tenant: tenant, limits: limits, logger: logger, jobStored: jobStored)
            return try Self.encoded(answer, kind: frame.kind)
        case .queryDeliveries, .listDevices:
            // Pages of rows are decoded and encoded on their own thread (``RowReadExecutor``).
            return try await withTaskExecutorPreference(RowReadExecutor.shared) { () async throws(ProtocolError) in
                try await answerInSlot(request, kind: frame.kind, tenant: tenant, logger: logger)
            }
        default:
            return try await answerInSlot(request, kind: frame.kind, tenant: tenant, logger: logger)
        }
    }

    /// Answers a request other than SEND within its tenant's database slot, encoded.
    private func answerInSlot(
        _ request: Request, kind: FrameKind, tenant: TenantConfiguration, logger: Logger
    ) async throws(ProtocolError) -> (FrameKind, [UInt8]) {
        let answer = try await statements.run(tenant: tenant.id) { () async throws(ProtocolError) in
            try await answerRequest(request, tenant: tenant, logger: logger)
        }
        return try Self.encoded(answer, kind: kind)
    }

    private static func encoded(
        _ answer: any SwiftProtobuf.Message, kind: FrameKind
    ) throws(ProtocolError) -> (FrameKind, [UInt8]) {
        do {
            return (kind.answer, try answer.serializedBytes())
        } catch {
            throw ProtocolError(.internal, "the answer could not be encoded: \(error)")
        }
    }

    /// Answers a request other than SEND, within its tenant's database slot. The switch has no `default`: a request
    /// kind added to ``RequestKind`` does not build until it is answered here or by the connection.
    private func answerRequest(
        _ request: Request, tenant: TenantConfiguration, logger: Logger
    ) async throws(ProtocolError) -> any SwiftProtobuf.Message {
        let tenantID = tenant.id
        switch request {
        case .registerDevice(let register): return try await registerDevice(register, tenant: tenant)
        case .unregisterDevice(let unregister): return try await unregisterDevice(unregister, tenant: tenantID)
        case .listDevices(let list): return try await listDevices(list, tenant: tenantID)
        case .jobStatus(let status): return try await jobStatus(status, tenant: tenantID)
        case .cancelJob(let cancel): return try await dispatcher.cancel(cancel, tenant: tenantID, logger: logger)
        case .queryDeliveries(let query): return try await queryDeliveries(query, tenant: tenantID)
        case .listNotificationTypes: return Pushrelay_V1_NotificationTypeList(tenant)
        case .setPreferences(let change): return try await setPreferences(change, tenant: tenant)
        case .getPreferences(let get): return try await preferences(of: get.userID, tenant: tenant)
        case .setMute(let mute): return try await setMute(mute, tenant: tenantID)
        case .clearMute(let clear): return try await clearMute(clear, tenant: tenantID)
        case .listMutes(let list): return try await listMutes(list, tenant: tenantID)
        case .setPresence(let presence): return try await setPresence(presence, tenant: tenantID)
        case .send, .hello, .ping, .goodbye, .subscribeResults, .unsubscribeResults:
            // SEND is answered above, out of the slot; the others by the connection (RelaySessionHandler+Requests).
            throw ProtocolError(.internal, "the request is not one the service answers within a database slot")
        }
    }

    /// Fans out the jobs of every relay process on the database, sharing the work through leases, until the
    /// calling task is cancelled; pages being sent when it is cancelled are finished first.
    package func runFanOut() async {
        await worker.run()
    }
}

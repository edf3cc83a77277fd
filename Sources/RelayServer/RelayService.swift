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
    /// Whether the relay's listener takes connections: set once it listens, cleared when it starts to stop, so that
    /// readiness sends no new backend to a relay that is not (or no longer) listening.
    let listening = Atomic<Bool>(false)
    /// The label sets of `pushrelay_notifications_held` recorded last (set to 0 when they are gone).
    let heldGaugeLabels = Mutex<Set<[String]>>([])

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
        let credential: VerifiedCredential?
        do {
            credential = try await store.verifyCredential(hello.credential)
        } catch {
            throw ProtocolError(error)
        }
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
        let answer: any SwiftProtobuf.Message
        if case .send(let send) = request {
            // A SEND takes its tenant's database slots step by step: a SEND that waits holds none while it waits.
            answer = try await dispatcher.send(
                send, tenant: tenant, limits: limits, logger: logger, jobStored: jobStored)
        } else {
            answer = try await statements.run(tenant: tenantID) { () async throws(ProtocolError) in
                try await answerRequest(request, tenant: tenant, logger: logger)
            }
        }
        do {
            return (frame.kind.answer, try answer.serializedBytes())
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

    // MARK: Devices

    private func registerDevice(
        _ request: Pushrelay_V1_RegisterDevice,
        tenant: TenantConfiguration
    ) async throws(ProtocolError) -> Pushrelay_V1_RegisterDeviceResult {
        let provider = PushProvider(wireName: request.provider)
        guard pools.services[provider] != nil else {
            let served = pools.services.all.map(\.provider.rawValue).joined(separator: ", ")
            throw .invalidArgument(
                "register_device.provider", "this relay does not send to \"\(provider)\" (it sends to \(served))")
        }
        var environment = TenantConfiguration.Environment.production
        if provider == .apns {
            guard let apns = request.environment.apns else {
                throw .invalidArgument("register_device.environment", "environment is PRODUCTION or SANDBOX")
            }
            let environments = Set(tenant.bundleIDs.values.flatMap(\.environments))
            guard environments.contains(apns) else {
                throw .invalidArgument(
                    "register_device.environment",
                    "\(tenant.id) sends only to \(environments.map(\.wireName).sorted().joined(separator: ", ")); "
                        + "a \(apns.wireName) token would never be delivered"
                )
            }
            environment = apns
        }
        let unknownTopics = request.topics.filter { !tenant.subscriptionTopics.contains($0) }
        guard unknownTopics.isEmpty else {
            throw .invalidArgument(
                "register_device.topics",
                "\(unknownTopics.joined(separator: ", ")) not among \(tenant.id)'s subscription topics"
            )
        }
        let registration = DeviceRegistration(
            userID: request.userID, token: request.token, provider: provider, platform: request.platform,
            environment: environment,
            deviceID: request.deviceID.nonEmpty, appVersion: request.appVersion.nonEmpty,
            locale: request.locale.nonEmpty,
            timeZone: request.timeZone.nonEmpty, topics: request.topics
        )
        let result: DeviceRegistrationResult
        do {
            result = try await store.registerDevice(tenant: tenant.id, registration: registration, at: Date())
        } catch {
            throw ProtocolError(error)
        }
        var answer = Pushrelay_V1_RegisterDeviceResult()
        answer.status = .init(result)
        answer.previousUserID = result.previousUserID ?? ""
        answer.replacedToken = result.replacedToken ?? ""
        answer.device = .init(result.device)
        return answer
    }

    private func unregisterDevice(
        _ request: Pushrelay_V1_UnregisterDevice,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_UnregisterDeviceResult {
        var answer = Pushrelay_V1_UnregisterDeviceResult()
        do {
            // Without a token the field rules required a user id and a platform.
            if request.token.isEmpty {
                answer.removed = UInt32(
                    try await store.unregisterDevices(tenant: tenant, user: request.userID, platform: request.platform)
                )
            } else {
                answer.removed = UInt32(try await store.unregisterDevice(tenant: tenant, token: request.token))
            }
        } catch {
            throw ProtocolError(error)
        }
        return answer
    }

    private func listDevices(
        _ request: Pushrelay_V1_ListDevices,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_DeviceList {
        let limit = request.limit == 0 ? Int(FieldRules.defaultQueryLimit) : Int(request.limit)
        let key = try PageCursor.deviceKey(request.cursor, field: "list_devices.cursor")
        do {
            // One more than asked says whether a next page exists.
            let devices = try await store.devices(tenant: tenant, user: request.userID, limit: limit + 1, after: key)
            var answer = Pushrelay_V1_DeviceList()
            answer.devices = devices.prefix(limit).map(Pushrelay_V1_Device.init)
            if devices.count > limit, let last = devices.prefix(limit).last {
                answer.nextCursor = PageCursor.after(last)
            }
            return answer
        } catch {
            throw ProtocolError(error)
        }
    }

    // MARK: Jobs and deliveries

    private func jobStatus(_ request: Pushrelay_V1_JobStatus, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Job
    {
        let job: JobRecord?
        do {
            job = try await store.job(tenant: tenant, id: request.jobID)
        } catch {
            throw ProtocolError(error)
        }
        guard let job else { throw ProtocolError(.notFound, "no job \(request.jobID)", field: "job_status.job_id") }
        var answer = Pushrelay_V1_Job(job)
        if job.state == .running {
            do {
                let held = try await store.heldDevices(tenant: tenant, jobID: job.id)
                answer.waiting = UInt32(clamping: held.devices)
                answer.waitingReason = held.reason ?? ""
            } catch {
                throw ProtocolError(error)
            }
        }
        return answer
    }

    private func queryDeliveries(
        _ request: Pushrelay_V1_QueryDeliveries,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_DeliveryList {
        let limit = request.limit == 0 ? Int(FieldRules.defaultQueryLimit) : Int(request.limit)
        let key = try PageCursor.deliveryKey(request.cursor, field: "query_deliveries.cursor")
        let rows: [DeliveryRecord]
        // One more than asked says whether a next page exists.
        do {
            if !request.jobID.isEmpty {
                rows = try await store.deliveries(tenant: tenant, job: request.jobID, limit: limit + 1, after: key)
            } else if !request.userID.isEmpty {
                rows = try await store.deliveries(tenant: tenant, user: request.userID, limit: limit + 1, after: key)
            } else if !request.token.isEmpty {
                rows = try await store.deliveries(tenant: tenant, token: request.token, limit: limit + 1, after: key)
            } else {
                // A bound past the calendar's end means "until the end": no row is later.
                let latest = FieldRules.latestMilliseconds
                rows = try await store.deliveries(
                    tenant: tenant, from: Date(unixMilliseconds: min(request.fromMs, latest)),
                    to: Date(unixMilliseconds: request.toMs == 0 ? latest : min(request.toMs, latest)),
                    limit: limit + 1, after: key)
            }
        } catch {
            throw ProtocolError(error)
        }
        var answer = Pushrelay_V1_DeliveryList()
        answer.deliveries = rows.prefix(limit).map(Pushrelay_V1_Delivery.init)
        if rows.count > limit, let last = rows.prefix(limit).last {
            answer.nextCursor = PageCursor.after(last)
        }
        return answer
    }

    // MARK: Preferences, mutes, presence

    private func setPreferences(
        _ request: Pushrelay_V1_SetPreferences,
        tenant: TenantConfiguration
    ) async throws(ProtocolError) -> Pushrelay_V1_Preferences {
        var settings: [String: Bool] = [:]
        for preference in request.preferences {
            guard let type = tenant.notificationTypes[preference.notificationType] else {
                throw .invalidArgument(
                    "set_preferences.preferences.notification_type",
                    "unknown notification type '\(preference.notificationType)'"
                )
            }
            guard preference.enabled || type.optOutAllowed else {
                throw .invalidArgument(
                    "set_preferences.preferences.enabled",
                    "'\(preference.notificationType)' is mandatory and cannot be turned off"
                )
            }
            settings[preference.notificationType] = preference.enabled
        }
        do {
            try await store.setPreferences(tenant: tenant.id, user: request.userID, settings)
        } catch {
            throw ProtocolError(error)
        }
        return try await preferences(of: request.userID, tenant: tenant)
    }

    private func preferences(of user: String, tenant: TenantConfiguration) async throws(ProtocolError)
        -> Pushrelay_V1_Preferences
    {
        let stored: [String: Bool]
        do {
            stored = try await store.preferences(tenant: tenant.id, user: user)
        } catch {
            throw ProtocolError(error)
        }
        var answer = Pushrelay_V1_Preferences()
        answer.userID = user
        answer.preferences = tenant.notificationTypes.sorted { $0.key < $1.key }.map { name, type in
            var preference = Pushrelay_V1_TypePreference()
            preference.notificationType = name
            preference.mandatory = !type.optOutAllowed
            preference.enabled = type.optOutAllowed ? stored[name] ?? type.defaultEnabled : true
            return preference
        }
        return answer
    }

    private func setMute(_ request: Pushrelay_V1_SetMute, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Mute
    {
        let until = request.untilMs == 0 ? nil : Date(unixMilliseconds: request.untilMs)
        do {
            let mute = try await store.setMute(
                tenant: tenant, user: request.userID, threadID: request.threadID.nonEmpty,
                scope: request.scope.nonEmpty,
                until: until
            )
            return Pushrelay_V1_Mute(mute)
        } catch {
            throw ProtocolError(error)
        }
    }

    private func clearMute(_ request: Pushrelay_V1_ClearMute, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_ClearMuteResult
    {
        do {
            var answer = Pushrelay_V1_ClearMuteResult()
            answer.removed = UInt32(
                try await store.clearMute(
                    tenant: tenant, user: request.userID, threadID: request.threadID.nonEmpty,
                    scope: request.scope.nonEmpty
                )
            )
            return answer
        } catch {
            throw ProtocolError(error)
        }
    }

    private func listMutes(_ request: Pushrelay_V1_ListMutes, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_MuteList
    {
        do {
            var answer = Pushrelay_V1_MuteList()
            answer.mutes = try await store.mutes(tenant: tenant, user: request.userID).map(Pushrelay_V1_Mute.init)
            return answer
        } catch {
            throw ProtocolError(error)
        }
    }

    private func setPresence(_ request: Pushrelay_V1_SetPresence, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Presence
    {
        let until = request.seconds == 0 ? nil : Date().addingTimeInterval(Double(request.seconds))
        do {
            try await store.setPresence(tenant: tenant, user: request.userID, threadID: request.threadID, until: until)
        } catch {
            throw ProtocolError(error)
        }
        var answer = Pushrelay_V1_Presence()
        answer.userID = request.userID
        answer.threadID = request.threadID
        answer.untilMs = until?.unixMilliseconds ?? 0
        return answer
    }
}

extension Pushrelay_V1_RegisterDeviceResult.Status {
    /// The wire status of a registration's result.
    init(_ result: DeviceRegistrationResult) {
        switch result.status {
        case .created, .updated, .reactivated:
            if result.previousUserID != nil {
                self = .moved
            } else if result.replacedToken != nil {
                self = .replaced
            } else {
                self = result.status == .created ? .created : .updated
            }
        case .notReactivatedAfterInvalidation, .ignoredOutdated:
            self = .stale
        }
    }
}

/// Tenant records, read from the store and kept for a few seconds, so a request does not cost a query
/// for its tenant's configuration and a `tenant sync` or `disable` still takes effect quickly.
actor TenantDirectory {
    private let store: RelayStore
    /// How long a record is kept: a disabled tenant is refused at most this long after `admin tenant disable`.
    static let lifetime: Duration = .seconds(2)

    private var cache: [String: (record: TenantRecord, readAt: ContinuousClock.Instant)] = [:]

    init(store: RelayStore) {
        self.store = store
    }

    /// The tenant's record, at most a few seconds old.
    func tenant(_ id: String) async throws(ProtocolError) -> TenantRecord? {
        if let cached = cache[id], ContinuousClock.now - cached.readAt < Self.lifetime { return cached.record }
        return try await refresh(id)
    }

    /// The tenant's record read now.
    func refresh(_ id: String) async throws(ProtocolError) -> TenantRecord? {
        do {
            guard let record = try await store.tenant(id: id) else {
                cache[id] = nil
                return nil
            }
            cache[id] = (record, ContinuousClock.now)
            return record
        } catch {
            throw ProtocolError(error)
        }
    }
}

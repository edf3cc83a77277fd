import Foundation
import PushRelayProtocol
import RelayStore

/// REGISTER_DEVICE, UNREGISTER_DEVICE and LIST_DEVICES: the tenant's device registry.
extension RelayService {
    func registerDevice(
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
        let store = store
        let result = try await fromStore {
            try await store.registerDevice(tenant: tenant.id, registration: registration, at: Date())
        }
        var answer = Pushrelay_V1_RegisterDeviceResult()
        answer.status = .init(result)
        answer.previousUserID = result.previousUserID ?? ""
        answer.replacedToken = result.replacedToken ?? ""
        answer.device = .init(result.device)
        return answer
    }

    func unregisterDevice(
        _ request: Pushrelay_V1_UnregisterDevice,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_UnregisterDeviceResult {
        let store = store
        var answer = Pushrelay_V1_UnregisterDeviceResult()
        answer.removed = UInt32(
            try await fromStore {
                // Without a token the field rules required a user id and a platform.
                request.token.isEmpty
                    ? try await store.unregisterDevices(
                        tenant: tenant, user: request.userID, platform: request.platform)
                    : try await store.unregisterDevice(tenant: tenant, token: request.token)
            })
        return answer
    }

    func listDevices(
        _ request: Pushrelay_V1_ListDevices,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_DeviceList {
        let limit = request.limit == 0 ? Int(FieldRules.defaultQueryLimit) : Int(request.limit)
        let key = try PageCursor.deviceKey(request.cursor, field: "list_devices.cursor")
        let store = store
        // One more than asked says whether a next page exists.
        let devices = try await fromStore {
            try await store.devices(tenant: tenant, user: request.userID, limit: limit + 1, after: key)
        }
        var answer = Pushrelay_V1_DeviceList()
        answer.devices = devices.prefix(limit).map(Pushrelay_V1_Device.init)
        if devices.count > limit, let last = devices.prefix(limit).last {
            answer.nextCursor = PageCursor.after(last)
        }
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

import Crypto
import Foundation
import Logging
import PushRelayProtocol
import RelayStore

/// A tenant as the run uses it: its configuration (with the run's changes), synthetic devices, key and
/// credential.
struct RunTenant: Sendable {
    /// The configuration synced to the database.
    var configuration: TenantConfiguration
    /// The notification type of every send.
    var notificationType: String
    /// The bundle id that type sends to.
    var bundleID: String
    /// Synthetic devices (users `lt-u0` … and tokens with ``tokenPrefix``), in ranges of one provider and topics.
    var deviceSets: [DeviceSet]
    /// The first 8 hex digits of its tokens.
    var tokenPrefix: String
    /// Its signing key's files.
    var keyFile: String
    /// Key id.
    var keyID: String
    /// Team id.
    var teamID: String
    /// A credential for the wire protocol.
    var credential: String

    var id: String { configuration.id }

    /// Its synthetic devices in all.
    var devices: Int { deviceSets.reduce(0) { $0 + $1.range.count } }

    /// Synthetic devices `range` (indices, user `lt-u<i>`) of one provider, subscribed to `topics`.
    struct DeviceSet: Sendable {
        /// APNs (64 hex digits, platform `ios`) or FCM (an opaque token of Google's length, platform `android`).
        var provider: PushProvider
        /// Device indices.
        var range: Range<Int>
        /// Their topics.
        var topics: [String]
    }

    /// User id of synthetic device `index`.
    static func user(_ index: Int) -> String { "\(userPrefix)\(index)" }
    /// Prefix of the synthetic user ids.
    static let userPrefix = "lt-u"
    /// The subscription topic every synthetic device of an APNs tenant has.
    static let topic = "loadtest"
    /// The FCM tenant's topic of its FCM fan-out: FCM devices only.
    static let fcmTopic = "loadtest-fcm"
    /// The FCM tenant's topic of its mixed fan-out: half APNs and half FCM devices.
    static let mixedTopic = "loadtest-mixed"

    /// The topics of its synthetic devices: ``topic``, and the one its notification type asks for.
    var deviceTopics: [String] {
        [Self.topic] + [configuration.notificationTypes[notificationType]?.subscription].compactMap { $0 }
    }

    /// The topic its fan-outs name: its type's subscription when it has one (such a type goes to that topic only),
    /// else ``topic``. Every synthetic device has both.
    var fanOutTopic: String {
        configuration.notificationTypes[notificationType]?.subscription ?? Self.topic
    }
}

/// Makes the run's tenants: the tenant files with the run's rate, a `loadtest` topic, a type that is sent
/// whatever the hour, a fresh signing key and a credential; then their synthetic devices in bulk.
struct TenantSetup {
    let options: LoadTestOptions
    let store: RelayStore
    let masterKey: MasterKey
    let progress: ProgressLine

    /// Device counts per tenant: its fan-out's size, and enough users for its share of singles and groups (the
    /// groups' users come after the singles' users).
    func deviceCounts() -> [String: Int] {
        let tenants = options.tenantIDs.count
        let singles = (options.singles + tenants - 1) / tenants
        let groupUsers = (options.groups + tenants - 1) / tenants * options.groupSize
        var counts: [String: Int] = [:]
        for (index, id) in options.tenantIDs.enumerated() {
            let fanOut = index < options.fanOutSizes.count ? options.fanOutSizes.sorted()[index] : 0
            counts[id] = max(fanOut, singles + groupUsers, 1)
        }
        return counts
    }

    /// The FCM tenant's devices under `options`: FCM devices for the FCM fan-out's topic, and for the mixed
    /// fan-out's topic its larger half; APNs devices for the mixed fan-out's smaller half. A device in both
    /// fan-outs has both topics.
    static func fcmDeviceSets(_ options: LoadTestOptions) -> [RunTenant.DeviceSet] {
        let fcm = options.fcmFanOut
        let mixedFCM = options.mixedFanOut - options.mixedFanOut / 2
        let both = min(fcm, mixedFCM)
        let sets: [RunTenant.DeviceSet] = [
            .init(provider: .fcm, range: 0..<both, topics: [RunTenant.fcmTopic, RunTenant.mixedTopic]),
            .init(
                provider: .fcm, range: both..<max(fcm, mixedFCM),
                topics: [fcm > mixedFCM ? RunTenant.fcmTopic : RunTenant.mixedTopic]),
            .init(provider: .apns, range: 0..<options.mixedFanOut / 2, topics: [RunTenant.mixedTopic]),
        ]
        return sets.filter { !$0.range.isEmpty }
    }

    /// Creates the tenants (the APNs tenants, then the FCM tenant when the run sends to FCM), keys, credentials
    /// and devices.
    func run() async throws -> (tenants: [RunTenant], fcmTenant: RunTenant?) {
        let all = try TenantConfiguration.loadFolder(options.tenantsFolder)
        let counts = deviceCounts()
        var tenants: [RunTenant] = []
        for id in options.tenantIDs {
            var tenant = try Self.tenant(id, in: all, options: options, index: tenants.count, fcm: false)
            tenant.deviceSets = [.init(provider: .apns, range: 0..<(counts[id] ?? 1), topics: tenant.deviceTopics)]
            tenants.append(tenant)
        }
        if options.runsFCM {
            var tenant = try Self.tenant(
                options.fcmTenantID, in: all, options: options, index: tenants.count, fcm: true)
            tenant.configuration.subscriptionTopics += [RunTenant.fcmTopic, RunTenant.mixedTopic]
            tenant.deviceSets = Self.fcmDeviceSets(options)
            tenants.append(tenant)
        }
        _ = try await store.syncTenants(tenants.map(\.configuration))
        let keys = options.workDirectory + "/keys"
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        for index in tenants.indices {
            let key = P256.Signing.PrivateKey()
            tenants[index].keyID = String(format: "LOADKEY%03d", index + 1)
            tenants[index].teamID = "LOADTEAM01"
            tenants[index].keyFile = "\(keys)/\(tenants[index].id).p8"
            try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: tenants[index].keyFile))
            chmod(tenants[index].keyFile, 0o600)
            try await store.addSigningKey(
                tenant: tenants[index].id, p8PEM: key.pemRepresentation, keyID: tenants[index].keyID,
                teamID: tenants[index].teamID, masterKey: masterKey
            )
            tenants[index].credential = try await store.issueCredential(tenant: tenants[index].id, name: "loadtest")
                .secret
        }
        try await insertDevices(tenants)
        return options.runsFCM ? (Array(tenants.dropLast()), tenants.last) : (tenants, nil)
    }

    /// Tenant `id` of `all` as the run uses it (no devices yet): the run's rate, the `loadtest` topic, a type sent
    /// whatever the hour (one mapped to FCM for the FCM tenant, whose file must name a Firebase project).
    static func tenant(
        _ id: String, in all: [TenantConfiguration], options: LoadTestOptions, index: Int, fcm: Bool
    ) throws -> RunTenant {
        guard var configuration = all.first(where: { $0.id == id }) else {
            throw LoadTestError("no tenant file for \(id) in \(options.tenantsFolder)")
        }
        if fcm && configuration.fcm == nil {
            throw LoadTestError("tenant \(id) names no Firebase project (fcm: project_id:): it cannot send to FCM")
        }
        configuration.rateLimits.notificationsPerSecond = options.notificationsPerSecond
        if !configuration.subscriptionTopics.contains(RunTenant.topic) {
            configuration.subscriptionTopics.append(RunTenant.topic)
        }
        let (type, dropQuietHours) = try notificationType(of: configuration, mappedToFCM: fcm)
        if dropQuietHours { configuration.quietHours = nil }
        if fcm, let subscription = configuration.notificationTypes[type]?.subscription {
            throw LoadTestError("tenant \(id)'s type \(type) goes to topic \(subscription) only: no fan-out topic")
        }
        return RunTenant(
            configuration: configuration, notificationType: type,
            bundleID: configuration.notificationTypes[type]!.bundleID, deviceSets: [],
            tokenPrefix: String(format: "%08x", index + 1), keyFile: "", keyID: "", teamID: "", credential: ""
        )
    }

    private func insertDevices(_ tenants: [RunTenant]) async throws {
        let total = tenants.reduce(0) { $0 + $1.devices }
        let started = ContinuousClock.now
        var done = 0
        for tenant in tenants {
            for set in tenant.deviceSets {
                for start in stride(
                    from: set.range.lowerBound, to: set.range.upperBound, by: RelayStore.syntheticDeviceBatch)
                {
                    let range = start..<min(start + RelayStore.syntheticDeviceBatch, set.range.upperBound)
                    done += try await store.insertSyntheticDevices(
                        tenant: tenant.id, policy: tenant.configuration.tokenPolicy, range: range,
                        userPrefix: RunTenant.userPrefix, tokenPrefix: tenant.tokenPrefix, topics: set.topics,
                        provider: set.provider
                    )
                    let elapsed = (ContinuousClock.now - started).seconds
                    progress.update(
                        phase: "devices", done: done, total: total, rate: Double(done) / max(elapsed, 0.001),
                        elapsed: elapsed
                    )
                }
            }
        }
        try await store.settleDevices()
        let elapsed = (ContinuousClock.now - started).seconds
        progress.finish(
            "devices: \(done) registered in bulk in \(String(format: "%.1f", elapsed)) s "
                + "(\(Int(Double(done) / max(elapsed, 0.001)))/s)"
        )
    }

    /// The tenant's type for the run: an alert type enabled by default (and with `mappedToFCM`, one with an FCM
    /// mapping) and sent in quiet hours (time-sensitive, or the quiet hours let it pass), else the first such type
    /// with quiet hours dropped for the run. Its subscription topic, if it has one, is given to every synthetic
    /// device of an APNs tenant.
    static func notificationType(
        of tenant: TenantConfiguration, mappedToFCM: Bool = false
    ) throws -> (String, dropQuietHours: Bool) {
        let alerts = tenant.notificationTypes.filter {
            $0.value.pushType == .alert && $0.value.defaultEnabled && (!mappedToFCM || $0.value.fcm != nil)
        }
        .sorted { $0.key < $1.key }
        guard let first = alerts.first else {
            throw LoadTestError("tenant \(tenant.id) has no alert type\(mappedToFCM ? " mapped to FCM" : "")")
        }
        for (name, type) in alerts {
            if tenant.quietHours == nil || type.interruptionLevel == .timeSensitive
                || tenant.quietHours?.actions[name] == .pass
            {
                return (name, false)
            }
        }
        return (first.key, true)
    }
}

import Foundation
import Logging
import RelayStore

/// Sends one leased page: policy for each recipient, then the devices through the pools, recording the
/// answers in batches as they come.
struct PageSender {
    let page: JobPage
    let plan: SendPlan
    let tenant: TenantConfiguration
    let store: RelayStore
    let writer: DeliveryWriter
    let pools: PoolRegistry
    let results: ResultBroadcaster
    let pacer: TenantPacer
    /// The process's sends in flight, shared by its pages.
    let window: SharedSendWindow
    /// What this process counted of users' rows of capped types.
    let capCounts: CapCountCache
    /// The page's devices as its planner read them moments ago, when this process planned it; `nil`: they are
    /// read.
    let plannedDevices: [DeviceTarget]?
    /// Whether the page's lease was lost: no new send is started then.
    let lost: @Sendable () -> Bool
    let tuning: FanOutTuning
    /// The worker's logger, with the page's tenant and job.
    let logger: Logger

    /// Sends the page; returns its counts and its last delivery rows, counted but not written yet: they are
    /// written with the page's completion (`RelayStore.completeJobPage(_:owner:counts:lastRows:)`).
    mutating func run() async throws -> (counts: JobPageCounts, lastRows: [DeliveryRecord]) {
        let now = Date()
        var counts = JobPageCounts()
        let policy = RecipientPolicy(
            tenant: tenant,
            notification: PolicyNotification(
                type: plan.notificationType, typeConfiguration: tenant.notificationTypes[plan.notificationType]!,
                threadID: plan.threadID, scope: plan.scope, interruptionLevel: plan.interruptionLevel
            )
        )
        let recipients = try await readRecipients(policy: policy, now: now)
        // A page claimed again counts what its earlier claim recorded; a held page skips devices recorded by
        // another page of the job (held twice when a page was taken over), which counted them.
        if page.claims > 1 {
            for outcome in recipients.recorded.values { count(outcome, into: &counts) }
        }
        if let hold = page.hold, now >= hold.until {
            // Held past the notification's validity: recorded expired, not sent.
            var expired: [DeliveryRecord] = []
            for (token, user) in zip(page.tokens, page.users) where recipients.recorded[token] == nil {
                expired.append(expiredRecord(user: user, token: token, reason: hold.reason, at: now))
            }
            for record in expired { count(record.outcome, into: &counts) }
            return (counts, expired)
        }
        var toSend: [DeviceTarget] = []
        var skips: [DeliveryRecord] = []
        var deferred: [Date: [(token: String, user: String)]] = [:]
        func route(_ device: DeviceTarget) {
            switch policy.decide(user: device.userID, timeZone: device.timeZone, state: recipients.state, now: now) {
            case .send: toSend.append(device)
            case .skip(let reason):
                skips.append(skip(user: device.userID, token: device.token, reason: reason, at: now))
            case .deferUntil(let date): deferred[date, default: []].append((device.token, device.userID))
            }
        }
        if page.topicRange != nil {
            for device in recipients.devices where recipients.recorded[device.token] == nil { route(device) }
        } else {
            let byToken = Dictionary(
                recipients.devices.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
            for (token, user) in zip(page.tokens, page.users) where recipients.recorded[token] == nil {
                guard let device = byToken[token], device.userID == user else {
                    // Unregistered, deactivated or moved to another user since the job was planned.
                    skips.append(skip(user: user, token: token, reason: .noDevice, at: now))
                    continue
                }
                route(device)
            }
        }
        counts.skipped += skips.count
        try await writer.record(skips)
        for (due, group) in deferred {
            try await store.deferJobDevices(
                jobID: page.jobID, tenant: page.tenantID, dueAt: due, tokens: group.map(\.token),
                users: group.map(\.user)
            )
            // While they wait, their rows say why (QUERY_DELIVERIES); their send records its own.
            try await writer.record(
                group.map {
                    DeliveryRecord(
                        tenantID: page.tenantID, jobID: page.jobID, userID: $0.user, token: $0.token,
                        outcome: .deferred, reason: SkipReason.quietHours.rawValue, attempt: 0, sentAt: now,
                        notificationType: plan.notificationType)
                })
            counts.deferred += group.count
        }
        let lastRows = try await send(toSend, counts: &counts)
        return (counts, lastRows)
    }

    /// The page's devices (as its planner handed them over, else as registered now), the rows already recorded
    /// for them (a page taken over) and the policy's state for their users. A claimed page of listed devices
    /// reads all three at once; a claimed topic range page learns its devices first.
    ///
    /// The policy gets each user once (a user may have several devices on a page), sorted: where PostgreSQL's
    /// plan probes an index user by user in the given order, it walks the index in order.
    private func readRecipients(
        policy: RecipientPolicy, now: Date
    ) async throws -> (devices: [DeviceTarget], recorded: [String: DeliveryOutcome], state: PolicyState) {
        let (store, page, audience) = (store, page, plan.audience)
        let devices: [DeviceTarget]
        if let plannedDevices {
            devices = plannedDevices
        } else if let range = page.topicRange {
            devices = try await store.activeDevices(
                tenant: page.tenantID, in: range, excludedUsers: Array(plan.excludedUsers))
        } else {
            async let targets = Self.registeredDevices(of: page, audience: audience, store: store)
            async let earlier =
                page.claims > 1 || page.hold != nil
                ? store.recordedOutcomes(tenant: page.tenantID, jobID: page.jobID, tokens: page.tokens) : [:]
            let state = try await policy.load(
                users: Array(Set(page.users)).sorted(), store: store, counts: capCounts, now: now)
            return (try await targets, try await earlier, state)
        }
        async let earlier =
            page.claims > 1
            ? store.recordedOutcomes(tenant: page.tenantID, jobID: page.jobID, tokens: devices.map(\.token)) : [:]
        let state = try await policy.load(
            users: Array(Set(devices.map(\.userID))).sorted(), store: store, counts: capCounts, now: now)
        return (devices, try await earlier, state)
    }

    /// The devices of a page of listed devices as registered now. A local-time topic page's tokens are some of
    /// a run of the topic's devices in token order, read again by one range scan; other pages look each token up.
    private static func registeredDevices(
        of page: JobPage, audience: SendPlan.Audience, store: RelayStore
    ) async throws -> [DeviceTarget] {
        if case .topic(let topic) = audience, let first = page.tokens.min(), let last = page.tokens.max() {
            return try await store.activeDevices(
                tenant: page.tenantID, topic: topic, storedTokensFrom: first, through: last
            )
        }
        return try await store.deviceTargets(tenant: page.tenantID, storedTokens: page.tokens)
    }

    func skip(user: String, token: String, reason: SkipReason, at date: Date) -> DeliveryRecord {
        DeliveryRecord(
            tenantID: page.tenantID, jobID: page.jobID, userID: user, token: token, outcome: .skipped,
            reason: reason.rawValue, attempt: 0, sentAt: date, notificationType: plan.notificationType
        )
    }

    /// The row of a held device whose notification expired before its provider took it.
    func expiredRecord(user: String, token: String, reason: String, at date: Date) -> DeliveryRecord {
        DeliveryRecord(
            tenantID: page.tenantID, jobID: page.jobID, userID: user, token: token, outcome: .expired,
            reason: reason, attempt: 0, sentAt: date, notificationType: plan.notificationType
        )
    }

    func count(_ outcome: DeliveryOutcome, into counts: inout JobPageCounts) {
        switch outcome {
        case .skipped: counts.skipped += 1
        case .delivered:
            counts.devices += 1
            counts.delivered += 1
        default:
            counts.devices += 1
            counts.failed += 1
        }
    }
}

import APNs
import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import Synchronization

/// Accepts SEND requests as jobs committed in PostgreSQL, then fans each job out to its devices through
/// the tenant's pools, records every attempt in batches, deactivates dead tokens and streams results.
///
/// The fan-out of an accepted job runs in this process; a job accepted by a process that dies before
/// finishing stays `accepted`/`running` in the table (taking such jobs over is the delivery work's lease
/// mechanism, not this type's).
final class JobDispatcher: Sendable {
    private let store: RelayStore
    private let pools: PoolRegistry
    private let results: ResultBroadcaster
    private let logger: Logger
    private let running = Mutex<[String: Task<[Pushrelay_V1_DeviceOutcome], Never>]>([:])

    /// Devices of one job sent at once.
    static let concurrency = 256
    /// Delivery rows written per statement.
    static let recordBatch = 500
    /// Devices read per page of a topic fan-out.
    static let pageSize = 1_000

    init(store: RelayStore, pools: PoolRegistry, results: ResultBroadcaster, logger: Logger) {
        self.store = store
        self.pools = pools
        self.results = results
        self.logger = logger
    }

    /// Accepts `request`: commits its job (or finds the job of its idempotency key), starts the fan-out and
    /// answers at once, or when every device has its outcome if the request asks to wait.
    func send(
        _ request: Pushrelay_V1_Send,
        raw: [UInt8],
        tenant: TenantConfiguration,
        limits: ProtocolLimits
    ) async throws(ProtocolError) -> Pushrelay_V1_SendResult {
        let plan = try SendPlan(request, tenant: tenant, limits: limits)
        if request.sendAtMs > Date().unixMilliseconds + 1_000 {
            throw ProtocolError(.notSupported, "scheduled sends (send_at_ms) are not supported by this relay yet")
        }
        if request.idempotencyKey.utf8.count > SendPlan.maximumIDBytes {
            throw .invalidArgument("send.idempotency_key", "the idempotency key is at most 200 bytes")
        }
        let acceptance: JobAcceptance
        do {
            acceptance = try await store.createJob(
                tenant: tenant.id, notificationType: request.notificationType,
                idempotencyKey: request.idempotencyKey.nonEmpty, request: raw
            )
        } catch {
            throw ProtocolError(error)
        }
        var answer = Pushrelay_V1_SendResult()
        answer.jobID = acceptance.job.id
        answer.duplicate = acceptance.duplicate
        guard !acceptance.duplicate else {
            answer.job = Pushrelay_V1_Job(acceptance.job)
            answer.devices = answer.job.devices
            return answer
        }
        let job = acceptance.job
        let task = Task { await self.run(plan, job: job, tenant: tenant.id, keepOutcomes: request.wait) }
        running.withLock { $0[job.id] = task }
        guard request.wait else {
            answer.job = Pushrelay_V1_Job(job)
            return answer
        }
        let outcomes = await task.value
        answer.outcomes = outcomes
        answer.devices = UInt32(outcomes.count { $0.outcome != "skipped" })
        if let finished = try? await store.job(tenant: tenant.id, id: job.id) {
            answer.job = Pushrelay_V1_Job(finished)
        }
        return answer
    }

    /// Waits for every running fan-out.
    func drain() async {
        while let task = running.withLock({ $0.values.first }) {
            _ = await task.value
        }
    }

    // MARK: Fan-out

    private func run(
        _ plan: SendPlan,
        job: JobRecord,
        tenant: String,
        keepOutcomes: Bool
    ) async -> [Pushrelay_V1_DeviceOutcome] {
        defer { _ = running.withLock { $0.removeValue(forKey: job.id) } }
        var log = logger
        log[metadataKey: "tenant"] = "\(tenant)"
        log[metadataKey: "job"] = "\(job.id)"
        var tally = Tally(keepOutcomes: keepOutcomes)
        do {
            try await store.updateJob(
                tenant: tenant, id: job.id, state: .running, devices: 0, delivered: 0, failed: 0, skipped: 0)
            var pending: [DeliveryRecord] = []
            for try await page in devicePages(plan, tenant: tenant) {
                for user in page.usersWithoutDevice {
                    var outcome = Pushrelay_V1_DeviceOutcome()
                    outcome.userID = user
                    outcome.outcome = "skipped"
                    outcome.reason = "no_device"
                    tally.add(outcome)
                }
                let (records, outcomes) = await deliver(page.devices, plan: plan, job: job, tenant: tenant)
                pending.append(contentsOf: records)
                for outcome in outcomes { tally.add(outcome) }
                if pending.count >= Self.recordBatch {
                    try await store.recordDeliveries(pending, batchSize: Self.recordBatch)
                    pending.removeAll(keepingCapacity: true)
                }
            }
            if !pending.isEmpty { try await store.recordDeliveries(pending, batchSize: Self.recordBatch) }
            try await store.updateJob(
                tenant: tenant, id: job.id, state: .completed, devices: tally.devices, delivered: tally.delivered,
                failed: tally.failed, skipped: tally.skipped
            )
            log.debug("job completed", metadata: ["devices": "\(tally.devices)", "delivered": "\(tally.delivered)"])
        } catch {
            log.error("job failed", metadata: ["error": "\(error)"])
            _ = try? await store.updateJob(
                tenant: tenant, id: job.id, state: .failed, devices: tally.devices, delivered: tally.delivered,
                failed: tally.failed, skipped: tally.skipped, error: "\(error)"
            )
        }
        return tally.outcomes
    }

    /// One page of a job's audience: devices to send to, and named users who have none.
    private struct Page: Sendable {
        var devices: [DeviceRecord]
        var usersWithoutDevice: [String]
    }

    private func devicePages(_ plan: SendPlan, tenant: String) -> AsyncThrowingStream<Page, any Error> {
        let store = self.store
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    switch plan.audience {
                    case .users(let users):
                        let wanted = Array(Set(users).subtracting(plan.excludedUsers)).sorted()
                        for start in stride(from: 0, to: wanted.count, by: Self.pageSize) {
                            let slice = Array(wanted[start..<min(start + Self.pageSize, wanted.count)])
                            let devices = try await store.activeDevices(tenant: tenant, users: slice)
                            let withDevice = Set(devices.map(\.userID))
                            continuation.yield(
                                Page(devices: devices, usersWithoutDevice: slice.filter { !withDevice.contains($0) })
                            )
                        }
                    case .tokens(let tokens):
                        let unique = Array(Set(tokens)).sorted()
                        for start in stride(from: 0, to: unique.count, by: Self.pageSize) {
                            let slice = Array(unique[start..<min(start + Self.pageSize, unique.count)])
                            let devices = try await store.activeDevices(tenant: tenant, tokens: slice)
                            continuation.yield(
                                Page(
                                    devices: devices.filter { !plan.excludedUsers.contains($0.userID) },
                                    usersWithoutDevice: []
                                )
                            )
                        }
                    case .topic(let topic):
                        var after: String?
                        while true {
                            let devices = try await store.activeDevices(
                                tenant: tenant, topic: topic, after: after, limit: Self.pageSize
                            )
                            if devices.isEmpty { break }
                            after = devices.last?.token
                            continuation.yield(
                                Page(
                                    devices: devices.filter { !plan.excludedUsers.contains($0.userID) },
                                    usersWithoutDevice: []
                                )
                            )
                            if devices.count < Self.pageSize { break }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Sends one page, at most ``concurrency`` at once; returns its delivery rows and outcomes.
    private func deliver(
        _ devices: [DeviceRecord],
        plan: SendPlan,
        job: JobRecord,
        tenant: String
    ) async -> ([DeliveryRecord], [Pushrelay_V1_DeviceOutcome]) {
        var records: [DeliveryRecord] = []
        var outcomes: [Pushrelay_V1_DeviceOutcome] = []
        records.reserveCapacity(devices.count)
        outcomes.reserveCapacity(devices.count)
        await withTaskGroup(of: (DeliveryRecord, Pushrelay_V1_DeviceOutcome).self) { group in
            var next = devices.startIndex
            func startOne() {
                guard next < devices.endIndex else { return }
                let device = devices[next]
                next += 1
                group.addTask { await self.deliver(device, plan: plan, job: job, tenant: tenant) }
            }
            for _ in 0..<Self.concurrency { startOne() }
            for await (record, outcome) in group {
                records.append(record)
                outcomes.append(outcome)
                startOne()
            }
        }
        return (records, outcomes)
    }

    private func deliver(
        _ device: DeviceRecord,
        plan: SendPlan,
        job: JobRecord,
        tenant: String
    ) async -> (DeliveryRecord, Pushrelay_V1_DeviceOutcome) {
        let sentAt = Date()
        var outcome = Pushrelay_V1_DeviceOutcome()
        outcome.userID = device.userID
        outcome.token = device.token
        outcome.environment = .init(device.environment)
        var record = DeliveryRecord(
            tenantID: tenant, jobID: job.id, userID: device.userID, token: device.token, apnsID: nil,
            outcome: .configurationFault, reason: nil, attempt: 1, sentAt: sentAt, answeredAt: nil
        )
        guard plan.environments.contains(device.environment) else {
            record.reason = "EnvironmentNotConfigured"
            record.answeredAt = sentAt
            outcome.outcome = record.outcome.wireName
            outcome.reason = "the bundle id \(plan.bundleID) is not configured for \(device.environment.rawValue)"
            return (record, outcome)
        }
        let notification = APNsNotification(
            deviceToken: device.token, bundleID: plan.bundleID, pushType: plan.pushType, priority: plan.priority,
            expiration: plan.expiration(now: sentAt), collapseID: plan.collapseID, payload: plan.payload
        )
        do {
            let pool = try await pools.pool(tenant: tenant, environment: device.environment)
            let report = try await pool.send(notification)
            let answeredAt = Date()
            record.outcome = DeliveryOutcome(report.outcome)
            record.apnsID = report.response?.apnsID
            record.reason = report.response?.reason?.rawValue ?? report.failure.map { "\($0)" }
            record.attempt = max(report.attempts, 1)
            record.answeredAt = answeredAt
            record.latencyMilliseconds = Int(answeredAt.timeIntervalSince(sentAt) * 1000)
            outcome.attempts = UInt32(record.attempt)
            outcome.apnsID = record.apnsID ?? ""
            if report.outcome == .tokenDead {
                let timestamp = report.response?.timestampMilliseconds.map(Date.init(unixMilliseconds:)) ?? answeredAt
                outcome.invalidatedAtMs = timestamp.unixMilliseconds
                await tokenDied(device, reason: record.reason ?? "", at: timestamp, job: job.id, tenant: tenant)
            } else if report.outcome == .delivered {
                var event = Pushrelay_V1_ResultEvent()
                event.receipt = Pushrelay_V1_Delivery(record)
                results.publish(event, tenant: tenant)
            }
        } catch let error as ProtocolError {
            record.outcome = .retryLater
            record.reason = error.message
            record.answeredAt = Date()
        } catch {
            record.outcome = .retryLater
            record.reason = "\(error)"
            record.answeredAt = Date()
        }
        outcome.outcome = record.outcome.wireName
        outcome.reason = record.reason ?? ""
        return (record, outcome)
    }

    private func tokenDied(_ device: DeviceRecord, reason: String, at timestamp: Date, job: String, tenant: String)
        async
    {
        do {
            try await store.deactivateDevice(tenant: tenant, token: device.token, appleTimestamp: timestamp)
        } catch {
            logger.warning("could not deactivate a dead token", metadata: ["tenant": "\(tenant)", "error": "\(error)"])
        }
        var dead = Pushrelay_V1_DeadToken()
        dead.userID = device.userID
        dead.token = device.token
        dead.reason = reason
        dead.invalidatedAtMs = timestamp.unixMilliseconds
        dead.jobID = job
        var event = Pushrelay_V1_ResultEvent()
        event.deadToken = dead
        results.publish(event, tenant: tenant)
    }
}

/// Counts of a job's outcomes, and the outcomes themselves for a caller that waits.
private struct Tally {
    var keepOutcomes: Bool
    var devices = 0
    var delivered = 0
    var failed = 0
    var skipped = 0
    var outcomes: [Pushrelay_V1_DeviceOutcome] = []

    mutating func add(_ outcome: Pushrelay_V1_DeviceOutcome) {
        switch outcome.outcome {
        case "skipped": skipped += 1
        case "delivered":
            devices += 1
            delivered += 1
        default:
            devices += 1
            failed += 1
        }
        if keepOutcomes { outcomes.append(outcome) }
    }
}

import Foundation
import Logging
import PushRelayProtocol
import RelayStore
import SwiftProtobuf
import Synchronization

/// Accepts SEND requests as jobs committed in PostgreSQL and answers them; the fan-out itself is done by
/// ``FanOutWorker``s (in this process and any other relay process on the same database), which plan each
/// job into pages and send the pages under leases.
final class JobDispatcher: Sendable {
    private let store: RelayStore
    private let worker: FanOutWorker
    private let pools: PoolRegistry
    /// Each tenant's share of the database: a SEND's steps take a slot each.
    private let statements: TenantStatementGate
    /// The looks of waiting SENDs at their jobs, one statement per tenant at a time.
    private let looks: WaitedJobLooks

    /// How long a caller waiting for its job waits at first for a signal (``JobSignal``) before it looks at the job's
    /// progress anyway (a page done by another relay process is not signalled); doubled after each look, up to
    /// ``longestWaitPause``. The looks of callers with the same pause fall at the same instants and share a
    /// statement (``WaitedJobLooks``).
    static let firstWaitPause: Duration = .milliseconds(10)
    /// The longest a waiting caller goes without looking at its job: a page done by another relay process is seen
    /// within it; a page done by this one wakes the caller at once.
    static let longestWaitPause: Duration = .seconds(1)

    init(store: RelayStore, worker: FanOutWorker, pools: PoolRegistry, statements: TenantStatementGate) {
        self.store = store
        self.worker = worker
        self.pools = pools
        self.statements = statements
        self.looks = WaitedJobLooks { tenant, jobs throws(ProtocolError) in
            try await statements.run(tenant: tenant) { () async throws(ProtocolError) in
                try await fromStore { try await store.jobsStillDue(tenant: tenant, ids: jobs) }
            }
        }
    }

    /// Accepts `request`: commits its job (or finds the job of its idempotency key) and answers at once,
    /// or, when the request asks to wait, when every device due now has its outcome (or waits for its provider).
    /// The job is logged with `logger`'s request metadata and its `job` id. A SEND no usable key could ever serve
    /// (the tenant has none for the type's environments, or this relay cannot open them) is refused first:
    /// `NO_PROVIDER_KEY` or `PROVIDER_KEY_UNREADABLE`, logged at error level once per tenant and cause.
    /// `jobStored` is called once the job is stored (or found by its key), before any wait for outcomes.
    func send(
        _ request: Pushrelay_V1_Send,
        tenant: TenantConfiguration,
        limits: ProtocolLimits,
        logger: Logger,
        jobStored: @Sendable () -> Void
    ) async throws(ProtocolError) -> Pushrelay_V1_SendResult {
        let plan = try SendPlan(request, tenant: tenant, services: pools.services)
        let stored = try Self.storedForm(of: request)
        if let refusal = await pools.sendRefusal(tenant: tenant.id, destinations: plan.destinations) {
            RelayMetrics.sendRefused(tenant: tenant.id, code: refusal.code)
            throw refusal
        }
        // A job due now goes to a planner of this process that waits for work, if there is one: it is written
        // leased to this process and planned without a claim.
        let scheduledLater = plan.schedule.earliest.map { $0 > Date() } ?? false
        let handing = !scheduledLater && worker.promisePlanner()
        let acceptance: JobAcceptance
        do throws(ProtocolError) {
            acceptance = try await statements.run(tenant: tenant.id) { () async throws(ProtocolError) in
                try await fromStore {
                    try await store.createJob(
                        tenant: tenant.id, notificationType: request.notificationType,
                        idempotencyKey: request.idempotencyKey.nonEmpty, request: stored,
                        sendAt: plan.schedule.earliest, plannedBy: handing ? worker.owner : nil,
                        planningLease: worker.tuning.lease)
                }
            }
        } catch {
            if handing { worker.withdrawPlanner() }
            throw error
        }
        // The database's clock decides whether the job is scheduled for later: such a job is not leased.
        let handed = handing && !acceptance.duplicate && acceptance.job.state == .accepted
        if handing && !handed { worker.withdrawPlanner() }
        var answer = Pushrelay_V1_SendResult()
        answer.jobID = acceptance.job.id
        answer.duplicate = acceptance.duplicate
        answer.job = Pushrelay_V1_Job(acceptance.job)
        logger.debug(
            acceptance.duplicate ? "send is a duplicate of its idempotency key's job" : "job accepted",
            metadata: [
                "job": "\(acceptance.job.id)", "notification_type": "\(request.notificationType)",
                "state": "\(acceptance.job.state.rawValue)",
            ]
        )
        if acceptance.duplicate {
            try Self.checkSameRequest(request, as: acceptance.job)
            answer.devices = answer.job.devices
        } else {
            worker.remember(plan, tenant: tenant, jobID: acceptance.job.id)
            if handed {
                worker.handToPlanner(acceptance.job)
            } else {
                worker.wake()
            }
        }
        jobStored()
        // A SEND with `wait` retried (after UNAVAILABLE, say) waits for its first job's outcomes like the first.
        // A job scheduled for later is answered at once, waiting or not.
        guard request.wait, !scheduledLater else { return answer }
        let progress = try await waitForDueDevices(tenant: tenant.id, jobID: acceptance.job.id)
        answer.job = Pushrelay_V1_Job(progress.job)
        let found = try await statements.run(tenant: tenant.id) { () async throws(ProtocolError) in
            try await outcomes(tenant: tenant.id, jobID: acceptance.job.id, limit: limits.maxRecipients)
        }
        answer.outcomes = found.outcomes
        answer.devices = UInt32(found.devices)
        Self.fit(&answer, in: limits.maxFrameBytes)
        return answer
    }

    /// Cuts the outcomes of `answer` to as many as fit a frame body of `maximumBytes`, saying so
    /// (`outcomes_truncated`): an answer is never larger than the frames the client may send (10,000 users with
    /// long ids and APNs ids make about 2 MiB).
    static func fit(_ answer: inout Pushrelay_V1_SendResult, in maximumBytes: Int) {
        func size(_ message: some SwiftProtobuf.Message) -> Int {
            (try? message.serializedBytes() as [UInt8])?.count ?? 0
        }
        guard size(answer) > maximumBytes else { return }
        var outcomes = answer.outcomes
        answer.outcomes = []
        answer.outcomesTruncated = true
        // Each outcome costs its bytes, its tag and its length prefix (at most 1 + 5 bytes).
        var budget = maximumBytes - size(answer)
        var kept = 0
        for outcome in outcomes {
            let bytes = size(outcome) + 6
            guard bytes <= budget else { break }
            budget -= bytes
            kept += 1
        }
        outcomes.removeSubrange(kept...)
        answer.outcomes = outcomes
    }

    /// Refuses `request` when `job`, found by its idempotency key, was made by another request: a key names one
    /// request (all its fields but `wait`), so a backend that reuses a key for a new notification learns it instead
    /// of silently getting the first job.
    static func checkSameRequest(_ request: Pushrelay_V1_Send, as job: JobRecord) throws(ProtocolError) {
        var first = (try? Pushrelay_V1_Send(serializedBytes: job.request)) ?? Pushrelay_V1_Send()
        var again = request
        (first.wait, again.wait) = (false, false)
        guard first == again else {
            throw .invalidArgument(
                "send.idempotency_key",
                "idempotency key '\(request.idempotencyKey)' names job \(job.id), made by another request in the "
                    + "last 24 hours; a new request takes a new key")
        }
    }

    /// The request as its job stores it: the validated SEND encoded again. `Frame.decode(limits:)` kept none of the
    /// fields this version does not declare (at any depth), so a body padded with unknown fields costs its sender's
    /// frame, not the database (the job stores only what it will execute).
    static func storedForm(of request: Pushrelay_V1_Send) throws(ProtocolError) -> [UInt8] {
        do {
            return try request.serializedBytes()
        } catch {
            throw ProtocolError(.internal, "the request could not be encoded: \(error)")
        }
    }

    /// Cancels a job of `tenant`, logged with `logger`'s request metadata and the `job` id.
    func cancel(
        _ request: Pushrelay_V1_CancelJob,
        tenant: String,
        logger: Logger
    ) async throws(ProtocolError) -> Pushrelay_V1_Job {
        let store = store
        let job = try await fromStore { try await store.cancelJob(tenant: tenant, id: request.jobID) }
        guard let job else { throw ProtocolError(.notFound, "no job \(request.jobID)", field: "cancel_job.job_id") }
        logger.debug("job cancel asked", metadata: ["job": "\(job.id)", "state": "\(job.state.rawValue)"])
        return Pushrelay_V1_Job(job)
    }

    /// Waits until the job is finished, or planned with only pages for later left (scheduled per time zone,
    /// or deferred by quiet hours).
    ///
    /// Each look is a batched one (``WaitedJobLooks``); only a job seen no longer due is read whole.
    private func waitForDueDevices(tenant: String, jobID: String) async throws(ProtocolError) -> JobProgress {
        var pause = Self.firstWaitPause
        while true {
            if try await !looks.isStillDue(tenant: tenant, job: jobID) {
                let progress = try await statements.run(tenant: tenant) { () async throws(ProtocolError) in
                    try await fromStore { try await store.jobProgress(tenant: tenant, id: jobID) }
                }
                guard let progress else { throw ProtocolError(.internal, "job \(jobID) disappeared") }
                // Done, or only pages for later are left (the job stays running until they are sent).
                if progress.job.state.isFinished
                    || (progress.planned && progress.pagesDue == 0 && progress.pagesLater > 0)
                {
                    return progress
                }
            }
            await worker.jobSignal.wait(for: jobID, atMost: pause)
            pause = min(pause * 2, Self.longestWaitPause)
        }
    }

    /// Every recipient's outcome as recorded, newest attempt per device, plus the devices that wait for a
    /// later time; and how many devices they are (every recipient but the skipped ones).
    private func outcomes(tenant: String, jobID: String, limit: Int) async throws(ProtocolError)
        -> (outcomes: [Pushrelay_V1_DeviceOutcome], devices: Int)
    {
        let store = store
        return try await fromStore { () async throws in
            let rows = try await store.deliveries(tenant: tenant, job: jobID, limit: limit * 2)
            var seen: Set<String> = []
            var outcomes: [Pushrelay_V1_DeviceOutcome] = []
            var deadTokens: Set<String> = []
            var skipped = 0
            for row in rows {
                let key = row.token.isEmpty ? "user:" + (row.userID ?? "") : row.token
                guard seen.insert(key).inserted else { continue }
                if row.outcome == .tokenDead { deadTokens.insert(row.token) }
                if row.outcome == .skipped { skipped += 1 }
                var outcome = Pushrelay_V1_DeviceOutcome()
                outcome.userID = row.userID ?? ""
                outcome.token = row.token
                outcome.outcome = row.outcome.wireName
                outcome.reason = row.reason ?? ""
                outcome.providerMessageID = row.providerMessageID ?? ""
                outcome.apnsID = row.apnsMessageID
                outcome.attempts = UInt32(clamping: row.attempt)
                outcomes.append(outcome)
            }
            // A device deferred by quiet hours has its row already; the others scheduled for later have none.
            for device in try await store.laterDevices(tenant: tenant, id: jobID) where !seen.contains(device.token) {
                var outcome = Pushrelay_V1_DeviceOutcome()
                outcome.userID = device.user
                outcome.token = device.token
                if let reason = device.waitReason {
                    outcome.outcome = "waiting"
                    outcome.reason = reason
                } else {
                    outcome.outcome = "deferred"
                    outcome.reason = "scheduled for \(device.dueAt.unixMilliseconds)"
                }
                outcomes.append(outcome)
            }
            // The registry says each token's environment and, for a dead one, Apple's timestamp.
            let tokens = Set(outcomes.map(\.token).filter { !$0.isEmpty })
            var devices: [String: DeviceRecord] = [:]
            for token in deadTokens {
                devices[token] = try await store.devices(tenant: tenant, token: token).first
            }
            for device in try await store.activeDevices(tenant: tenant, tokens: Array(tokens)) {
                devices[device.token] = device
            }
            for index in outcomes.indices {
                guard let device = devices[outcomes[index].token] else { continue }
                outcomes[index].environment = device.provider == .apns ? .init(device.environment) : .unspecified
                if deadTokens.contains(outcomes[index].token) {
                    outcomes[index].invalidatedAtMs = device.invalidatedAt?.unixMilliseconds ?? 0
                }
            }
            return (outcomes.sorted { ($0.userID, $0.token) < ($1.userID, $1.token) }, outcomes.count - skipped)
        }
    }
}

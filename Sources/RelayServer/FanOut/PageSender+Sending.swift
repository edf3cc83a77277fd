import Foundation
import PushRelayProtocol
import RelayStore

extension PageSender {
    /// Sends to `devices`, at most the page's share of the process's ``SendWindow`` at once (more while the
    /// process's sends in flight leave room in it) and paced to the tenant's rate,
    /// handing the answers to the delivery writer every ``FanOutTuning/recordBatch``: sending goes on while they
    /// are written, but the page waits for a batch's write before it hands in the next one. Returns the last
    /// answers' rows (fewer than a batch), counted and not written: the page's completion writes them.
    ///
    /// No task or future per notification: the requests started in one pass are handed to their pool together
    /// (``PassBatches``), whose engine drops their answers into an ``AnswerInbox``, and this task takes the
    /// answers in batches (whatever came while it was recording or pacing). Every provider's devices go the same
    /// way; only their pools and their rendering (``SendPlan/renderings``) differ.
    func send(_ devices: [DeviceTarget], counts: inout JobPageCounts) async throws -> [DeliveryRecord] {
        let rate = tenant.rateLimits.notificationsPerSecond
        let recordBatch = tuning.recordBatch
        let inbox = AnswerInbox()
        var pools = PageSender.Pools(tenant: page.tenantID, registry: self.pools)
        var passes = PassBatches(inbox: inbox)
        // The sends in flight, by position in `devices`: no record is built before the answer comes.
        var started = [StartedSend?](repeating: nil, count: devices.count)
        var inFlight = 0
        // The sends of the process's send window this page holds: its share while it has that many to send, and
        // those it borrowed beyond it while they are in flight.
        let share = window.join(upTo: devices.count)
        var claimed = share
        defer { window.release(claimed) }
        var pending: [DeliveryRecord] = []
        // Devices whose provider cannot take them now, by destination and cause: held, not recorded.
        var held: [HeldGroup: [DeviceTarget]] = [:]
        var deliveredTo: Set<Destination> = []
        // Notifications a provider refused for their devices (never retried), by destination and reason.
        var rejected: [Destination: [String: Int]] = [:]
        var writing: Task<Void, any Error>?
        var latencies: [Duration] = []
        // Sends the pacer allowed and not started yet: it is asked once per burst, not once per send.
        var allowed = 0
        var next = devices.startIndex
        while true {
            // A paced page starts its sends slowly: it stops starting them to record once a batch of answers
            // waits, so that the answers left unrecorded stay within the crash bound.
            while next < devices.endIndex, !lost(), pending.count + inbox.waiting < recordBatch {
                if inFlight >= claimed {
                    guard window.borrow() else { break }
                    claimed += 1
                }
                if allowed == 0 {
                    let room = min(
                        claimed - inFlight + window.room, devices.endIndex - next,
                        recordBatch - pending.count - inbox.waiting)
                    allowed = await pacer.acquire(
                        tenant: page.tenantID, rate: rate, upTo: room, beforeWaiting: { passes.submit() })
                }
                allowed -= 1
                let index = next
                next += 1
                let device = devices[index]
                let startedAt = passes.startTime()
                let destination = device.destination
                var lookup = pools.known(destination, allowed: plan.destinations)
                if lookup == nil { lookup = await pools.lookUp(destination, passes: &passes) }
                switch lookup! {
                case .success(let pool):
                    let request = ProviderRequest(
                        token: device.token, expiration: plan.expiration(now: startedAt.date, hold: page.hold))
                    started[index] = StartedSend(sentAt: startedAt.date, at: startedAt.instant)
                    inFlight += 1
                    passes.append(
                        index, request, to: pool, destination: destination,
                        rendering: plan.renderings[destination.provider]!)
                case .failure(let refusal) where refusal.hold != nil:
                    held[HeldGroup(destination: destination, cause: refusal.hold!), default: []].append(device)
                case .failure(let refusal):
                    var record = unanswered(device, sentAt: startedAt.date, outcome: refusal.outcome)
                    record.reason = refusal.reason
                    record.answeredAt = refusal.outcome == .configurationFault ? startedAt.date : Date()
                    pending.append(record)
                }
            }
            passes.submit()
            // What the page holds beyond its sends in flight and its share of what it has left to send goes back.
            let needed = max(inFlight, min(share, inFlight + devices.endIndex - next))
            if claimed > needed {
                window.release(claimed - needed)
                claimed = needed
            }
            if inFlight == 0 && pending.count < recordBatch { break }
            if inFlight > 0 {
                let answers = await inbox.take(atLeast: min(tuning.answerBatch, inFlight))
                let answeredAt = Date()
                var shortest: Duration?
                var answered = 0
                for answer in answers {
                    guard let send = started[answer.index] else { continue }
                    started[answer.index] = nil
                    inFlight -= 1
                    answered += 1
                    let roundTrip = answer.at - send.at
                    if shortest.map({ roundTrip < $0 }) ?? true { shortest = roundTrip }
                    let device = devices[answer.index]
                    switch await finish(
                        device, send: send, answer: answer, answeredAt: answeredAt, latencies: &latencies)
                    {
                    case .recorded(let record):
                        if record.outcome == .delivered { deliveredTo.insert(device.destination) }
                        if record.outcome == .configurationFault, answer.report.attempts > 0 {
                            rejected[device.destination, default: [:]][record.reason ?? "", default: 0] += 1
                        }
                        pending.append(record)
                    case .held(let cause):
                        held[HeldGroup(destination: device.destination, cause: cause), default: []].append(device)
                    }
                }
                window.record(answers: answered, shortestRoundTrip: shortest)
            }
            if pending.count >= recordBatch {
                try await writing?.value
                writing = record(pending, latencies: latencies, counts: &counts)
                pending.removeAll(keepingCapacity: true)
                latencies.removeAll(keepingCapacity: true)
            }
        }
        try await writing?.value
        pending.append(contentsOf: try await hold(held, counts: &counts))
        tally(pending, latencies: latencies, counts: &counts)
        for destination in deliveredTo {
            await self.pools.reportDelivered(tenant: page.tenantID, destination: destination)
        }
        for (destination, reasons) in rejected {
            await self.pools.reportRejected(tenant: page.tenantID, destination: destination, reasons: reasons)
        }
        return pending
    }

    /// Holds each group of devices in a page of the job due at its next retry (with the schedule's backoff) until
    /// the notification's validity ends, when they are recorded expired instead (the rows returned, not counted
    /// yet). A configuration cause faults its destination, so that the next pages hold without sending. A page
    /// holds its devices of one destination once: claimed again, it writes no second held page. Each hold is
    /// announced on the results stream (`held`).
    private func hold(_ held: [HeldGroup: [DeviceTarget]], counts: inout JobPageCounts) async throws
        -> [DeliveryRecord]
    {
        guard !held.isEmpty else { return [] }
        let now = Date()
        let round = (page.hold?.round ?? 0) + 1
        let until = page.hold?.until ?? plan.holdDeadline(due: page.dueAt)
        var random = SystemRandomNumberGenerator()
        var expired: [DeliveryRecord] = []
        // One held page per destination (written once per page it comes from), for its most frequent cause.
        var byDestination: [Destination: (devices: [DeviceTarget], causes: [HoldCause: Int])] = [:]
        for (group, devices) in held {
            if case .configuration(let reason) = group.cause {
                await pools.reportFault(tenant: page.tenantID, destination: group.destination, reason: reason)
            }
            byDestination[group.destination, default: ([], [:])].devices += devices
            byDestination[group.destination]?.causes[group.cause, default: 0] += devices.count
        }
        for (destination, entry) in byDestination {
            let (devices, causes) = entry
            guard let cause = causes.max(by: { ($0.value, $0.key.reason) < ($1.value, $1.key.reason) })?.key
            else { continue }
            guard now < until else {
                expired += devices.map {
                    expiredRecord(user: $0.userID, token: $0.token, reason: cause.reason, at: now)
                }
                continue
            }
            let due = min(now + RetrySchedule.standard.delay(round: round, using: &random).seconds, until)
            let hold = DeliveryHold(
                round: round, since: page.hold?.since ?? now, until: until, reason: cause.reason,
                environment: destination.storedName)
            try await store.deferJobDevices(
                jobID: page.jobID, tenant: page.tenantID, dueAt: due, tokens: devices.map(\.token),
                users: devices.map(\.userID), hold: hold, fromPage: page.page)
            counts.deferred += devices.count
            RelayMetrics.held(tenant: page.tenantID, reason: cause.reason, count: devices.count)
            announceHeld(devices.count, destination: destination, reason: cause.reason, nextAttempt: due)
            logger.info(
                "devices held for their provider",
                metadata: [
                    "devices": "\(devices.count)", "destination": "\(destination)",
                    "reason": "\(cause.reason)", "round": "\(round)",
                    "next_attempt_in_ms": "\(Int(due.timeIntervalSince(now) * 1000))",
                ])
        }
        return expired
    }

    /// Tells the tenant's results subscribers that `devices` of the job wait for `destination`, why and until when.
    private func announceHeld(_ devices: Int, destination: Destination, reason: String, nextAttempt: Date) {
        guard results.hasSubscribers(tenant: page.tenantID, receipts: false) else { return }
        var held = Pushrelay_V1_HeldDevices()
        held.jobID = page.jobID
        held.devices = UInt32(clamping: devices)
        held.reason = reason
        held.nextAttemptMs = nextAttempt.unixMilliseconds
        held.environment = destination.apnsEnvironment.map(Pushrelay_V1_Environment.init) ?? .unspecified
        var event = Pushrelay_V1_ResultEvent()
        event.held = held
        results.publish(event, tenant: page.tenantID)
    }

    /// Hands a batch of rows to the writer and returns its write; counts the batch's outcomes (a page whose
    /// write fails fails as a whole) and notes its latencies.
    private func record(
        _ rows: [DeliveryRecord], latencies: [Duration], counts: inout JobPageCounts
    ) -> Task<Void, any Error> {
        tally(rows, latencies: latencies, counts: &counts)
        let writer = writer
        return Task { try await writer.record(rows) }
    }

    /// Counts a batch of rows' outcomes into `counts` and notes their providers' latencies.
    private func tally(_ rows: [DeliveryRecord], latencies: [Duration], counts: inout JobPageCounts) {
        RelayMetrics.apnsLatencies(latencies)
        for index in rows.indices { count(rows[index].outcome, into: &counts) }
    }

    /// The row of a send to `device` at `sentAt` before any answer.
    private func unanswered(_ device: DeviceTarget, sentAt: Date, outcome: DeliveryOutcome) -> DeliveryRecord {
        DeliveryRecord(
            tenantID: page.tenantID, jobID: page.jobID, userID: device.userID, token: device.token, outcome: outcome,
            attempt: 1, sentAt: sentAt, notificationType: plan.notificationType
        )
    }

    /// The row of one send answered before `answeredAt` (when this task took it), or why it is held instead; a
    /// dead token is deactivated and announced, a delivery announced to receipt subscribers.
    private func finish(
        _ device: DeviceTarget, send: StartedSend, answer: Answer, answeredAt: Date, latencies: inout [Duration]
    ) async -> Finished {
        let report = answer.report
        if report.attempts > 0 { latencies.append(answer.at - send.at) }
        if let cause = report.hold { return .held(cause) }
        var record = unanswered(device, sentAt: send.sentAt, outcome: report.outcome)
        record.answeredAt = answeredAt
        record.providerMessageID = report.messageID
        record.reason = report.reason
        guard report.attempts > 0 else { return .recorded(record) }
        record.attempt = report.attempts
        record.latencyMilliseconds = Int(answeredAt.timeIntervalSince(record.sentAt) * 1000)
        if report.outcome == .tokenDead {
            if await !tokenDied(device, reason: record.reason ?? "", at: report.timestamp ?? answeredAt) {
                // Apple's rule: a token registered after the time the provider says it stopped being valid stays in
                // use. The device is kept, so the outcome is a failed attempt, not a dead token.
                record.outcome = .retryLater
                record.reason = (record.reason ?? "") + " (kept: registered after its timestamp)"
            }
        } else if report.outcome == .delivered, results.hasSubscribers(tenant: page.tenantID, receipts: true) {
            var event = Pushrelay_V1_ResultEvent()
            event.receipt = Pushrelay_V1_Delivery(record)
            results.publish(event, tenant: page.tenantID)
        }
        return .recorded(record)
    }

    /// Deactivates a token its provider declared dead at `timestamp` and announces it; returns `false` when every
    /// row of the token was registered after `timestamp`, so none was deactivated and nothing is announced.
    private func tokenDied(_ device: DeviceTarget, reason: String, at timestamp: Date) async -> Bool {
        // A database that does not answer leaves the verdict standing: the token is announced dead.
        let deactivated =
            (try? await store.deactivateDevice(tenant: page.tenantID, token: device.token, appleTimestamp: timestamp))
            ?? 1
        guard deactivated > 0 else { return false }
        var dead = Pushrelay_V1_DeadToken()
        dead.userID = device.userID
        dead.token = device.token
        dead.reason = reason
        dead.invalidatedAtMs = timestamp.unixMilliseconds
        dead.jobID = page.jobID
        var event = Pushrelay_V1_ResultEvent()
        event.deadToken = dead
        results.publish(event, tenant: page.tenantID)
        return true
    }
}

/// What one answered send becomes: a row, or a hold.
enum Finished {
    case recorded(DeliveryRecord)
    case held(HoldCause)
}

/// Devices held together: one destination, one cause.
struct HeldGroup: Hashable {
    var destination: Destination
    var cause: HoldCause
}

import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import SwiftProtobuf
import Synchronization

/// Does the fan-out of accepted jobs, sharing the work with the workers of every other relay process on
/// the same database through leases (`FOR UPDATE SKIP LOCKED`):
///
/// - planners (``PagePlanner``) lease one due job at a time each, resolve its audience in pages (never the
///   whole audience in memory) and write them as `job_pages`, each with its due time (per time zone for
///   local-time sends); a job due now that this process accepts while one of its planners waits for work is
///   written leased to this process and handed to that planner (``Handoff``): no claim;
/// - page loops lease due pages (or pages whose lease ran out: their process died) and send each with a
///   ``PageSender``: the tenant's policy for each recipient, the sends through the pools, every attempt
///   recorded, the page completed; a page due now that a planner writes while a loop of its process waits for
///   work is leased to that loop at once, with the devices the planner read (``Handoff``): no claim, no second
///   read;
/// - claims take tenants in turn (``FairShare``: least served lately first, by devices and the tenant's
///   `fanout_weight`), a tenant's opening pages before its other pages, and skip a tenant that has a page here
///   waiting on its rate already; one more loop (``FanOutTuning/openingPageLoops``) takes only jobs' opening pages,
///   so that a single send never waits behind a large fan-out, its own tenant's included.
///
/// A device is sent a job once, except after a crash: results are handed to the process's ``DeliveryWriter``
/// every ``FanOutTuning/recordBatch`` answers, a page's next batch only once its previous one is written, so a
/// process that dies may leave up to its ``SendWindow`` (between ``FanOutTuning/minimumSendsInFlight`` and
/// ``FanOutTuning/maximumSendsInFlight``) + 2 × ``FanOutTuning/recordBatch`` × (``FanOutTuning/pageLoops`` +
/// ``FanOutTuning/openingPageLoops``) sent-but-unrecorded devices; the process that takes a page over skips the devices already recorded and sends
/// the others again.
package final class FanOutWorker: Sendable {
    /// The sizes and timings of this process's fan-out.
    package let tuning: FanOutTuning
    /// This process's name in the leases it takes.
    package let owner: String
    private let store: RelayStore
    private let pools: PoolRegistry
    private let results: ResultBroadcaster
    private let tenants: TenantDirectory
    private let pacer = TenantPacer()
    /// The sends this process keeps in flight, by the round trip it measures.
    private let window: SharedSendWindow
    /// What this process's pages counted of users' rows of capped types.
    private let capCounts = CapCountCache()
    /// Writes the delivery rows of the pages this process sends.
    private let writer: DeliveryWriter
    private let logger: Logger
    /// Wakes one idle planner at a time (a job was accepted; a planner that found a job passes it on).
    private let plannerWake = WakeSignal()
    /// Wakes one idle page loop at a time (a page was written; a loop that found a page passes it on).
    private let pageLoopWake = WakeSignal()
    /// Wakes one idle loop of the opening pages' lane at a time (a job's first page was written).
    private let openingPageWake = WakeSignal()
    /// The order in which this process takes tenants' pages and jobs: least served lately first.
    private let fairShare = Mutex(FairShare())
    /// Jobs this process accepts leased to its waiting planners, which plan them without claiming them.
    private let jobHandoff = Handoff<JobRecord>()
    /// Pages this process is sending, by job and page number.
    private let held = Mutex<[String: HeldPage]>([:])
    /// Jobs this process's planners are planning: the ticker renews their planning leases.
    private let planning = Mutex<Set<String>>([])
    /// Pages the planners lease to this process's waiting page loops as they write them, with their devices.
    private let handoff = Handoff<(page: JobPage, devices: [DeviceTarget])>()
    /// Devices of the pages the planners wrote for any process to claim, for this process's loops.
    private let plannedPages = PlannedPages()
    /// Wakes the SENDs waiting for a job when this process finished planning it or one of its pages.
    let jobSignal = JobSignal()
    /// Send plans of recent jobs, so a job's payload is encoded once per process, not once per page.
    private let plans = Mutex<[String: (plan: SendPlan, tenant: TenantConfiguration)]>([:])

    init(
        store: RelayStore,
        pools: PoolRegistry,
        results: ResultBroadcaster,
        tenants: TenantDirectory,
        logger: Logger,
        tuning: FanOutTuning = .standard,
        owner: String = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(8))"
    ) {
        self.tuning = tuning
        self.window = SharedSendWindow(tuning)
        self.store = store
        self.pools = pools
        self.results = results
        self.tenants = tenants
        self.logger = logger
        self.owner = owner
        self.writer = DeliveryWriter(store: store)
    }

    /// Wakes an idle planner at once: a job was accepted.
    func wake() {
        plannerWake.wakeOne()
    }

    /// Promises the job about to be accepted to a planner of this process that waits for work: the job is
    /// then written leased to ``owner`` for ``FanOutTuning/lease`` and given with ``handToPlanner(_:)``, or the promise
    /// withdrawn with ``withdrawPlanner()``. `false` when every waiting planner has a job promised already.
    func promisePlanner() -> Bool {
        jobHandoff.promise()
    }

    /// Gives a promised planner the job just accepted leased to it: the planner plans it without claiming it.
    func handToPlanner(_ job: JobRecord) {
        jobHandoff.hand(job)
        plannerWake.wakeOne()
    }

    /// Withdraws a planner's promise: the job was not written leased to this process.
    func withdrawPlanner() {
        jobHandoff.withdraw()
    }

    /// Runs the planners, the page loops and the ticker until the task is cancelled; pages being sent finish
    /// first, pages handed over to the loops and not taken yet have their lease ended (another process takes
    /// them at once), and the delivery writer (a task of its own, which cancellation does not reach) writes the
    /// last rows.
    package func run() async {
        let writing = Task { await writer.run() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.tick() }
            for _ in 0..<tuning.planLoops {
                group.addTask { await self.planLoop() }
            }
            for _ in 0..<tuning.pageLoops {
                group.addTask { await self.pageLoop() }
            }
            for _ in 0..<tuning.openingPageLoops {
                group.addTask { await self.openingPageLoop() }
            }
        }
        // Jobs and pages handed over that no planner or loop took are leased to this process: they are let go for
        // any process at once.
        for job in jobHandoff.drain() {
            _ = try? await store.releasePlanning(jobID: job.id, owner: owner)
        }
        for handed in handoff.drain() {
            _ = try? await store.renewJobPageLease(handed.page, owner: owner, lease: .zero)
        }
        writer.close()
        await writing.value
    }

    /// Wakes an idle planner and an idle page loop every ``FanOutTuning/idlePoll`` (work of other processes, pages falling
    /// due: each passes the wake on when it finds work); every third of a lease, renews the leases of the pages
    /// being sent and of the jobs being planned, and completes the jobs whose last page's completion was cut short
    /// (`RelayStore.completeFinishedJobs`); at cancellation, releases the loops for good.
    private func tick() async {
        var sinceRenewal = Duration.zero
        while !Task.isCancelled {
            try? await Task.sleep(for: tuning.idlePoll)
            plannerWake.wakeOne()
            pageLoopWake.wakeOne()
            openingPageWake.wakeOne()
            await stopPagesOfDisabledTenants()
            sinceRenewal += tuning.idlePoll
            guard sinceRenewal >= tuning.lease / 3, !Task.isCancelled else { continue }
            sinceRenewal = .zero
            for held in held.withLock({ Array($0.values) }) {
                let kept = (try? await store.renewJobPageLease(held.page, owner: owner, lease: tuning.lease)) ?? false
                if !kept { held.lost.store(true, ordering: .relaxed) }
            }
            for jobID in planning.withLock({ Array($0) }) {
                let kept =
                    (try? await store.renewPlanningLease(jobID: jobID, owner: owner, lease: tuning.lease)) ?? false
                if !kept {
                    logger.warning(
                        "planning lease lost; another planner may take the job", metadata: ["job": "\(jobID)"])
                }
            }
            do {
                let completed = try await store.completeFinishedJobs()
                if completed > 0 {
                    logger.warning(
                        "completed jobs whose last page's completion was cut short", metadata: ["jobs": "\(completed)"])
                }
            } catch {
                logger.warning("could not complete finished jobs", metadata: ["error": "\(error)"])
            }
        }
        plannerWake.close()
        pageLoopWake.close()
        openingPageWake.close()
    }

    /// Stops the pages being sent for a tenant that was disabled meanwhile: they start no new send (as for a lost
    /// lease) and wait, unclaimed, until the tenant is enabled again.
    private func stopPagesOfDisabledTenants() async {
        let pages = held.withLock { Array($0.values) }
        var enabled: [String: Bool] = [:]
        for page in pages where !page.lost.load(ordering: .relaxed) {
            let tenant = page.page.tenantID
            if enabled[tenant] == nil { enabled[tenant] = (try? await tenants.tenant(tenant)?.enabled) ?? true }
            guard enabled[tenant] == false else { continue }
            page.lost.store(true, ordering: .relaxed)
            logger.notice(
                "tenant disabled; its page stops sending and waits until it is enabled",
                metadata: ["tenant": "\(tenant)", "job": "\(page.page.jobID)"])
        }
    }

    // MARK: Planning

    private func planLoop() async {
        while !Task.isCancelled {
            if let job = jobHandoff.take() {
                await plan(job, claimed: false)
                continue
            }
            do {
                let tenants = fairShare.withLock { $0.order(now: .now) }
                if let job = try await store.claimJobForPlanning(owner: owner, lease: tuning.lease, tenants: tenants) {
                    // More jobs may be waiting: another planner looks.
                    plannerWake.wakeOne()
                    await plan(job, claimed: true)
                    continue
                }
            } catch {
                logger.warning("planner could not claim a job", metadata: ["error": "\(error)"])
            }
            await jobHandoff.waitIdle(on: plannerWake)
        }
    }

    /// Plans `job`: handed over as it was accepted, or `claimed`, when another planner may have begun it.
    private func plan(_ job: JobRecord, claimed: Bool) async {
        var log = logger
        log[metadataKey: "tenant"] = "\(job.tenantID)"
        log[metadataKey: "job"] = "\(job.id)"
        // Planned under a lease the ticker renews, however long the audience takes to write.
        planning.withLock { _ = $0.insert(job.id) }
        defer { _ = planning.withLock { $0.remove(job.id) } }
        do {
            let (plan, _) = try await sendPlan(for: job)
            let earlierPages = claimed ? try await store.listedPagesWritten(jobID: job.id) : nil
            var planner = PagePlanner(
                job: job, plan: plan, store: store, earlierPages: earlierPages, owner: owner, tuning: tuning,
                handoff: handoff,
                plannedPages: plannedPages,
                handOver: { [self] page, devices in
                    // Held from now on, so that the ticker renews its lease until a loop has sent it.
                    held.withLock { $0["\(page.jobID)/\(page.page)"] = HeldPage(page) }
                    handoff.hand((page, devices))
                },
                pageWritten: { [pageLoopWake, openingPageWake] page in
                    pageLoopWake.wakeOne()
                    if page == 1 { openingPageWake.wakeOne() }
                })
            try await planner.writePages()
            try await store.finishPlanning(jobID: job.id, owner: owner)
            jobSignal.signal(job.id)
            log.debug("job planned", metadata: ["last page": "\(planner.nextPage - 1)"])
        } catch let error as RelayStoreError where error.isTransient {
            // Not the job's fault: its planning lease runs out and a planner takes it again (pages already
            // written stand, and it goes on after them).
            log.warning("job planning interrupted by the database; retried", metadata: ["error": "\(error.detail)"])
        } catch {
            log.error("job cannot be planned", metadata: ["error": "\(error)"])
            _ = try? await store.updateJob(
                tenant: job.tenantID, id: job.id, state: .failed, devices: 0, delivered: 0, failed: 0, skipped: 0,
                error: "\(error)"
            )
        }
    }

    /// Keeps the send plan of job `jobID`, just accepted by this process, for its planner and pages: the payload
    /// is encoded once, at acceptance, and the planner starts on the job without rebuilding it.
    func remember(_ plan: SendPlan, tenant: TenantConfiguration, jobID: String) {
        plans.withLock { plans in
            if plans.count >= tuning.planCacheSize { plans.removeAll(keepingCapacity: true) }
            plans[jobID] = (plan, tenant)
        }
    }

    /// The job's send plan, rebuilt from its stored request and its tenant's configuration (once per job
    /// and process).
    private func sendPlan(for job: JobRecord) async throws -> (SendPlan, TenantConfiguration) {
        if let cached = plans.withLock({ $0[job.id] }) { return cached }
        guard let tenant = try await tenants.tenant(job.tenantID)?.configuration else {
            throw ProtocolError(.notFound, "tenant \(job.tenantID) is gone")
        }
        let request = try Pushrelay_V1_Send(serializedBytes: job.request)
        let plan = try SendPlan(request, tenant: tenant, services: pools.services)
        remember(plan, tenant: tenant, jobID: job.id)
        return (plan, tenant)
    }

    // MARK: Sending pages

    private func pageLoop() async {
        while !Task.isCancelled {
            if let handed = handoff.take() {
                await send(handed.page, plannedDevices: handed.devices)
                continue
            }
            do {
                if let page = try await store.claimJobPage(owner: owner, lease: tuning.lease, order: claimOrder()) {
                    // More pages may be due: another loop looks.
                    pageLoopWake.wakeOne()
                    // A topic page this process planned moments ago comes with the devices its planner read.
                    let planned =
                        page.topicRange != nil && page.claims == 1
                        ? plannedPages.take(jobID: page.jobID, page: page.page) : nil
                    await send(page, plannedDevices: planned)
                    continue
                }
            } catch {
                logger.warning("could not claim a page", metadata: ["error": "\(error)"])
            }
            await handoff.waitIdle(on: pageLoopWake)
        }
    }

    /// The lane of jobs' opening pages: a loop that takes only page 1 of a job (a single send, a small job, the
    /// start of a large one), in the tenants' fair order, so that they never queue behind the pages of large
    /// fan-outs that keep the other loops busy. It takes no page handed over by a planner.
    private func openingPageLoop() async {
        while !Task.isCancelled {
            do {
                if let page = try await store.claimJobPage(
                    owner: owner, lease: tuning.lease, order: claimOrder(openingPagesOnly: true))
                {
                    openingPageWake.wakeOne()
                    await send(page)
                    continue
                }
            } catch {
                logger.warning("could not claim an opening page", metadata: ["error": "\(error)"])
            }
            await openingPageWake.wait()
        }
    }

    /// The order of this process's next claim: tenants least served lately first, without the tenants that have
    /// a page here whose sends wait on their rate already (another page of theirs would hold a loop only to
    /// wait too).
    private func claimOrder(openingPagesOnly: Bool = false) -> PageClaimOrder {
        let sending = Set(held.withLock { $0.values.map(\.page.tenantID) })
        return PageClaimOrder(
            tenants: fairShare.withLock { $0.order(now: .now) },
            excluded: sending.filter { pacer.isBehind(tenant: $0) }.sorted(),
            openingPagesOnly: openingPagesOnly
        )
    }

    /// Sends `page`, to `plannedDevices` when its planner handed them over with it, else to the page's devices
    /// as registered now.
    private func send(_ page: JobPage, plannedDevices: [DeviceTarget]? = nil) async {
        var log = logger
        log[metadataKey: "tenant"] = "\(page.tenantID)"
        log[metadataKey: "job"] = "\(page.jobID)"
        // The ticker renews the page's lease while it is held here, and says when it was lost.
        let key = "\(page.jobID)/\(page.page)"
        let holding = held.withLock { held in
            if let handedOver = held[key] { return handedOver }
            let holding = HeldPage(page)
            held[key] = holding
            return holding
        }
        defer { _ = held.withLock { $0.removeValue(forKey: key) } }
        do {
            // The plan of a job planned in this process is at hand; others are rebuilt from the stored job.
            let plan: SendPlan
            let tenant: TenantConfiguration
            if let cached = plans.withLock({ $0[page.jobID] }) {
                (plan, tenant) = cached
            } else {
                guard let job = try await store.job(tenant: page.tenantID, id: page.jobID) else { return }
                (plan, tenant) = try await sendPlan(for: job)
            }
            // A disabled tenant's pages wait, leased to nobody, until it is enabled again (claims skip them).
            guard try await tenants.tenant(page.tenantID)?.enabled ?? false else {
                _ = try? await store.renewJobPageLease(page, owner: owner, lease: .zero)
                log.info("page of a disabled tenant left to wait until it is enabled")
                return
            }
            let devices = page.topicRange == nil ? page.tokens.count : tuning.pageSize(page: page.page)
            fairShare.withLock {
                $0.charge(page.tenantID, devices: devices, weight: tenant.rateLimits.fanoutWeight, now: .now)
            }
            var sender = PageSender(
                page: page, plan: plan, tenant: tenant, store: store, writer: writer, pools: pools, results: results,
                pacer: pacer, window: window, capCounts: capCounts, plannedDevices: plannedDevices,
                lost: { holding.lost.load(ordering: .relaxed) }, tuning: tuning, logger: log
            )
            let (counts, lastRows) = try await sender.run()
            guard !holding.lost.load(ordering: .relaxed) else {
                try await writer.record(lastRows)
                log.warning("page lease lost while sending; another process takes the page over")
                return
            }
            try await store.completeJobPage(page, owner: owner, counts: counts, lastRows: lastRows)
            jobSignal.signal(page.jobID)
            if !lastRows.isEmpty {
                RelayMetrics.writeBatch(lastRows.count)
                RelayMetrics.notifications(lastRows)
            }
        } catch {
            if page.claims < tuning.maximumPageAttempts, Self.isTransient(error) {
                log.error("page failed; it is retried when its lease runs out", metadata: ["error": "\(error)"])
            } else {
                log.error("page given up", metadata: ["attempts": "\(page.claims)", "error": "\(error)"])
                await giveUp(page, log: log)
            }
        }
    }

    /// Whether a page that failed with `error` may succeed when it is tried again: a database that did not answer
    /// (as the store says it, or as a request's error says it).
    private static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? RelayStoreError { return error.isTransient }
        if let error = error as? ProtocolError, error.code == .unavailable { return true }
        return false
    }

    /// Ends a page that cannot be sent: the devices it names without an outcome yet are recorded as failed
    /// (`relay_error`; a topic range page names none), and the page is done, so that its job finishes. Left to its lease (tried again) when the
    /// database does not answer.
    private func giveUp(_ page: JobPage, log: Logger) async {
        do {
            let recorded = try await store.recordedOutcomes(
                tenant: page.tenantID, jobID: page.jobID, tokens: page.tokens)
            let now = Date()
            let rows = zip(page.users, page.tokens).filter { recorded[$0.1] == nil }.map { user, token in
                DeliveryRecord(
                    tenantID: page.tenantID, jobID: page.jobID, userID: user, token: token, outcome: .retryLater,
                    reason: "relay_error", attempt: page.claims, sentAt: now
                )
            }
            try await store.completeJobPage(
                page, owner: owner, counts: JobPageCounts(devices: rows.count, failed: rows.count), lastRows: rows)
        } catch {
            log.warning("page not given up; it is tried again", metadata: ["error": "\(error)"])
        }
    }
}

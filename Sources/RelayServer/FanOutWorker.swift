import APNs
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
/// - planners lease one due job at a time each, resolves its audience in pages of ``firstPageSize`` and then
///   ``laterPageSize`` devices
///   (never the whole audience in memory) and writes them as `job_pages`, each with its due time
///   (per time zone for local-time sends); a job due now that this process accepts while one of its planners
///   waits for work is written leased to this process and handed to that planner (``Handoff``): no claim;
/// - page loops lease due pages (or pages whose lease ran out: their process died), apply the tenant's
///   policy to each recipient, send through the pools, record every attempt, and complete the page; a page due
///   now that a planner writes while a loop of its process waits for work is leased to that loop at once, with
///   the devices the planner read (``Handoff``): no claim, no second read.
///
/// A device is sent a job once, except after a crash: results are handed to the process's ``DeliveryWriter``
/// every ``recordBatch`` answers, a page's next batch only once its previous one is written, so a process that
/// dies may leave up to ``concurrency`` + 2 × ``recordBatch`` sent-but-unrecorded devices
/// per page it was sending, and ``pageLoops`` pages at once; the process that takes the page over skips
/// the devices already recorded and sends the others again.
public final class FanOutWorker: Sendable {
    /// Devices of a job's first page: small, so that its planner statement and policy reads are short and the
    /// first sends start soon after the job is accepted, while the next pages are planned.
    static let openingPageSize = 250
    /// Devices per page of a job's next pages up to page ``pageLoops``: a job of up to 14,250 devices spreads over
    /// every page loop at once. Pages of 2,000 sent by 8 loops of 384 sends each rather than pages of 1,000 by 12
    /// loops of 256 (the same sends in flight, fewer statements per notification): ten interleaved rounds, 10,000
    /// device fan-outs 0.137 → 0.134 s (faster in seven), 100,000 device ones 1.361 → 1.313 s (faster in eight).
    static let firstPageSize = 2_000
    /// Devices per page after those: each page costs a few statements (claim, devices, policy, completion), and
    /// pages of 4,000 sent a 400,000-device fan-out 8 % faster than pages of 1,000 (busy CPU per notification
    /// 27 µs instead of 30 µs).
    static let laterPageSize = 4_000

    /// The number of devices of page `page` (from 1) of a job.
    static func pageSize(page: Int) -> Int {
        page == 1 ? openingPageSize : page <= pageLoops ? firstPageSize : laterPageSize
    }
    /// Sends of one page in flight at once.
    static let concurrency = 384
    /// Answers a page hands to the delivery writer at once while it is sent.
    static let recordBatch = 250
    /// Answers a sending page waits for before it takes them (all of them when fewer are in flight): each take
    /// wakes the page's task and each pass hands the sends it starts to the pools' event loops, so a take per
    /// answer or two cost two thread hops per notification. 96 rather than 32: the relay's CPU in 100,000-device
    /// fan-outs 0.91 → 0.86 s per 100,000 (four each); 128 was slower at 10,000 devices in two rounds of four.
    static let answerBatch = 96
    /// Pages one process sends at once.
    static let pageLoops = 8
    /// Jobs one process plans at once (a burst of small sends is not planned one after the other).
    static let planLoops = 4
    /// How long a page or a planning lease lasts without renewal.
    static let lease: Duration = .seconds(30)
    /// Attempts at a page before it is given up: its devices without an outcome are recorded `failed`
    /// (`relay_error`) and the page is done, so that its job finishes. A page that fails for a reason retrying
    /// cannot fix (its send plan cannot be built) is given up at once.
    static let maximumPageAttempts = 5
    /// How often an idle loop looks for work when nothing wakes it.
    static let idlePoll: Duration = .milliseconds(250)

    /// This process's name in the leases it takes.
    public let owner: String
    private let store: RelayStore
    private let pools: PoolRegistry
    private let results: ResultBroadcaster
    private let tenants: TenantDirectory
    private let pacer = TenantPacer()
    /// What this process's pages counted of users' rows of capped types.
    private let capCounts = CapCountCache()
    /// Writes the delivery rows of the pages this process sends.
    private let writer: DeliveryWriter
    private let logger: Logger
    /// Wakes one idle planner at a time (a job was accepted; a planner that found a job passes it on).
    private let planners = WakeSignal()
    /// Wakes one idle page loop at a time (a page was written; a loop that found a page passes it on).
    private let pageLoops = WakeSignal()
    /// Jobs this process accepts leased to its waiting planners, which plan them without claiming them.
    private let jobHandoff = Handoff<JobRecord>()
    /// Pages this process is sending, by job and page number.
    private let held = Mutex<[String: HeldPage]>([:])
    /// Pages the planners lease to this process's waiting page loops as they write them, with their devices.
    private let handoff = Handoff<(page: JobPage, devices: [DeviceTarget])>()
    /// Devices of the pages the planners wrote for any process to claim, for this process's loops.
    private let plannedPages = PlannedPages()
    /// Send plans of recent jobs, so a job's payload is encoded once per process, not once per page.
    private let plans = Mutex<[String: (plan: SendPlan, tenant: TenantConfiguration)]>([:])
    /// Plans kept before the cache starts again.
    static let planCacheSize = 256

    init(
        store: RelayStore,
        pools: PoolRegistry,
        results: ResultBroadcaster,
        tenants: TenantDirectory,
        logger: Logger,
        owner: String = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(8))"
    ) {
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
        planners.wakeOne()
    }

    /// Promises the job about to be accepted to a planner of this process that waits for work: the job is
    /// then written leased to ``owner`` for ``lease`` and given with ``handToPlanner(_:)``, or the promise
    /// withdrawn with ``withdrawPlanner()``. `false` when every waiting planner has a job promised already.
    func promisePlanner() -> Bool {
        jobHandoff.promise()
    }

    /// Gives a promised planner the job just accepted leased to it: the planner plans it without claiming it.
    func handToPlanner(_ job: JobRecord) {
        jobHandoff.hand(job)
        planners.wakeOne()
    }

    /// Withdraws a planner's promise: the job was not written leased to this process.
    func withdrawPlanner() {
        jobHandoff.withdraw()
    }

    /// Runs the planners, the page loops and the ticker until the task is cancelled; pages being sent finish
    /// first, pages handed over to the loops and not taken yet have their lease ended (another process takes
    /// them at once), and the delivery writer (a task of its own, which cancellation does not reach) writes the
    /// last rows.
    public func run() async {
        let writing = Task { await writer.run() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.tick() }
            for _ in 0..<Self.planLoops {
                group.addTask { await self.planLoop() }
            }
            for _ in 0..<Self.pageLoops {
                group.addTask { await self.pageLoop() }
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

    /// Wakes an idle planner and an idle page loop every ``idlePoll`` (work of other processes, pages falling
    /// due: each passes the wake on when it finds work); every third of a lease, renews the leases of the pages
    /// being sent and completes the jobs whose last page's completion was cut short
    /// (`RelayStore.completeFinishedJobs`); at cancellation, releases the loops for good.
    private func tick() async {
        var sinceRenewal = Duration.zero
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.idlePoll)
            planners.wakeOne()
            pageLoops.wakeOne()
            sinceRenewal += Self.idlePoll
            guard sinceRenewal >= Self.lease / 3, !Task.isCancelled else { continue }
            sinceRenewal = .zero
            for held in held.withLock({ Array($0.values) }) {
                let kept = (try? await store.renewJobPageLease(held.page, owner: owner, lease: Self.lease)) ?? false
                if !kept { held.lost.store(true, ordering: .relaxed) }
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
        planners.close()
        pageLoops.close()
    }

    // MARK: Planning

    private func planLoop() async {
        while !Task.isCancelled {
            if let job = jobHandoff.take() {
                await plan(job, claimed: false)
                continue
            }
            do {
                if let job = try await store.claimJobForPlanning(owner: owner, lease: Self.lease) {
                    // More jobs may be waiting: another planner looks.
                    planners.wakeOne()
                    await plan(job, claimed: true)
                    continue
                }
            } catch {
                logger.warning("planner could not claim a job", metadata: ["error": "\(error)"])
            }
            await jobHandoff.waitIdle(on: planners)
        }
    }

    /// Plans `job`: handed over as it was accepted, or `claimed`, when another planner may have begun it.
    private func plan(_ job: JobRecord, claimed: Bool) async {
        var log = logger
        log[metadataKey: "tenant"] = "\(job.tenantID)"
        log[metadataKey: "job"] = "\(job.id)"
        do {
            let (plan, _) = try await sendPlan(for: job)
            let earlierPages = claimed ? try await store.listedPagesWritten(jobID: job.id) : nil
            var planner = PagePlanner(
                job: job, plan: plan, store: store, earlierPages: earlierPages, owner: owner, handoff: handoff,
                plannedPages: plannedPages,
                handOver: { [self] page, devices in
                    // Held from now on, so that the ticker renews its lease until a loop has sent it.
                    held.withLock { $0["\(page.jobID)/\(page.page)"] = HeldPage(page) }
                    handoff.hand((page, devices))
                },
                pageWritten: pageLoops.wakeOne)
            try await planner.writePages()
            try await store.finishPlanning(jobID: job.id, owner: owner)
            log.debug("job planned", metadata: ["pages": "\(planner.pagesWritten)"])
        } catch RelayStoreError.databaseUnavailable(let reason) {
            // Not the job's fault: its planning lease runs out and a planner takes it again (pages already
            // written stand, and it goes on after them).
            log.warning("job planning interrupted by the database; retried", metadata: ["error": "\(reason)"])
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
            if plans.count >= Self.planCacheSize { plans.removeAll(keepingCapacity: true) }
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
        let plan = try SendPlan(request, tenant: tenant)
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
                if let page = try await store.claimJobPage(owner: owner, lease: Self.lease) {
                    // More pages may be due: another loop looks.
                    pageLoops.wakeOne()
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
            await handoff.waitIdle(on: pageLoops)
        }
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
            var sender = PageSender(
                page: page, plan: plan, tenant: tenant, store: store, writer: writer, pools: pools, results: results,
                pacer: pacer, capCounts: capCounts, plannedDevices: plannedDevices,
                lost: { holding.lost.load(ordering: .relaxed) }
            )
            let (counts, lastRows) = try await sender.run()
            guard !holding.lost.load(ordering: .relaxed) else {
                try await writer.record(lastRows)
                log.warning("page lease lost while sending; another process takes the page over")
                return
            }
            try await store.completeJobPage(page, owner: owner, counts: counts, lastRows: lastRows)
            if !lastRows.isEmpty {
                RelayMetrics.writeBatch(lastRows.count)
                RelayMetrics.notifications(lastRows)
            }
        } catch {
            if page.claims < Self.maximumPageAttempts, Self.isTransient(error) {
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
        if case RelayStoreError.databaseUnavailable = error { return true }
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

/// Resolves a job's audience page by page and writes the pages.
private struct PagePlanner {
    let job: JobRecord
    let plan: SendPlan
    let store: RelayStore
    /// The pages of listed devices an earlier planner of the job wrote: this one writes the devices they do not
    /// hold, as pages after them.
    let earlierPages: ListedPagesWritten?
    /// The planning process, to which a page due now is leased at once when one of its loops waits.
    let owner: String
    /// Says whether a loop waits for a page.
    let handoff: Handoff<(page: JobPage, devices: [DeviceTarget])>
    /// Keeps the devices of a page due now that no loop of this process waited for.
    let plannedPages: PlannedPages
    /// Hands a page leased to `owner` over to its loops, with its devices.
    let handOver: @Sendable (JobPage, [DeviceTarget]) -> Void
    /// Called after each page is written, so that a page loop starts on it while planning goes on.
    let pageWritten: @Sendable () -> Void
    private(set) var pagesWritten = 0

    init(
        job: JobRecord, plan: SendPlan, store: RelayStore, earlierPages: ListedPagesWritten?, owner: String,
        handoff: Handoff<(page: JobPage, devices: [DeviceTarget])>,
        plannedPages: PlannedPages, handOver: @escaping @Sendable (JobPage, [DeviceTarget]) -> Void,
        pageWritten: @escaping @Sendable () -> Void
    ) {
        self.job = job
        self.plan = plan
        self.store = store
        self.earlierPages = earlierPages
        self.owner = owner
        self.handoff = handoff
        self.plannedPages = plannedPages
        self.handOver = handOver
        self.pageWritten = pageWritten
    }

    /// Writes a page due at `dueAt` with `write`, which gets the owner to lease the page to: this process when the
    /// page is due now and a loop of it waits for work that no other page is promised to, else `nil`. A page
    /// written leased (`leased` says which, with its devices) is handed over to that loop at once; a promise not
    /// kept is withdrawn.
    private func writeHandingOver<Written>(
        dueAt: Date,
        _ write: (String?) async throws -> Written,
        leased: (Written) -> (page: JobPage, devices: [DeviceTarget])?
    ) async throws -> Written {
        let handing = dueAt <= Date() && handoff.promise()
        let written: Written
        do {
            written = try await write(handing ? owner : nil)
        } catch {
            if handing { handoff.withdraw() }
            throw error
        }
        if let page = leased(written) {
            handOver(page.page, page.devices)
        } else if handing {
            handoff.withdraw()
        }
        return written
    }

    mutating func writePages() async throws {
        let now = Date()
        var nextPage = (earlierPages?.lastPage ?? 0) + 1
        var withoutDevice: [String] = []
        func write(_ devices: [DeviceTarget]) async throws {
            let devices =
                earlierPages.map { earlier in devices.filter { !earlier.tokens.contains($0.token) } } ?? devices
            // Devices due at different times (local-time sends) go to different pages.
            let byDue = Dictionary(grouping: devices) { plan.schedule.dueAt(timeZone: $0.timeZone, now: now) }
            for (due, group) in byDue.sorted(by: { $0.key < $1.key }) {
                let sorted = group.sorted { $0.token < $1.token }
                _ = try await writeHandingOver(dueAt: due) { owner in
                    try await store.addJobPage(
                        jobID: job.id, tenant: job.tenantID, page: nextPage, dueAt: due, tokens: sorted.map(\.token),
                        users: sorted.map(\.userID), leasedTo: owner, lease: FanOutWorker.lease
                    )
                } leased: {
                    $0.map { ($0, sorted) }
                }
                pageWritten()
                nextPage += 1
            }
        }
        /// Reads the devices of `recipients` and writes them as the next page due at `dueAt`, in one statement.
        func writeListed(_ recipients: ListedRecipients, dueAt: Date) async throws -> [DeviceTarget] {
            let written = try await writeHandingOver(dueAt: dueAt) { owner in
                try await store.addListedJobPage(
                    jobID: job.id, tenant: job.tenantID, page: nextPage, dueAt: dueAt, recipients: recipients,
                    excludedUsers: Array(plan.excludedUsers), subscribedTo: plan.requiredTopics, leasedTo: owner,
                    lease: FanOutWorker.lease
                )
            } leased: { written in
                written.leased.map { ($0, written.devices) }
            }
            if !written.devices.isEmpty {
                pageWritten()
                nextPage += 1
            }
            return written.devices
        }
        // One due time for every device: each page is read and written by one statement.
        let dueAt = plan.schedule.dueAt(now: now)
        switch plan.audience {
        case .users(let users):
            let wanted = Array(Set(users).subtracting(plan.excludedUsers)).sorted()
            var start = 0
            while start < wanted.count {
                let end = min(start + FanOutWorker.pageSize(page: nextPage), wanted.count)
                let slice = Array(wanted[start..<end])
                start = end
                if let dueAt, earlierPages == nil {
                    let found = Set(try await writeListed(.users(slice), dueAt: dueAt).map(\.userID))
                    withoutDevice += slice.filter { !found.contains($0) }
                    continue
                }
                let devices = try await store.activeDevices(
                    tenant: job.tenantID, users: slice, subscribedTo: plan.requiredTopics
                ).map(DeviceTarget.init)
                let found = Set(devices.map(\.userID))
                withoutDevice += slice.filter { !found.contains($0) }
                try await write(devices)
            }
        case .tokens(let tokens):
            let unique = Array(Set(tokens)).sorted()
            var start = 0
            while start < unique.count {
                let end = min(start + FanOutWorker.pageSize(page: nextPage), unique.count)
                let slice = Array(unique[start..<end])
                start = end
                if let dueAt, earlierPages == nil {
                    _ = try await writeListed(.tokens(slice), dueAt: dueAt)
                    continue
                }
                let devices = try await store.activeDevices(
                    tenant: job.tenantID, tokens: slice, subscribedTo: plan.requiredTopics
                ).map(DeviceTarget.init)
                try await write(devices.filter { !plan.excludedUsers.contains($0.userID) })
            }
        case .topic(let topic):
            if let dueAt {
                // One due time for every device: the database writes each page from the topic itself. A page
                // due now is leased at once to a loop of this process that waits for work, if there is one.
                var after: String?
                var size = FanOutWorker.pageSize(page: nextPage)
                while true {
                    let written = try await writeHandingOver(dueAt: dueAt) { owner in
                        // Not leased, its devices are kept for a loop of this process that claims it soon, if there
                        // is room.
                        try await store.addTopicJobPage(
                            jobID: job.id, tenant: job.tenantID, page: nextPage, dueAt: dueAt, topic: topic,
                            after: after, limit: size, excludedUsers: Array(plan.excludedUsers), leasedTo: owner,
                            lease: FanOutWorker.lease,
                            withDevices: owner == nil && dueAt <= Date() && plannedPages.hasRoom()
                        )
                    } leased: {
                        $0?.leased
                    }
                    guard let written else { break }
                    if let devices = written.pendingDevices {
                        plannedPages.keep(devices, jobID: job.id, page: nextPage)
                    }
                    if written.pageDevices > 0 {
                        pageWritten()
                        nextPage += 1
                    }
                    after = written.lastToken
                    // A page that stood ends where its first planner read; whether the topic goes on after it is
                    // for the next page's read to say.
                    if !written.stood, written.devicesRead < size { break }
                    size = FanOutWorker.pageSize(page: nextPage)
                }
                break
            }
            var after: String?
            while true {
                let size = FanOutWorker.pageSize(page: nextPage)
                let devices = try await store.activeDevices(
                    tenant: job.tenantID, topic: topic, after: after, limit: size)
                if devices.isEmpty { break }
                after = devices.map(\.token).max()
                try await write(devices.filter { !plan.excludedUsers.contains($0.userID) })
                if devices.count < size { break }
            }
        }
        // Page 0 sums up the recipients without a device (when there are some); their rows say so.
        let rows = withoutDevice.map {
            DeliveryRecord(
                tenantID: job.tenantID, jobID: job.id, userID: $0, token: "", outcome: .skipped,
                reason: SkipReason.noDevice.rawValue, attempt: 0, sentAt: Date(),
                notificationType: plan.notificationType
            )
        }
        try await store.recordDeliveries(rows, batchSize: 1_000)
        if !rows.isEmpty {
            RelayMetrics.writeBatch(rows.count)
            RelayMetrics.notifications(rows)
        }
        if !withoutDevice.isEmpty {
            try await store.addJobPage(
                jobID: job.id, tenant: job.tenantID, page: 0, dueAt: now, tokens: [], users: [],
                skipped: withoutDevice.count, done: true
            )
        }
        pagesWritten = nextPage
    }
}

/// Sends one leased page: policy for each recipient, then the devices through the pools, recording the
/// answers in batches as they come.
private struct PageSender {
    let page: JobPage
    let plan: SendPlan
    let tenant: TenantConfiguration
    let store: RelayStore
    let writer: DeliveryWriter
    let pools: PoolRegistry
    let results: ResultBroadcaster
    let pacer: TenantPacer
    /// What this process counted of users' rows of capped types.
    let capCounts: CapCountCache
    /// The page's devices as its planner read them moments ago, when this process planned it; `nil`: they are
    /// read.
    let plannedDevices: [DeviceTarget]?
    /// Whether the page's lease was lost: no new send is started then.
    let lost: @Sendable () -> Bool

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
        for outcome in recipients.recorded.values { count(outcome, into: &counts) }
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
                page.claims > 1
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

    private func skip(user: String, token: String, reason: SkipReason, at date: Date) -> DeliveryRecord {
        DeliveryRecord(
            tenantID: page.tenantID, jobID: page.jobID, userID: user, token: token, outcome: .skipped,
            reason: reason.rawValue, attempt: 0, sentAt: date, notificationType: plan.notificationType
        )
    }

    private func count(_ outcome: DeliveryOutcome, into counts: inout JobPageCounts) {
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

    /// Sends to `devices`, at most ``FanOutWorker/concurrency`` at once and paced to the tenant's rate,
    /// handing the answers to the delivery writer every ``FanOutWorker/recordBatch``: sending goes on while they
    /// are written, but the page waits for a batch's write before it hands in the next one. Returns the last
    /// answers' rows (fewer than a batch), counted and not written: the page's completion writes them.
    ///
    /// No task or future per notification: the requests started in one pass are handed to their pool together,
    /// whose event loop drops their answers into an ``AnswerInbox``, and this task takes the answers in batches
    /// (whatever came while it was recording or pacing). The pools are looked up once per environment and page.
    private func send(_ devices: [DeviceTarget], counts: inout JobPageCounts) async throws -> [DeliveryRecord] {
        let rate = tenant.rateLimits.notificationsPerSecond
        let inbox = AnswerInbox()
        var poolByEnvironment: [APNsEnvironment: Result<APNsPool, ProtocolError>] = [:]
        // The sends in flight, by position in `devices`: no record is built before the answer comes.
        var started = [StartedSend?](repeating: nil, count: devices.count)
        var inFlight = 0
        var pending: [DeliveryRecord] = []
        var writing: Task<Void, any Error>?
        var latencies: [Duration] = []
        // Requests started in one pass go to their pool together (one hop to its event loop).
        var batches: [APNsEnvironment: PoolBatch] = [:]
        // Sends the pacer allowed and not started yet: it is asked once per burst, not once per send.
        var allowed = 0
        // When the requests of this pass were started: they leave together, when the pass submits them.
        var passStart: (date: Date, instant: ContinuousClock.Instant)?
        func submitBatches() {
            passStart = nil
            for (environment, batch) in batches where !batch.notifications.isEmpty {
                let indices = batch.indices
                batch.pool.send(batch.notifications) { position, result in
                    inbox.put(Answer(index: indices[position], result: result, at: ContinuousClock.now))
                }
                batches[environment]?.removeAll()
            }
        }
        var next = devices.startIndex
        while true {
            // A paced page starts its sends slowly: it stops starting them to record once a batch of answers
            // waits, so that the answers left unrecorded stay within the crash bound.
            while inFlight < FanOutWorker.concurrency, next < devices.endIndex, !lost(),
                pending.count + inbox.waiting < FanOutWorker.recordBatch
            {
                if allowed == 0 {
                    let room = min(
                        FanOutWorker.concurrency - inFlight, devices.endIndex - next,
                        FanOutWorker.recordBatch - pending.count - inbox.waiting)
                    allowed = await pacer.acquire(
                        tenant: page.tenantID, rate: rate, upTo: room, beforeWaiting: submitBatches)
                }
                allowed -= 1
                let index = next
                let environment = devices[index].environment
                next += 1
                let startedAt = passStart ?? (Date(), ContinuousClock.now)
                passStart = startedAt
                let sentAt = startedAt.date
                guard plan.environments.contains(environment) else {
                    var record = unanswered(devices[index], sentAt: sentAt, outcome: .configurationFault)
                    record.reason = "EnvironmentNotConfigured"
                    record.answeredAt = sentAt
                    pending.append(record)
                    continue
                }
                if poolByEnvironment[environment] == nil {
                    do throws(ProtocolError) {
                        poolByEnvironment[environment] = .success(
                            try await pools.pool(tenant: page.tenantID, environment: environment)
                        )
                    } catch {
                        poolByEnvironment[environment] = .failure(error)
                    }
                    passStart = nil
                }
                switch poolByEnvironment[environment] {
                case .success(let pool):
                    let notification = APNsNotification(
                        deviceToken: devices[index].token, bundleID: plan.bundleID, pushType: plan.pushType,
                        priority: plan.priority, expiration: plan.expiration(now: sentAt), collapseID: plan.collapseID,
                        payload: plan.payload
                    )
                    started[index] = StartedSend(sentAt: sentAt, at: startedAt.instant)
                    inFlight += 1
                    batches[environment, default: PoolBatch(pool: pool)].append(index, notification)
                case .failure(let error):
                    var record = unanswered(devices[index], sentAt: sentAt, outcome: .retryLater)
                    record.reason = error.message
                    record.answeredAt = Date()
                    pending.append(record)
                case nil:
                    preconditionFailure("a pool lookup for every environment before its first send")
                }
            }
            submitBatches()
            if inFlight == 0 && pending.count < FanOutWorker.recordBatch { break }
            if inFlight > 0 {
                let answers = await inbox.take(atLeast: min(FanOutWorker.answerBatch, inFlight))
                let answeredAt = Date()
                for answer in answers {
                    guard let send = started[answer.index] else { continue }
                    started[answer.index] = nil
                    inFlight -= 1
                    pending.append(
                        await finish(
                            devices[answer.index], send: send, answer: answer, answeredAt: answeredAt,
                            latencies: &latencies))
                }
            }
            if pending.count >= FanOutWorker.recordBatch {
                try await writing?.value
                writing = record(pending, latencies: latencies, counts: &counts)
                pending.removeAll(keepingCapacity: true)
                latencies.removeAll(keepingCapacity: true)
            }
        }
        try await writing?.value
        tally(pending, latencies: latencies, counts: &counts)
        return pending
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

    /// Counts a batch of rows' outcomes into `counts` and notes their APNs latencies.
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

    /// The row of one send answered before `answeredAt` (when this task took it); a dead token is deactivated and
    /// announced, a delivery announced to receipt subscribers.
    private func finish(
        _ device: DeviceTarget, send: StartedSend, answer: Answer, answeredAt: Date, latencies: inout [Duration]
    ) async -> DeliveryRecord {
        var record = unanswered(device, sentAt: send.sentAt, outcome: .configurationFault)
        record.answeredAt = answeredAt
        switch answer.result {
        case .success(let report):
            latencies.append(answer.at - send.at)
            record.outcome = DeliveryOutcome(report.outcome)
            record.apnsID = report.response?.apnsID
            record.reason = report.response?.reason?.rawValue ?? report.failure.map { "\($0)" }
            record.attempt = max(report.attempts, 1)
            record.latencyMilliseconds = Int(answeredAt.timeIntervalSince(record.sentAt) * 1000)
            if report.outcome == .tokenDead {
                let timestamp = report.response?.timestampMilliseconds.map(Date.init(unixMilliseconds:)) ?? answeredAt
                if await !tokenDied(device, reason: record.reason ?? "", at: timestamp) {
                    // Apple's rule: a token registered after the time APNs says it stopped being valid stays in
                    // use. The device is kept, so the outcome is a failed attempt, not a dead token.
                    record.outcome = .retryLater
                    record.reason = (record.reason ?? "") + " (kept: registered after its timestamp)"
                }
            } else if report.outcome == .delivered, results.hasSubscribers(tenant: page.tenantID, receipts: true) {
                var event = Pushrelay_V1_ResultEvent()
                event.receipt = Pushrelay_V1_Delivery(record)
                results.publish(event, tenant: page.tenantID)
            }
        case .failure(let error):
            record.outcome = .retryLater
            record.reason = "\(error)"
        }
        return record
    }

    /// Deactivates a token APNs declared dead at `timestamp` and announces it; returns `false` when every row of
    /// the token was registered after `timestamp`, so none was deactivated and nothing is announced.
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

/// One APNs answer for a page: the index of its device, the pool's report (or why there is none), and when
/// it came.
private struct Answer: Sendable {
    var index: Int
    var result: Result<APNsDeliveryReport, any Error>
    var at: ContinuousClock.Instant
}

/// A send in flight: when its row says it was sent, and when it started, for its latency.
private struct StartedSend {
    var sentAt: Date
    var at: ContinuousClock.Instant
}

/// The requests of one pass for one pool, handed to it together, with their devices' positions in the page.
private struct PoolBatch {
    let pool: APNsPool
    private(set) var indices: [Int] = []
    private(set) var notifications: [APNsNotification] = []

    init(pool: APNsPool) {
        self.pool = pool
    }

    /// Adds the request to the device at `index`.
    mutating func append(_ index: Int, _ notification: APNsNotification) {
        indices.append(index)
        notifications.append(notification)
    }

    /// Empties the batch, keeping its capacity for the next pass.
    mutating func removeAll() {
        indices.removeAll(keepingCapacity: true)
        notifications.removeAll(keepingCapacity: true)
    }
}

/// Where the pools' event loops leave a page's answers for the page's task, which takes them in batches.
private final class AnswerInbox: Sendable {
    private struct State {
        var answers: [Answer] = []
        var taker: CheckedContinuation<[Answer], Never>?
        /// How many answers the waiting taker asked for.
        var wanted = 1
    }

    private let state = Mutex<State>(State())
    private let waitingCount = Atomic<Int>(0)

    /// Answers left and not taken yet.
    var waiting: Int { waitingCount.load(ordering: .relaxed) }

    /// Leaves an answer; wakes the task when it waits and the answers it asked for are in.
    func put(_ answer: Answer) {
        let (taker, answers) = state.withLock { state -> (CheckedContinuation<[Answer], Never>?, [Answer]) in
            state.answers.append(answer)
            waitingCount.add(1, ordering: .relaxed)
            guard let taker = state.taker, state.answers.count >= state.wanted else { return (nil, []) }
            state.taker = nil
            waitingCount.subtract(state.answers.count, ordering: .relaxed)
            defer { state.answers = [] }
            return (taker, state.answers)
        }
        taker?.resume(returning: answers)
    }

    /// Every answer left so far, waiting until there are `count` (at least one). One task takes at a time, and
    /// asks for no more answers than it has sends in flight.
    func take(atLeast count: Int) async -> [Answer] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Answer]? in
                guard state.answers.count >= max(count, 1) else {
                    state.taker = continuation
                    state.wanted = max(count, 1)
                    return nil
                }
                waitingCount.subtract(state.answers.count, ordering: .relaxed)
                defer { state.answers = [] }
                return state.answers
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Work leased to this process's own idle loops as it is written, instead of for any process to claim: jobs as
/// they are accepted, for the planners; pages with the devices their planner read, for the page loops. Handed
/// work costs no claim (and a page no second read of its devices). Work is handed over only when a loop waits
/// for work that no other handed work is promised to, so handed work is taken at once.
final class Handoff<Work: Sendable>: Sendable {
    private struct State {
        /// Loops waiting for work.
        var waitingLoops = 0
        /// Work promised to waiting loops, handed over or still being written.
        var promised = 0
        /// Work handed over and not taken yet.
        var work = CircularBuffer<Work>()
    }

    private let state = Mutex(State())

    /// Promises the work about to be written to a waiting loop; `false` when every waiting loop has work
    /// promised already (the work is then written for any process to claim).
    func promise() -> Bool {
        state.withLock { state in
            guard state.waitingLoops > state.promised else { return false }
            state.promised += 1
            return true
        }
    }

    /// Withdraws a promise: the work was not written, or was written before.
    func withdraw() {
        state.withLock { $0.promised -= 1 }
    }

    /// Hands over promised work, leased to this process.
    func hand(_ work: Work) {
        state.withLock { $0.work.append(work) }
    }

    /// The work handed over first and not taken yet, if any.
    func take() -> Work? {
        state.withLock { state in
            guard let next = state.work.popFirst() else { return nil }
            state.promised -= 1
            return next
        }
    }

    /// The work handed over and not taken, which is no longer promised.
    func drain() -> [Work] {
        state.withLock { state in
            defer {
                state.promised -= state.work.count
                state.work.removeAll()
            }
            return Array(state.work)
        }
    }

    /// Waits for `signal`, counted meanwhile as a loop waiting for work.
    func waitIdle(on signal: WakeSignal) async {
        state.withLock { $0.waitingLoops += 1 }
        await signal.wait()
        state.withLock { $0.waitingLoops -= 1 }
    }
}

/// The devices this process's planners read for the topic pages they wrote for any process to claim, while
/// every loop of theirs was busy: the loop of this process that claims such a page soon after sends to them
/// instead of reading its range again (in a 100,000-device fan-out, 23 of its 35 pages were read twice).
///
/// At most ``capacity`` pages, each used for ``maximumAge`` after its planner read it (a device registered or
/// gone since then is not seen, as with a page handed over); a page that another process claims leaves its
/// entry to age out.
final class PlannedPages: Sendable {
    /// The most pages kept (about 600 kB a page of 4,000 devices).
    static let capacity = 32
    /// How long kept devices stand for their page.
    static let maximumAge: Duration = .seconds(10)

    private let pages = Mutex<[String: (devices: [DeviceTarget], at: ContinuousClock.Instant)]>([:])

    /// Whether another page fits, after the pages too old to use are let go.
    func hasRoom(now: ContinuousClock.Instant = .now) -> Bool {
        pages.withLock { pages in
            if pages.count >= Self.capacity {
                pages = pages.filter { now - $0.value.at <= Self.maximumAge }
            }
            return pages.count < Self.capacity
        }
    }

    /// Keeps the devices of page `page` of job `jobID`, read at `now`, unless there is no room.
    func keep(_ devices: [DeviceTarget], jobID: String, page: Int, now: ContinuousClock.Instant = .now) {
        pages.withLock { pages in
            guard pages.count < Self.capacity else { return }
            pages[Self.key(jobID, page)] = (devices, now)
        }
    }

    /// The devices kept for page `page` of job `jobID`, once, if they are recent enough.
    func take(jobID: String, page: Int, now: ContinuousClock.Instant = .now) -> [DeviceTarget]? {
        guard let kept = pages.withLock({ $0.removeValue(forKey: Self.key(jobID, page)) }) else { return nil }
        return now - kept.at <= Self.maximumAge ? kept.devices : nil
    }

    private static func key(_ jobID: String, _ page: Int) -> String {
        "\(jobID.lowercased())/\(page)"
    }
}

/// A page being sent by this process, and whether its lease was lost.
private final class HeldPage: Sendable {
    let page: JobPage
    let lost = Atomic<Bool>(false)

    init(_ page: JobPage) {
        self.page = page
    }
}

/// Wakes waiting loops one at a time: `wakeOne` releases the loop waiting longest or, when none waits, lets
/// the next `wait` return at once (a wake between a loop's empty claim and its wait is not lost). A loop that
/// finds work calls `wakeOne` again, so as many loops wake as there is work, not all of them for every event.
/// After `close`, waiting returns at once.
final class WakeSignal: Sendable {
    private let state = Mutex<(waiters: CircularBuffer<CheckedContinuation<Void, Never>>, woken: Bool, closed: Bool)>(
        ([], false, false)
    )

    /// Releases one waiting loop, or the next one to wait.
    func wakeOne() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiters.popFirst() else {
                state.woken = true
                return nil
            }
            return waiter
        }
        waiter?.resume()
    }

    /// Releases every waiting loop, and every later one at once.
    func close() {
        let all = state.withLock { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in all { waiter.resume() }
    }

    /// Waits for `wakeOne` or `close`; returns at once when woken while no loop waited.
    func wait() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed { return true }
                if state.woken {
                    state.woken = false
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

import Foundation
import RelayStore

/// Resolves a job's audience page by page and writes the pages.
struct PagePlanner {
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
    /// Called with each page's number after it is written, so that a page loop starts on it while planning goes
    /// on.
    let pageWritten: @Sendable (Int) -> Void
    let tuning: FanOutTuning
    /// The number of the next page to write; after ``writePages()``, the number of pages written.
    private(set) var nextPage: Int
    /// Listed recipients without a device the notification could reach, for page 0: users (the token empty) or
    /// tokens (the user empty).
    private var withoutDevice: [ListedRecipient] = []

    init(
        job: JobRecord, plan: SendPlan, store: RelayStore, earlierPages: ListedPagesWritten?, owner: String,
        tuning: FanOutTuning,
        handoff: Handoff<(page: JobPage, devices: [DeviceTarget])>,
        plannedPages: PlannedPages, handOver: @escaping @Sendable (JobPage, [DeviceTarget]) -> Void,
        pageWritten: @escaping @Sendable (Int) -> Void
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
        self.tuning = tuning
        self.nextPage = (earlierPages?.lastPage ?? 0) + 1
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

    /// Writes the job's pages: its listed users or tokens in slices of the page size, or its topic in runs of
    /// tokens, then page 0 for the listed users without a device.
    mutating func writePages() async throws {
        let now = Date()
        // One due time for every device (`nil`: by each device's time zone).
        let dueAt = plan.schedule.dueAt(now: now)
        switch plan.audience {
        case .users(let users):
            try await writeListedPages(
                Array(Set(users).subtracting(plan.excludedUsers)).sorted(), as: ListedRecipients.users, due: dueAt,
                now: now)
        case .tokens(let tokens):
            try await writeListedPages(Array(Set(tokens)).sorted(), as: ListedRecipients.tokens, due: dueAt, now: now)
        case .topic(let topic):
            if let dueAt {
                try await writeTopicPages(topic, dueAt: dueAt)
            } else {
                try await writeTopicPagesByTimeZone(topic, now: now)
            }
        }
        try await recordWithoutDevice(now: now)
    }

    /// Writes `keys` (user ids or tokens, sorted) in pages. With one due time for every device, each page is read
    /// and written by one statement; else (or after an earlier planner) each slice's devices are read, then
    /// written by due time. Users without a device are kept for page 0.
    private mutating func writeListedPages(
        _ keys: [String], as recipientsOf: ([String]) -> ListedRecipients, due dueAt: Date?, now: Date
    ) async throws {
        var start = keys.startIndex
        while start < keys.endIndex {
            let end = min(start + tuning.pageSize(page: nextPage), keys.endIndex)
            let recipients = recipientsOf(Array(keys[start..<end]))
            start = end
            let devices: [DeviceTarget]
            if let dueAt, earlierPages == nil {
                devices = try await writeListed(recipients, dueAt: dueAt)
            } else {
                devices = try await store.activeDevices(
                    tenant: job.tenantID, listed: recipients, subscribedTo: plan.requiredTopics
                ).map(DeviceTarget.init)
                try await write(devices.filter { !plan.excludedUsers.contains($0.userID) }, now: now)
            }
            switch recipients {
            case .users(let users):
                let found = Set(devices.map(\.userID))
                withoutDevice += users.filter { !found.contains($0) }.map { ListedRecipient(user: $0, token: "") }
            case .tokens(let tokens):
                let found = Set(devices.map(\.token))
                // The plan's tokens are as stored (``SendPlan/Audience/tokens``).
                withoutDevice += tokens.filter { !found.contains($0) }.map { ListedRecipient(user: nil, token: $0) }
            }
        }
    }

    /// Writes `devices` as the next pages, one per due time (local-time sends), each sorted by token.
    private mutating func write(_ devices: [DeviceTarget], now: Date) async throws {
        let devices =
            earlierPages.map { earlier in devices.filter { !earlier.tokens.contains($0.token) } } ?? devices
        let byDue = Dictionary(grouping: devices) { plan.schedule.dueAt(timeZone: $0.timeZone, now: now) }
        for (due, group) in byDue.sorted(by: { $0.key < $1.key }) {
            let sorted = group.sorted { $0.token < $1.token }
            let (job, store, page, lease) = (job, store, nextPage, tuning.lease)
            _ = try await writeHandingOver(dueAt: due) { owner in
                try await store.addJobPage(
                    jobID: job.id, tenant: job.tenantID, page: page, dueAt: due, tokens: sorted.map(\.token),
                    users: sorted.map(\.userID), leasedTo: owner, lease: lease
                )
            } leased: {
                $0.map { ($0, sorted) }
            }
            pageWritten(nextPage)
            nextPage += 1
        }
    }

    /// Reads the devices of `recipients` and writes them as the next page due at `dueAt`, in one statement;
    /// returns the devices.
    private mutating func writeListed(_ recipients: ListedRecipients, dueAt: Date) async throws -> [DeviceTarget] {
        let (job, plan, store, page, lease) = (job, plan, store, nextPage, tuning.lease)
        let written = try await writeHandingOver(dueAt: dueAt) { owner in
            try await store.addListedJobPage(
                jobID: job.id, tenant: job.tenantID, page: page, dueAt: dueAt, recipients: recipients,
                excludedUsers: Array(plan.excludedUsers), subscribedTo: plan.requiredTopics, leasedTo: owner,
                lease: lease
            )
        } leased: { written in
            written.leased.map { ($0, written.devices) }
        }
        if !written.devices.isEmpty {
            pageWritten(nextPage)
            nextPage += 1
        }
        return written.devices
    }

    /// Writes a topic's devices due at `dueAt` as pages the database reads from the topic itself. A page due now
    /// is leased at once to a loop of this process that waits for work, if there is one; else its devices are
    /// kept for a loop of this process that claims it soon, if there is room.
    private mutating func writeTopicPages(_ topic: String, dueAt: Date) async throws {
        var after: String?
        var size = tuning.pageSize(page: nextPage)
        while true {
            let (job, plan, store, page, lease, plannedPages) = (job, plan, store, nextPage, tuning.lease, plannedPages)
            let written = try await writeHandingOver(dueAt: dueAt) { owner in
                try await store.addTopicJobPage(
                    jobID: job.id, tenant: job.tenantID, page: page, dueAt: dueAt, topic: topic, after: after,
                    limit: size, excludedUsers: Array(plan.excludedUsers), leasedTo: owner, lease: lease,
                    withDevices: owner == nil && dueAt <= Date() && plannedPages.hasRoom()
                )
            } leased: {
                $0?.leased
            }
            guard let written else { return }
            if let devices = written.pendingDevices {
                plannedPages.keep(devices, jobID: job.id, page: nextPage)
            }
            if written.pageDevices > 0 {
                pageWritten(nextPage)
                nextPage += 1
            }
            after = written.lastToken
            // A page that stood ends where its first planner read; whether the topic goes on after it is for the
            // next page's read to say.
            if !written.stood, written.devicesRead < size { return }
            size = tuning.pageSize(page: nextPage)
        }
    }

    /// Reads a topic's devices in runs of tokens and writes them by each device's due time (local-time sends).
    private mutating func writeTopicPagesByTimeZone(_ topic: String, now: Date) async throws {
        var after: String?
        while true {
            let size = tuning.pageSize(page: nextPage)
            let devices = try await store.activeDevices(tenant: job.tenantID, topic: topic, after: after, limit: size)
            if devices.isEmpty { return }
            after = devices.map(\.token).max()
            try await write(devices.filter { !plan.excludedUsers.contains($0.userID) }, now: now)
            if devices.count < size { return }
        }
    }

    /// Records the listed recipients without a device as skipped, summed up by page 0 (when there are some):
    /// `not_subscribed` when the recipient has active devices, none subscribed to the type's topic, else
    /// `no_device`.
    private func recordWithoutDevice(now: Date) async throws {
        guard !withoutDevice.isEmpty else { return }
        var unsubscribed: Set<String> = []
        if !plan.requiredTopics.isEmpty {
            let users = withoutDevice.compactMap(\.user)
            let tokens = withoutDevice.filter { $0.user == nil }.map(\.token)
            unsubscribed.formUnion(try await store.activeDevices(tenant: job.tenantID, users: users).map(\.userID))
            unsubscribed.formUnion(try await store.activeDevices(tenant: job.tenantID, tokens: tokens).map(\.token))
        }
        let rows = withoutDevice.map { recipient in
            let reason: SkipReason =
                unsubscribed.contains(recipient.user ?? recipient.token) ? .notSubscribed : .noDevice
            return DeliveryRecord(
                tenantID: job.tenantID, jobID: job.id, userID: recipient.user, token: recipient.token,
                outcome: .skipped, reason: reason.rawValue, attempt: 0, sentAt: Date(),
                notificationType: plan.notificationType
            )
        }
        try await store.recordDeliveries(rows, batchSize: 1_000)
        RelayMetrics.writeBatch(rows.count)
        RelayMetrics.notifications(rows)
        try await store.addJobPage(
            jobID: job.id, tenant: job.tenantID, page: 0, dueAt: now, tokens: [], users: [],
            skipped: withoutDevice.count, done: true
        )
    }
}

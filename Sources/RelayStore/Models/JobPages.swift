package import Foundation
import Logging
import PostgresNIO

/// A page of a job's fan-out: up to a few hundred devices due at one time, leased by one relay process.
package struct JobPage: Sendable, Hashable {
    /// The job the page belongs to.
    package var jobID: String
    /// The page's number within the job (0 is the planner's own summary row).
    package var page: Int
    /// The tenant of the job.
    package var tenantID: String
    /// When the page may be sent.
    package var dueAt: Date
    /// The devices' tokens (empty for a topic range page).
    package var tokens: [String]
    /// The devices' users, one per token (empty for a topic range page).
    package var users: [String]
    /// For a topic page due at one time, the run of the topic's devices it sends to, resolved when it is sent;
    /// `nil` for a page of listed devices (`tokens` and `users`).
    package var topicRange: TopicRange?
    /// How many times the page has been claimed; more than 1 means a process lost it (crash or stall).
    package var claims: Int
    /// For a page of devices held while their provider could not take them, the hold; `nil` for other pages.
    package var hold: DeliveryHold? = nil
}

/// Which due page a claim takes (``RelayStore/claimJobPage(owner:lease:order:)``): tenants in turn, and a loop
/// kept for the opening pages of jobs, so that single sends and small jobs do not queue behind a large fan-out.
package struct PageClaimOrder: Sendable, Hashable {
    /// Tenants in the order they are served, least served lately first; a tenant not listed goes before all of
    /// them. Within a tenant, jobs' opening pages (page 1) go first, then by due time.
    package var tenants: [String]
    /// Tenants whose pages are not taken by this claim (their sends wait on their own rate already).
    package var excluded: [String]
    /// Only the opening page (page 1) of a job, the smallest of its pages: a single send, a small job, or the
    /// start of a large one.
    package var openingPagesOnly: Bool

    /// An order serving `tenants` in turn, skipping `excluded`, taking only opening pages when `openingPagesOnly`.
    package init(tenants: [String] = [], excluded: [String] = [], openingPagesOnly: Bool = false) {
        self.tenants = tenants
        self.excluded = excluded
        self.openingPagesOnly = openingPagesOnly
    }
}

/// Devices held while their provider cannot take them (unreachable, 5xx, 429, credentials refused): they wait in a
/// page of their job due at the next attempt, until the notification expires.
package struct DeliveryHold: Sendable, Hashable {
    /// The attempt round the page is (1 for the first retry); the backoff grows with it.
    package var round: Int
    /// When the devices were first held.
    package var since: Date
    /// The last instant the notification may go out; the devices are recorded expired after it.
    package var until: Date
    /// Why they wait: a short cause (`connect_failed`, `InvalidProviderToken`, ...).
    package var reason: String
    /// The destination they wait for (an APNs environment's raw value).
    package var environment: String

    /// A hold of round `round` since `since` until `until`, for `reason`, in `environment`.
    package init(round: Int, since: Date, until: Date, reason: String, environment: String) {
        self.round = round
        self.since = since
        self.until = until
        self.reason = reason
        self.environment = environment
    }
}

/// The devices held for one tenant, environment and reason, over every job (``RelayStore/heldDeliveries()``).
package struct HeldDeliveries: Sendable, Hashable {
    /// The tenant.
    package var tenantID: String
    /// The environment they wait for.
    package var environment: String
    /// Why they wait.
    package var reason: String
    /// How many devices wait.
    package var devices: Int
    /// When the oldest of them was first held.
    package var oldestSince: Date
    /// When the next of them is tried again.
    package var nextAttempt: Date
}

/// A run of a topic's devices in token order: the active devices subscribed to `topic` whose token (as stored)
/// comes after `after` and is at most `last`. A page sends to the devices in its range when it is sent, so a
/// device registered into the range after planning gets the notification and one unregistered does not
/// (unless its planner leased it to its own process at once, with the devices it read: see
/// ``RelayStore/addTopicJobPage(jobID:tenant:page:dueAt:topic:after:limit:excludedUsers:leasedTo:lease:)``).
package struct TopicRange: Sendable, Hashable {
    /// The subscription topic.
    package var topic: String
    /// The token before the range (excluded); empty for the topic's first page.
    package var after: String
    /// The range's last token (included).
    package var last: String

    /// The range of `topic`'s devices after `after` up to `last`.
    package init(topic: String, after: String, last: String) {
        self.topic = topic
        self.after = after
        self.last = last
    }
}

/// What ``RelayStore/addTopicJobPage(jobID:tenant:page:dueAt:topic:after:limit:excludedUsers:leasedTo:lease:)``
/// wrote.
package struct TopicPageWrite: Sendable {
    /// The page's last token: the next page's `after`.
    package var lastToken: String
    /// The devices read; fewer than the limit when the topic is done (unless the page stood: see `stood`).
    package var devicesRead: Int
    /// Whether the page was written before (by a planner that this one took over from) and stands: `lastToken`
    /// is its stored last token, and the devices read from `after` say nothing of where the topic ends.
    package var stood: Bool
    /// The devices counted in the page (those of excluded users left out); no page was written when 0.
    package var pageDevices: Int
    /// The page as leased to its owner, with its devices as read, when the page is new and was leased at once
    /// (`nil` otherwise; a page written before may have another range).
    package var leased: (page: JobPage, devices: [DeviceTarget])?
    /// The devices of the page as read, when the page is new, was not leased, and they were asked for
    /// (`withDevices`): the planning process keeps them for the loop of its own that claims the page.
    package var pendingDevices: [DeviceTarget]?
}

/// The recipients a page of listed devices is written for: users (their active devices) or device tokens.
package enum ListedRecipients: Sendable, Hashable {
    /// The active devices of these users.
    case users([String])
    /// The active devices holding these tokens (an APNs token in either case, any other byte for byte; strings that
    /// are not tokens match nothing).
    case tokens([String])
}

/// The pages of listed devices an earlier planner wrote for a job (``RelayStore/listedPagesWritten(jobID:)``): a
/// planner that takes the job over goes on after them, to the devices they do not hold.
package struct ListedPagesWritten: Sendable, Hashable {
    /// The highest page number written.
    package var lastPage: Int
    /// The tokens the pages hold.
    package var tokens: Set<String>
}

/// What ``RelayStore/addListedJobPage(jobID:tenant:page:dueAt:recipients:excludedUsers:leasedTo:lease:)`` read
/// and wrote.
package struct ListedPageWrite: Sendable {
    /// The page's devices as read, by token (no page was written when there are none).
    package var devices: [DeviceTarget]
    /// The page as leased to its owner, when this call wrote it leased (`nil` otherwise).
    package var leased: JobPage?
}

/// The counts a finished page adds to its job.
package struct JobPageCounts: Sendable, Hashable {
    /// Devices sent to.
    package var devices: Int
    /// Devices APNs accepted the notification for.
    package var delivered: Int
    /// Devices whose attempt failed (rejected, dead token, gave up).
    package var failed: Int
    /// Recipients skipped by policy or without a device.
    package var skipped: Int
    /// Devices moved to a later page (quiet hours, or held while their provider could not take them).
    package var deferred: Int

    /// Counts with the given values.
    package init(devices: Int = 0, delivered: Int = 0, failed: Int = 0, skipped: Int = 0, deferred: Int = 0) {
        self.devices = devices
        self.delivered = delivered
        self.failed = failed
        self.skipped = skipped
        self.deferred = deferred
    }
}

/// How far a job's fan-out has come.
package struct JobProgress: Sendable, Hashable {
    /// The job's row.
    package var job: JobRecord
    /// Whether its pages are written.
    package var planned: Bool
    /// Pages due now (or overdue) that are not done.
    package var pagesDue: Int
    /// Pages due later (scheduled, deferred by quiet hours).
    package var pagesLater: Int
}

/// A device of a job that waits for a later time (``RelayStore/laterDevices(tenant:id:)``).
package struct LaterDevice: Sendable, Hashable {
    /// Its token.
    package var token: String
    /// Its user.
    package var user: String
    /// When it is due.
    package var dueAt: Date
    /// Why it waits when it is held for its provider (`nil`: scheduled, or deferred by quiet hours).
    package var waitReason: String?
}

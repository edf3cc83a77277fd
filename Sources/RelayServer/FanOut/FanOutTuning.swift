/// The sizes and timings of one process's fan-out: pages, sends in flight, batches, loops and leases.
///
/// One value handed to the ``FanOutWorker`` and from it to its planners and page senders, so that every number
/// that shapes a fan-out is read in one place and a test can run the same code with small pages.
package struct FanOutTuning: Sendable {
    /// Devices of a job's first page: small, so that its planner statement and policy reads are short and the
    /// first sends start soon after the job is accepted, while the next pages are planned.
    package var openingPageSize = 250
    /// Devices per page of a job's next pages up to page ``pageLoops``: a mid-sized job spreads over every page
    /// loop at once.
    package var firstPageSize = 2_000
    /// Devices per page after those: each page costs a few statements (claim, devices, policy, completion), so
    /// the pages of a large job are larger.
    package var laterPageSize = 4_000
    /// Sends one process keeps in flight however short the round trip to APNs (``pageLoops`` pages of 384):
    /// the window the process starts with, and keeps on loopback. Each page keeps its share of the window.
    package var minimumSendsInFlight = 3_072
    /// Sends one process keeps in flight however long the round trip: the bound on the memory of sends waiting
    /// for their answers. Between the two, the window follows the measured rate × round trip (``SendWindow``):
    /// 60,000 notifications a second at 200 ms need 12,000 in flight.
    package var maximumSendsInFlight = 32_768
    /// Answers a page hands to the delivery writer at once while it is sent; also the bound on the answers a
    /// process that dies may leave sent but unrecorded per page, twice over (one batch written, one pending).
    package var recordBatch = 250
    /// Answers a sending page waits for before it takes them (all of them when fewer are in flight): each take
    /// wakes the page's task and hands the sends it starts to the pools' event loops, so taking them one at a
    /// time would cost two thread hops per notification.
    package var answerBatch = 96
    /// Pages one process sends at once, besides its opening pages' lane.
    package var pageLoops = 8
    /// Loops of one process that send only jobs' opening pages (a single send, a small job, the start of a large
    /// one), so that these never wait for a loop busy with a large fan-out's pages.
    package var openingPageLoops = 1
    /// Jobs one process plans at once (a burst of small sends is not planned one after the other).
    package var planLoops = 4
    /// How long a page or a planning lease lasts without renewal.
    package var lease: Duration = .seconds(30)
    /// Attempts at a page before it is given up: its devices without an outcome are recorded `failed`
    /// (`relay_error`) and the page is done, so that its job finishes. A page that fails for a reason retrying
    /// cannot fix (its send plan cannot be built) is given up at once.
    package var maximumPageAttempts = 5
    /// How often an idle loop looks for work when nothing wakes it.
    package var idlePoll: Duration = .milliseconds(250)
    /// Send plans a process keeps before its cache starts again.
    package var planCacheSize = 256

    /// The relay's tuning.
    package static let standard = FanOutTuning()

    /// The number of devices of page `page` (from 1) of a job.
    package func pageSize(page: Int) -> Int {
        page == 1 ? openingPageSize : page <= pageLoops ? firstPageSize : laterPageSize
    }
}

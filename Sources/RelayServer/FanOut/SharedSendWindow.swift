import Synchronization

/// The ``SendWindow`` of one process, shared by its page senders: each notes the answers it takes, and each
/// keeps its share of the window in flight, and more while the process's sends in flight are fewer than the
/// window (a page at its end, or a loop between pages, leaves room the others take).
final class SharedSendWindow: Sendable {
    private let window: Mutex<SendWindow>
    /// The window's size now, read on every send without the lock.
    private let size = Atomic<Int>(0)
    /// The process's sends in flight, over all its pages.
    private let sending = Atomic<Int>(0)
    /// How many pages share the window.
    private let pages: Int

    /// A window within `tuning`'s bounds, shared by its page loops.
    init(_ tuning: FanOutTuning) {
        let window = SendWindow(
            configuration: .init(minimum: tuning.minimumSendsInFlight, maximum: tuning.maximumSendsInFlight))
        self.window = Mutex(window)
        size.store(window.size, ordering: .relaxed)
        pages = max(1, tuning.pageLoops)
    }

    /// Sends one page may keep in flight whatever the others do: its share of the window, at least 1.
    var share: Int {
        max(1, (size.load(ordering: .relaxed) + pages - 1) / pages)
    }

    /// How many more sends the process may start now: the window less its sends in flight.
    var room: Int {
        max(0, size.load(ordering: .relaxed) - sending.load(ordering: .relaxed))
    }

    /// Counts a send started.
    func started() {
        sending.add(1, ordering: .relaxed)
    }

    /// Counts `count` sends answered (or given up).
    func ended(_ count: Int) {
        sending.subtract(count, ordering: .relaxed)
    }

    /// Notes `answers` answers taken now, the shortest of whose round trips was `shortestRoundTrip`; a window
    /// that changes size is recorded (`pushrelay_fanout_send_window`).
    func record(answers: Int, shortestRoundTrip: Duration?) {
        let now = ContinuousClock.now
        let (before, after) = window.withLock { window in
            let before = window.size
            window.record(answers: answers, shortestRoundTrip: shortestRoundTrip, at: now)
            return (before, window.size)
        }
        guard after != before else { return }
        size.store(after, ordering: .relaxed)
        RelayMetrics.sendWindow(after)
    }
}

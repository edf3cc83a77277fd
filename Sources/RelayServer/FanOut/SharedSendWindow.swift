import Synchronization

/// The ``SendWindow`` of one process, shared by its page senders: each notes the answers it takes, and the
/// process's sends in flight stay within the window.
///
/// A page sending claims its share of the window when it starts (``join(upTo:)``) and may then keep that many sends
/// in flight; it may borrow more, one send at a time, while the claims of all pages leave room in the window
/// (``borrow()``). A page gives back what it borrowed as the answers come, and its share as it runs out of devices
/// to send (``release(_:)``): a page at its end, or a loop between pages, leaves room that the others take. So the
/// sends in flight never exceed the window (or the shares claimed before it shrank).
final class SharedSendWindow: Sendable {
    private let window: Mutex<SendWindow>
    /// The window's size now, read on every borrowed send without the lock.
    private let size: Atomic<Int>
    /// The sends the pages sending now have claimed: their shares and what they borrowed.
    private let claimed = Atomic<Int>(0)
    /// How many pages share the window.
    private let pages: Int

    /// A window within `tuning`'s bounds, shared by its page loops.
    init(_ tuning: FanOutTuning) {
        let window = SendWindow(
            configuration: .init(minimum: tuning.minimumSendsInFlight, maximum: tuning.maximumSendsInFlight))
        self.window = Mutex(window)
        size = Atomic(window.size)
        pages = max(1, tuning.pageLoops + tuning.openingPageLoops)
        RelayMetrics.sendWindow(window.size)
    }

    /// Claims a page's share of the window (at least 1, at most `devices`, the page's sends) and returns it: the
    /// sends it may keep in flight whatever the other pages do.
    func join(upTo devices: Int) -> Int {
        let share = max(1, min(devices, (size.load(ordering: .relaxed) + pages - 1) / pages))
        claimed.add(share, ordering: .relaxed)
        return share
    }

    /// Claims one more send if the window has room for it.
    func borrow() -> Bool {
        var current = claimed.load(ordering: .relaxed)
        while current < size.load(ordering: .relaxed) {
            let (exchanged, original) = claimed.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// How many more sends the pages may borrow now.
    var room: Int {
        max(0, size.load(ordering: .relaxed) - claimed.load(ordering: .relaxed))
    }

    /// Gives back `count` claimed sends.
    func release(_ count: Int) {
        claimed.subtract(count, ordering: .relaxed)
    }

    /// Notes `answers` answers taken now, the shortest of whose round trips was `shortestRoundTrip`; a window
    /// that changes size is recorded (`pushrelay_fanout_send_window`).
    func record(answers: Int, shortestRoundTrip: Duration?) {
        let now = ContinuousClock.now
        window.withLock { window in
            let before = window.size
            window.record(answers: answers, shortestRoundTrip: shortestRoundTrip, at: now)
            guard window.size != before else { return }
            size.store(window.size, ordering: .relaxed)
            RelayMetrics.sendWindow(window.size)
        }
    }
}

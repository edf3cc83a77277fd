import Synchronization

/// The ``SendWindow`` of one process, shared by its page senders: each notes the answers it takes, and each
/// keeps its part of the window in flight.
final class SharedSendWindow: Sendable {
    private let window: Mutex<SendWindow>
    /// How many pages share the window.
    private let pages: Int

    /// A window within `tuning`'s bounds, shared by its page loops.
    init(_ tuning: FanOutTuning) {
        window = Mutex(
            SendWindow(
                configuration: .init(minimum: tuning.minimumSendsInFlight, maximum: tuning.maximumSendsInFlight)))
        pages = max(1, tuning.pageLoops)
    }

    /// Sends one page may keep in flight now: its share of the window, at least 1.
    var perPage: Int {
        let size = window.withLock { $0.size }
        return max(1, (size + pages - 1) / pages)
    }

    /// Sends the process may keep in flight now.
    var size: Int { window.withLock { $0.size } }

    /// Notes `answers` answers taken now, the shortest of whose round trips was `shortestRoundTrip`; a window
    /// that changes size is recorded (`pushrelay_fanout_send_window`).
    func record(answers: Int, shortestRoundTrip: Duration?) {
        let now = ContinuousClock.now
        let (before, after) = window.withLock { window in
            let before = window.size
            window.record(answers: answers, shortestRoundTrip: shortestRoundTrip, at: now)
            return (before, window.size)
        }
        if after != before { RelayMetrics.sendWindow(after) }
    }
}

import NIOCore
import NIOPosix
import Synchronization

/// Wakes the callers waiting for a job when a page of it is done in this process, so that a SEND that waits looks at
/// its job when something happened instead of every few milliseconds. Pages done by other relay processes are not
/// signalled here: a waiter also looks when its timeout passes, whatever happens.
///
/// The timeouts are NIO scheduled tasks, cancelled when the signal comes first: no sleeping Swift task is left behind
/// per wait. They fall on a grid (``lookOut(after:period:)``), so callers waiting with the same period are let go at
/// the same instant and look at their jobs together (``WaitedJobLooks``).
final class JobSignal: Sendable {
    private struct Waiter {
        var continuation: CheckedContinuation<Void, Never>
        var timeout: Scheduled<Void>?
    }

    private struct State {
        var nextID = 0
        var waiters: [String: [Int: Waiter]] = [:]
    }

    private let state = Mutex(State())
    private let eventLoop: any EventLoop

    /// A signal whose timeouts run on `eventLoop`.
    init(eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()) {
        self.eventLoop = eventLoop
    }

    /// Wakes every caller waiting for `jobID`.
    func signal(_ jobID: String) {
        let woken = state.withLock { $0.waiters.removeValue(forKey: jobID) } ?? [:]
        for waiter in woken.values {
            waiter.timeout?.cancel()
            waiter.continuation.resume()
        }
    }

    /// Waits until `jobID` is signalled or the next look-out of `period` comes (at most `period` from now),
    /// whichever comes first.
    func wait(for jobID: String, atMost period: Duration) async {
        await withCheckedContinuation { continuation in
            let id = state.withLock { state in
                defer { state.nextID += 1 }
                state.waiters[jobID, default: [:]][state.nextID] = Waiter(continuation: continuation)
                return state.nextID
            }
            let scheduled = eventLoop.scheduleTask(deadline: Self.lookOut(after: .now(), period: period)) {
                self.timeOut(jobID, id)
            }
            let stillWaiting = state.withLock { state in
                guard state.waiters[jobID]?[id] != nil else { return false }
                state.waiters[jobID]?[id]?.timeout = scheduled
                return true
            }
            if !stillWaiting { scheduled.cancel() }
        }
    }

    /// The first instant after `now` that is a whole number of `period`s (at least a nanosecond) on the uptime
    /// clock: every caller waiting with one period is let go at the same instants, whenever it began to wait.
    static func lookOut(after now: NIODeadline, period: Duration) -> NIODeadline {
        let step = max(UInt64(1), UInt64(clamping: TimeAmount(period).nanoseconds))
        let (periods, overflow) = (now.uptimeNanoseconds / step + 1).multipliedReportingOverflow(by: step)
        return overflow ? .distantFuture : .uptimeNanoseconds(periods)
    }

    /// Lets waiter `id` of `jobID` go: its timeout passed.
    private func timeOut(_ jobID: String, _ id: Int) {
        let waiter = state.withLock { state -> Waiter? in
            let waiter = state.waiters[jobID]?.removeValue(forKey: id)
            if state.waiters[jobID]?.isEmpty == true { state.waiters[jobID] = nil }
            return waiter
        }
        waiter?.continuation.resume()
    }
}

import NIOCore
import Synchronization

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

import NIOCore
import Synchronization

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

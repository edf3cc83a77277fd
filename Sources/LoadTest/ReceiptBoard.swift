import EmbeddedPostgres
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Synchronization

/// A count shared by tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds one; returns the new count.
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}

/// When APNs answered each single send (its receipt's arrival), and the send waiting for its receipt: the
/// waiting send is woken by the receipt instead of polling for it, so the load generator takes no CPU from the
/// relay and PostgreSQL between sends.
final class ReceiptBoard: Sendable {
    private struct State {
        var answered: [String: ContinuousClock.Instant] = [:]
        var waiter: (jobID: String, continuation: CheckedContinuation<Void, Never>)?
        /// The job whose wait ran out before its send began waiting.
        var expired: String?
    }

    private let state = Mutex(State())

    /// The latest receipt's time of each job.
    var answered: [String: ContinuousClock.Instant] { state.withLock { $0.answered } }

    /// Notes a receipt of job `jobID` at `instant`; wakes the send waiting for it.
    func note(jobID: String, at instant: ContinuousClock.Instant) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.answered[jobID] = instant
            return Self.takeWaiter(of: jobID, from: &state)
        }
        waiter?.resume()
    }

    /// Returns once job `jobID` has a receipt, or after `limit` without one (a timer on `eventLoop`). One send
    /// waits at a time.
    func wait(for jobID: String, limit: TimeAmount, on eventLoop: any EventLoop) async {
        let timer = eventLoop.scheduleTask(in: limit) {
            let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = Self.takeWaiter(of: jobID, from: &state) else {
                    state.expired = jobID
                    return nil
                }
                return waiter
            }
            waiter?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.answered[jobID] == nil, state.expired != jobID else { return true }
                state.waiter = (jobID, continuation)
                return false
            }
            if done { continuation.resume() }
        }
        timer.cancel()
    }

    private static func takeWaiter(of jobID: String, from state: inout State) -> CheckedContinuation<Void, Never>? {
        guard let waiter = state.waiter, waiter.jobID == jobID else { return nil }
        state.waiter = nil
        return waiter.continuation
    }
}

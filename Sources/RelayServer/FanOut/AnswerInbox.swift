import Foundation
import Synchronization

/// One provider answer for a page: the index of its device, the pool's report, and when it came.
struct Answer: Sendable {
    var index: Int
    var report: ProviderReport
    var at: ContinuousClock.Instant
}

/// A send in flight: when its row says it was sent, and when it started, for its latency.
struct StartedSend {
    var sentAt: Date
    var at: ContinuousClock.Instant
}

/// Where the pools' event loops leave a page's answers for the page's task, which takes them in batches.
final class AnswerInbox: Sendable {
    private struct State {
        var answers: [Answer] = []
        var taker: CheckedContinuation<[Answer], Never>?
        /// How many answers the waiting taker asked for.
        var wanted = 1
    }

    private let state = Mutex<State>(State())
    private let waitingCount = Atomic<Int>(0)

    /// Answers left and not taken yet.
    var waiting: Int { waitingCount.load(ordering: .relaxed) }

    /// Leaves an answer; wakes the task when it waits and the answers it asked for are in.
    func put(_ answer: Answer) {
        let (taker, answers) = state.withLock { state -> (CheckedContinuation<[Answer], Never>?, [Answer]) in
            state.answers.append(answer)
            waitingCount.add(1, ordering: .relaxed)
            guard let taker = state.taker, state.answers.count >= state.wanted else { return (nil, []) }
            state.taker = nil
            waitingCount.subtract(state.answers.count, ordering: .relaxed)
            defer { state.answers = [] }
            return (taker, state.answers)
        }
        taker?.resume(returning: answers)
    }

    /// Every answer left so far, waiting until there are `count` (at least one). One task takes at a time, and
    /// asks for no more answers than it has sends in flight.
    func take(atLeast count: Int) async -> [Answer] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Answer]? in
                guard state.answers.count >= max(count, 1) else {
                    state.taker = continuation
                    state.wanted = max(count, 1)
                    return nil
                }
                waitingCount.subtract(state.answers.count, ordering: .relaxed)
                defer { state.answers = [] }
                return state.answers
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

import Synchronization

/// `check`'s answer, or `late` once `deadline` passes first. `check` runs in a task of its own that is not waited
/// for: a dependency that does not answer (a database whose connections hang) cannot hold the caller past the
/// deadline.
func answer<Answer: Sendable>(
    within deadline: Duration, orElse late: Answer, _ check: @escaping @Sendable () async -> Answer
) async -> Answer {
    await withCheckedContinuation { continuation in
        let first = FirstAnswer(continuation)
        Task { first.resume(await check()) }
        Task {
            try? await Task.sleep(for: deadline)
            first.resume(late)
        }
    }
}

/// A continuation resumed by the first of several racing tasks; the others' answers are dropped.
private final class FirstAnswer<Answer: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Answer, Never>?>

    init(_ continuation: CheckedContinuation<Answer, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ answer: Answer) {
        continuation.withLock { $0.take() }?.resume(returning: answer)
    }
}

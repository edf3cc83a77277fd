import Synchronization
import Testing

@testable import RelayServer

@Suite("The fan-out worker's wake signal")
struct WakeSignalTests {
    @Test("a wake with no loop waiting is kept for the next wait, once")
    func aWakeBeforeTheWaitIsNotLost() async {
        let signal = WakeSignal()
        signal.wakeOne()
        signal.wakeOne()
        await signal.wait()
        let woken = Count()
        let waiter = Task {
            await signal.wait()
            woken.add()
        }
        try? await Task.sleep(for: .milliseconds(100))
        // The two early wakes count as one: the second wait is still waiting.
        #expect(woken.value == 0)
        signal.wakeOne()
        await waiter.value
        #expect(woken.value == 1)
    }

    @Test("each wake releases one waiting loop, and close releases the rest")
    func oneLoopPerWake() async {
        let signal = WakeSignal()
        let released = Count()
        let waiters = (0..<3).map { _ in
            Task {
                await signal.wait()
                released.add()
            }
        }
        try? await Task.sleep(for: .milliseconds(100))
        signal.wakeOne()
        // The woken loop runs when a thread is free (up to 10 s on a loaded machine); no other is released after.
        _ = await eventually(within: 10) { released.value >= 1 }
        try? await Task.sleep(for: .milliseconds(100))
        #expect(released.value == 1)
        signal.close()
        for waiter in waiters { await waiter.value }
        #expect(released.value == 3)
        // After close, waiting returns at once.
        await signal.wait()
    }
}

/// A count shared by tasks.
private final class Count: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    func add() {
        count.withLock { $0 += 1 }
    }
}

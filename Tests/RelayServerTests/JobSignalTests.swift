import NIOCore
import Testing

@testable import RelayServer

@Suite("Job signals")
struct JobSignalTests {
    @Test("a signal wakes every caller waiting for its job, and only those")
    func signalWakesWaiters() async {
        // The waiters' timeout is far longer than any run of the suite can starve this test's tasks (the whole
        // suite shares two threads): a waiter back before it was woken by its signal, not by the timeout.
        let timeout = Duration.seconds(600)
        let signal = JobSignal()
        let start = ContinuousClock.now
        await withTaskGroup(of: String.self) { group in
            for job in ["a", "a", "b"] {
                group.addTask {
                    await signal.wait(for: job, atMost: timeout)
                    return job
                }
            }
            // "a" is signalled until both its waiters are back (a signal before a caller waits wakes nobody).
            let signalling = Task {
                while !Task.isCancelled {
                    signal.signal("a")
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
            let first = await group.next()
            let second = await group.next()
            signalling.cancel()
            #expect([first, second] == ["a", "a"])
            let rest = Task {
                while !Task.isCancelled {
                    signal.signal("b")
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
            #expect(await group.next() == "b")
            rest.cancel()
        }
        #expect(ContinuousClock.now - start < timeout)
    }

    @Test("look-outs fall on one grid per period, within a period of now")
    func lookOutsOnAGrid() {
        let second = Duration.seconds(1)
        for now: UInt64 in [0, 1, 999_999_999, 1_000_000_000, 1_000_000_001, 123_456_789_012] {
            let lookOut = JobSignal.lookOut(after: .uptimeNanoseconds(now), period: second).uptimeNanoseconds
            #expect(lookOut > now && lookOut <= now + 1_000_000_000)
            #expect(lookOut % 1_000_000_000 == 0)
        }
        // Two callers that began to wait 300 ms apart are let go together.
        let early = JobSignal.lookOut(after: .uptimeNanoseconds(5_100_000_000), period: second)
        let late = JobSignal.lookOut(after: .uptimeNanoseconds(5_400_000_000), period: second)
        #expect(early == late)
        #expect(
            JobSignal.lookOut(after: .uptimeNanoseconds(5_000_000), period: .milliseconds(10))
                == .uptimeNanoseconds(10_000_000))
    }

    @Test("a caller not signalled is let go when its timeout passes")
    func timeoutLetsGo() async {
        let signal = JobSignal()
        await signal.wait(for: "never", atMost: .milliseconds(20))
        // Waiting again works: the first wait left nothing behind.
        await signal.wait(for: "never", atMost: .milliseconds(20))
    }
}

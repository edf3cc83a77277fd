import Synchronization
import Testing

@testable import LoadTest

@Suite("The load test's progress: a live line on a terminal, plain periodic lines otherwise")
struct ProgressLineTests {
    /// What a progress line wrote, in order.
    private final class Written: Sendable {
        let texts = Mutex<[String]>([])
        func append(_ text: String) { texts.withLock { $0.append(text) } }
        var all: [String] { texts.withLock { $0 } }
    }

    @Test("on a terminal every update rewrites one line in place with rate, done/total and ETA; finish ends it")
    func terminalLine() {
        let written = Written()
        let progress = ProgressLine(interval: 5, isTerminal: true, output: written.append)
        progress.update(phase: "fan-out 1000", done: 250, total: 1000, rate: 500, elapsed: 0.5)
        progress.update(phase: "fan-out 1000", done: 500, total: 1000, rate: 500, elapsed: 1)
        progress.finish("fan-out 1000: done")
        #expect(
            written.all == [
                "\r\u{1B}[Kfan-out 1000: 250/1000 (25.0%)  500/s  elapsed 1s  ETA 2s",
                "\r\u{1B}[Kfan-out 1000: 500/1000 (50.0%)  500/s  elapsed 1s  ETA 1s",
                "\r\u{1B}[Kfan-out 1000: done\n",
            ])
    }

    @Test("elsewhere it writes a plain line at most once per interval, and no live line to end")
    func plainLines() {
        let written = Written()
        let progress = ProgressLine(interval: 3_600, isTerminal: false, output: written.append)
        progress.update(phase: "devices", done: 10, total: 100, rate: 10, elapsed: 1)
        progress.update(phase: "devices", done: 20, total: 100, rate: 10, elapsed: 2)
        progress.finish("devices: 100 registered")
        progress.update(phase: "singles", done: 100, total: 100, rate: 50, elapsed: 2, note: "last")
        #expect(
            written.all == [
                "devices: 10/100 (10.0%)  10/s  elapsed 1s  ETA 9s\n",
                "devices: 100 registered\n",
                "singles: 100/100 (100.0%)  50/s  elapsed 2s  last\n",
            ])
    }
}

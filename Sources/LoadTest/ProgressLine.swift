import Foundation
import Synchronization

/// Shows a running phase's progress: one live line rewritten in place on a terminal, or a plain line every few
/// seconds when the output is a file or a pipe (CI logs).
final class ProgressLine: Sendable {
    private let isTerminal: Bool
    private let interval: Double
    private let output: @Sendable (String) -> Void
    private let state = Mutex<(lastPrinted: Double, live: Bool)>((-1e9, false))

    /// Progress on standard output (a live line when it is a terminal); `interval` seconds between plain lines.
    convenience init(interval: Double = 5) {
        self.init(interval: interval, isTerminal: isatty(STDOUT_FILENO) == 1) { text in
            FileHandle.standardOutput.write(Data(text.utf8))
        }
    }

    /// Progress written to `output`, as a live line when `isTerminal`, else a plain line every `interval` seconds.
    init(interval: Double, isTerminal: Bool, output: @escaping @Sendable (String) -> Void) {
        self.isTerminal = isTerminal
        self.interval = interval
        self.output = output
    }

    /// Shows `done` of `total` for `phase`, at `rate` per second, `elapsed` seconds into the phase.
    func update(phase: String, done: Int, total: Int, rate: Double, elapsed: Double, note: String = "") {
        let percent = total > 0 ? 100 * Double(done) / Double(total) : 0
        let remaining = rate > 0 && total > done ? Double(total - done) / rate : 0
        let eta = total > done && rate > 0 ? "ETA \(Self.duration(remaining))" : ""
        let text = [
            "\(phase): \(done)/\(total) (\(String(format: "%.1f", percent))%)",
            "\(Int(rate.rounded()))/s", "elapsed \(Self.duration(elapsed))", eta, note,
        ].filter { !$0.isEmpty }.joined(separator: "  ")
        let now = Date().timeIntervalSince1970
        let write: String? = state.withLock { state in
            if isTerminal {
                state.live = true
                return "\r\u{1B}[K" + text
            }
            guard now - state.lastPrinted >= interval else { return nil }
            state.lastPrinted = now
            return text + "\n"
        }
        if let write { output(write) }
    }

    /// Ends the live line (if any) and prints `line`.
    func finish(_ line: String) {
        let live = state.withLock { state in
            defer {
                state.live = false
                state.lastPrinted = -1e9
            }
            return state.live
        }
        output((live ? "\r\u{1B}[K" : "") + line + "\n")
    }

    /// `1h02m`, `3m07s` or `42s`.
    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        if total >= 3600 { return "\(total / 3600)h\(String(format: "%02d", total % 3600 / 60))m" }
        if total >= 60 { return "\(total / 60)m\(String(format: "%02d", total % 60))s" }
        return "\(total)s"
    }
}

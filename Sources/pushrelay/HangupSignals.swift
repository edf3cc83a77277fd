import Dispatch
import Foundation

/// SIGHUP for `pushrelay serve`: no longer the default action (the process killed, exit 129, an embedded
/// PostgreSQL left running) but a stream of arrivals, on which `serve` re-reads its tenant files.
final class HangupSignals: Sendable {
    /// Each SIGHUP, from ``init()`` on.
    let arrivals: AsyncStream<Void>
    /// Touched only by ``init()`` and `deinit`, which no other reference can overlap.
    nonisolated(unsafe) private let source: any DispatchSourceSignal

    /// Ignores SIGHUP's default action from now on and starts reporting its arrivals; call it before anything
    /// else at start, so that no SIGHUP can kill the process.
    init() {
        let (arrivals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        self.arrivals = arrivals
        self.source = source
    }

    deinit {
        source.cancel()
    }
}

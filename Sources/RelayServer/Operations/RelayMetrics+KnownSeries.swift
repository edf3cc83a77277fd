import Metrics
import PushRelayProtocol

extension RelayMetrics {
    /// Creates the series whose labels are known before anything happens, at zero: every request kind with
    /// outcome `ok`. A counter that first appears at its first increment has no earlier sample, so `rate()` and
    /// `increase()` miss that increment; one that exists from the start does not.
    static func startKnownSeries() {
        for kind in RequestKind.allCases {
            Counter(label: requestsLabel, dimensions: [("method", kind.name), ("outcome", "ok")])
                .increment(by: 0)
        }
    }
}

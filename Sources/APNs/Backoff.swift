public import NIOCore

/// Exponential backoff with "equal jitter": attempt n waits between half and all of
/// `first × 2^(n-1)`, capped at `maximum`, so that retries of many senders spread out.
public struct ExponentialBackoff: Sendable, Hashable {
    /// The delay before the first retry (before jitter).
    public var first: TimeAmount
    /// The largest delay (before jitter).
    public var maximum: TimeAmount

    /// A backoff from `first`, doubling up to `maximum`.
    public init(first: TimeAmount, maximum: TimeAmount) {
        self.first = first
        self.maximum = maximum
    }

    /// The delay before jitter for attempt `attempt` (1 for the first retry).
    public func ceiling(attempt: Int) -> TimeAmount {
        let exponent = min(max(attempt - 1, 0), 40)
        let nanos = first.nanoseconds.multipliedReportingOverflow(by: Int64(1) << exponent)
        return nanos.overflow ? maximum : min(.nanoseconds(nanos.partialValue), maximum)
    }

    /// The delay for attempt `attempt`: uniformly between half of ``ceiling(attempt:)`` and all of it.
    public func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> TimeAmount {
        let ceiling = ceiling(attempt: attempt).nanoseconds
        let half = ceiling / 2
        guard half > 0 else { return .nanoseconds(ceiling) }
        return .nanoseconds(half + Int64.random(in: 0...(ceiling - half), using: &generator))
    }
}

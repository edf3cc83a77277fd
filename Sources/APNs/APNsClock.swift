public import Foundation
public import NIOCore

/// A source of the current time, injectable so that tests can prove token timing, and run deadlines and PINGs
/// on a clock of their own.
public protocol APNsClock: Sendable {
    /// The current wall-clock time: provider tokens are issued, and their age judged, by it.
    func now() -> Date
    /// The current monotonic time: request deadlines, PING intervals and timeouts are measured on it.
    func uptime() -> NIODeadline
}

extension APNsClock {
    /// The system's monotonic time (`NIODeadline.now()`), for a clock that only sets the wall-clock time.
    public func uptime() -> NIODeadline { .now() }
}

/// The system's clocks.
public struct SystemClock: APNsClock {
    /// The system's clocks.
    public init() {}
    /// `Date()`.
    public func now() -> Date { Date() }
}

/// Why the pool refused a request: a ``code`` to act on, the details the code has, and a sentence for people.
///
/// A struct rather than an enum, in the manner of postgres-nio's `PSQLError`, so that a new code is not a breaking
/// change: compare ``code`` (`error.code == .queueFull`) instead of matching cases.
public struct APNsPoolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of refusal. Its description is the short name metrics' labels and records use: `pool_full`,
    /// `pool_shut_down` or `connect_failed`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case queueFull = "pool_full"
            case shutdown = "pool_shut_down"
            case connectFailed = "connect_failed"
        }

        let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The wait queue is full and the pool was told to fail fast.
        public static let queueFull = Code(.queueFull)
        /// The pool is shut down (or shutting down).
        public static let shutdown = Code(.shutdown)
        /// No connection could be made at start, or none can be now: every connection waits to reconnect after
        /// failing (the peer is unreachable).
        public static let connectFailed = Code(.connectFailed)

        /// The short name for metrics' labels and records (`pool_full`); stored in the database and shown to
        /// clients, so it never changes.
        public var description: String { base.rawValue }
    }

    /// The kind of refusal.
    public var code: Code
    /// With ``Code/queueFull``: how many requests the wait queue holds at most.
    public var capacity: Int?
    /// With ``Code/connectFailed``: why the last connection attempt failed.
    public var reason: String?

    private init(_ code: Code, capacity: Int? = nil, reason: String? = nil) {
        self.code = code
        self.capacity = capacity
        self.reason = reason
    }

    /// The wait queue (of `capacity` requests) is full and the pool was told to fail fast.
    public static func queueFull(capacity: Int) -> Self { Self(.queueFull, capacity: capacity) }

    /// The pool is shut down (or shutting down).
    public static let shutdown = Self(.shutdown)

    /// No connection could be made, the last attempt failing for `reason`.
    public static func connectFailed(_ reason: String) -> Self { Self(.connectFailed, reason: reason) }

    /// A sentence saying what happened.
    public var description: String {
        switch code.base {
        case .queueFull: "APNs pool is full: \(capacity ?? 0) requests are already waiting"
        case .shutdown: "APNs pool is shut down"
        case .connectFailed: "could not connect to APNs: \(reason ?? "")"
        }
    }
}

/// Why the pool refused a request.
public enum APNsPoolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The wait queue is full and the pool was told to fail fast.
    case queueFull(capacity: Int)
    /// The pool is shut down (or shutting down).
    case shutdown
    /// No connection could be made at start, or none can be now: every connection waits to reconnect after
    /// failing (the peer is unreachable).
    case connectFailed(String)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case .queueFull(let capacity): "APNs pool is full: \(capacity) requests are already waiting"
        case .shutdown: "APNs pool is shut down"
        case .connectFailed(let why): "could not connect to APNs: \(why)"
        }
    }

    /// A short name of the refusal for metrics' labels and records: `pool_full`, `pool_shut_down` or
    /// `connect_failed`.
    public var code: String {
        switch self {
        case .queueFull: "pool_full"
        case .shutdown: "pool_shut_down"
        case .connectFailed: "connect_failed"
        }
    }
}

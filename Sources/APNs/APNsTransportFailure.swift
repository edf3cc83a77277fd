/// Why an attempt ended without an answer from APNs.
public enum APNsTransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// APNs did not process the request (a stream above GOAWAY's last-stream-id, or REFUSED_STREAM):
    /// it is safe to send it again at once on another connection.
    case notProcessed(String)
    /// The connection closed while the request was in flight; APNs may or may not have it.
    case connectionLost
    /// The peer reset the stream with this HTTP/2 error code.
    case streamReset(String)
    /// The request's deadline passed before an answer came.
    case deadlineExceeded
    /// No connection of the pool could be established.
    case connectFailed(String)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case .notProcessed(let why): "not processed by APNs (\(why))"
        case .connectionLost: "connection lost while the request was in flight"
        case .streamReset(let code): "stream reset by APNs (\(code))"
        case .deadlineExceeded: "deadline exceeded before APNs answered"
        case .connectFailed(let why): "could not connect to APNs: \(why)"
        }
    }

    /// A short name of the failure for metrics' labels and records: `not_processed`, `connection_lost`,
    /// `stream_reset`, `deadline_exceeded` or `connect_failed`.
    public var code: String {
        switch self {
        case .notProcessed: "not_processed"
        case .connectionLost: "connection_lost"
        case .streamReset: "stream_reset"
        case .deadlineExceeded: "deadline_exceeded"
        case .connectFailed: "connect_failed"
        }
    }
}

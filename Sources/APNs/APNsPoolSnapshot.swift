/// A snapshot of a pool: its connections and queues, for tests, metrics and the `apns push` report.
public struct APNsPoolSnapshot: Sendable, Hashable {
    /// The current connection of each slot (none while a slot reconnects).
    public var connections: [APNsConnectionSnapshot]
    /// Connections made since the pool started.
    public var connectionsOpened: Int
    /// Requests waiting for a stream.
    public var queued: Int
    /// Callers waiting for room in the queue.
    public var waiting: Int
    /// Streams in flight over all connections, draining ones included.
    public var streamsInFlight: Int
}

/// A snapshot of one connection, for tests, metrics and the `apns push` report.
public struct APNsConnectionSnapshot: Sendable, Hashable {
    /// The connection's id within its pool (increasing).
    public var id: Int
    /// Whether it is taking new streams.
    public var isReady: Bool
    /// The peer's current SETTINGS_MAX_CONCURRENT_STREAMS.
    public var peerMaxConcurrentStreams: Int
    /// Streams in flight now.
    public var streamsInFlight: Int
    /// Streams opened since the connection began.
    public var streamsOpened: Int
    /// Provider tokens this connection has made.
    public var tokensMade: Int
    /// For each value SETTINGS_MAX_CONCURRENT_STREAMS took, the most streams that were in flight under it.
    public var peakStreamsPerLimit: [Int: Int]
    /// PINGs sent and acknowledged.
    public var pingsSent: Int, pingsAcknowledged: Int
}

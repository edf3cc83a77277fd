import NIOCore

/// The streams of one connection: the requests in flight by stream id, the next id to use, and the counts a
/// snapshot reports. One request per stream; ids are odd and increase (RFC 9113 §5.1.1).
struct ConnectionStreams {
    /// One request's stream, with what its response has brought so far.
    struct Stream {
        let request: PendingRequest
        var status: Int?
        var apnsID: String?
        var retryAfter: String?
        var body: ByteBuffer?
    }

    /// The streams in flight, by id: a dictionary, since responses end in any order.
    private var inFlight: [UInt32: Stream] = [:]
    /// The id of the next stream.
    private(set) var nextID: UInt32 = 1
    /// Streams opened since the connection began.
    private(set) var opened = 0
    /// For each value the peer's stream limit took, the most streams that were in flight under it.
    private(set) var peakPerLimit: [Int: Int] = [:]

    /// Streams in flight now.
    var count: Int { inFlight.count }
    /// Whether no stream is in flight.
    var isEmpty: Bool { inFlight.isEmpty }
    /// Whether the ids ran out: the connection must open no more streams.
    var idsExhausted: Bool { nextID > UInt32(Int32.max) - 2 }

    /// Opens a stream for `request` while the peer allows `limit` streams; returns its id.
    mutating func open(_ request: PendingRequest, limit: Int) -> UInt32 {
        let id = nextID
        nextID += 2
        inFlight[id] = Stream(request: request)
        opened += 1
        if inFlight.count > peakPerLimit[limit] ?? 0 {
            peakPerLimit[limit] = inFlight.count
        }
        return id
    }

    /// The stream `id`, while it is in flight; setting nil ends it.
    subscript(id: UInt32) -> Stream? {
        get { inFlight[id] }
        set { inFlight[id] = newValue }
    }

    /// Ends stream `id` and returns it, if it was in flight.
    mutating func remove(_ id: UInt32) -> Stream? {
        inFlight.removeValue(forKey: id)
    }

    /// Ends the streams above `lastStreamID` (those a GOAWAY says the peer did not process) and returns their
    /// requests in stream order.
    mutating func removeAll(above lastStreamID: UInt32) -> [PendingRequest] {
        let ids = inFlight.keys.filter { $0 > lastStreamID }.sorted()
        return ids.compactMap { inFlight.removeValue(forKey: $0)?.request }
    }

    /// Ends the streams whose request's deadline is at or before `now` and returns their ids and requests in
    /// stream order.
    mutating func removeExpired(at now: NIODeadline) -> [(id: UInt32, request: PendingRequest)] {
        var expired: [UInt32] = []
        for (id, stream) in inFlight where stream.request.deadline <= now {
            expired.append(id)
        }
        return expired.sorted().compactMap { id in inFlight.removeValue(forKey: id).map { (id, $0.request) } }
    }

    /// Ends every stream and returns their requests in stream order.
    mutating func removeAll() -> [PendingRequest] {
        let lost = inFlight
        inFlight.removeAll()
        return lost.sorted { $0.key < $1.key }.map(\.value.request)
    }
}

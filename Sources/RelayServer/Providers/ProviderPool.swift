import NIOCore
import RelayStore

/// One request of a batch: the device's token as stored and the expiration it is sent with (Unix seconds; `nil`
/// for none, 0 for "deliver once or never").
struct ProviderRequest: Sendable {
    var token: String
    var expiration: Int64?
}

/// A notification rendered once per job for one provider (APNs: its headers and payload), shared by every
/// request of the job to that provider's devices.
protocol ProviderRendering: Sendable {}

/// A destination's warm connections to its provider, for one tenant: the seam every provider's engine sits
/// behind.
///
/// A pool takes a batch of requests rendered from one notification (the requests of one pass of a page, handed
/// over together) and answers each, by its position in the batch, with a ``ProviderReport``, from whatever thread
/// its engine runs on. It retries within its deadline what its provider's rules say to retry; what it still could
/// not deliver it answers as an outage (``ProviderReport/hold``), never by dropping it.
protocol ProviderPool: AnyObject, Sendable {
    /// Sends one request per element of `requests`, each rendered from `rendering`, and calls `answer` once for
    /// each, with its position in `requests`.
    func send(
        _ requests: [ProviderRequest], rendering: any ProviderRendering,
        answer: @escaping @Sendable (Int, ProviderReport) -> Void)

    /// The pool's connections and requests now (the status view and the pool gauges), or `nil` when it does not
    /// answer.
    func status() async -> ProviderPoolStatus?

    /// Stops taking requests and closes, after answering those in flight (at most `gracePeriod`).
    func shutdown(gracePeriod: TimeAmount) async
}

/// What a pool reports of itself.
struct ProviderPoolStatus: Sendable, Hashable {
    /// Connections open or opening.
    var connections: Int
    /// Connections taking new requests.
    var readyConnections: Int
    /// Requests sent and not answered yet.
    var inFlight: Int
    /// Requests waiting for room to be sent.
    var queued: Int
}

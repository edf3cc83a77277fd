/// The bounds every backend connection is held to besides its ``PushRelayProtocol/ProtocolLimits``: what one
/// peer can make the relay hold in memory, whatever it sends or fails to read (RelayServer.docc, "Reliability and bounds").
package enum ConnectionBounds {
    /// Bytes of written answers waiting for the peer beyond which the channel is not writable and the relay
    /// reads no more of the connection, until they drop below ``outboundLowWaterMark``.
    package static let outboundHighWaterMark = 256 * 1_024
    /// See ``outboundHighWaterMark``.
    package static let outboundLowWaterMark = 64 * 1_024
    /// Result subscriptions one connection may hold at once.
    package static let maximumSubscriptions = 16
    /// Result events kept for a subscriber whose socket is not writable; older ones are dropped beyond it.
    package static let maximumQueuedEvents = 10_000
    /// Reads of the socket per read cycle, each of up to 64 KiB: what one cycle adds to the inbound buffer.
    package static let readsPerCycle = 16
    /// Frames of one connection handled in one event-loop turn; the rest wait for a later turn, so that a
    /// connection sending many small frames does not hold up the others on its event loop.
    package static let framesPerTurn = 256
    /// Largest frame before HELLO is answered, as sent and after decompression: a HELLO is a few hundred bytes, and
    /// a peer that has not authenticated buys no megabytes of work. A larger one is `FRAME_TOO_LARGE` (the connection
    /// closes) or `DECOMPRESSED_TOO_LARGE`.
    package static let helloFrameBytes = 16_384
    /// Inflated request bodies one connection may hold however much of `max_inflight_bytes` the others hold
    /// (``InflatedBytesBudget``): a small request is never held up behind others' large ones.
    package static let assuredInflightBytes = 65_536
    /// How often an authenticated connection checks that its credential and tenant still give it rights.
    package static let rightsCheckInterval: Duration = .seconds(1)
}

/// The limits the peer's SETTINGS put on what a connection sends, and the flow-control windows of both
/// directions (RFC 9113 §5.2, §6.5.2, §6.9). Only the connection-level windows are tracked: a request's body
/// is at most 16 KiB (an APNs payload at most 5 KiB), below any stream window a peer announces, and a request is
/// sent only while the windows take the largest body the pool sends.
struct FlowControl {
    /// The window every HTTP/2 connection and stream starts with.
    static let defaultWindow = 65_535
    /// The connection window we keep open for responses; replenished after half of it is used.
    static let inboundWindow = 1 << 20

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (1 until its first SETTINGS: APNs starts there).
    var peerMaxConcurrentStreams = 1
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE: the window of each new stream for our DATA.
    private(set) var peerInitialStreamWindow = defaultWindow
    /// The peer's SETTINGS_MAX_FRAME_SIZE: the largest frame we may send.
    private(set) var peerMaxFrameSize = 16_384
    /// Our model of the peer's connection-level window for the DATA we send; a request waits in the pool's
    /// queue while it is short.
    private(set) var sendWindow = defaultWindow
    /// Bytes of DATA received since our last WINDOW_UPDATE.
    private var inboundConsumed = 0

    /// Whether both windows take `bytes` of DATA (the largest body the pool sends), so that any request may go.
    func takes(dataBytes bytes: Int) -> Bool {
        sendWindow >= bytes && peerInitialStreamWindow >= bytes
    }

    /// Counts `bytes` of DATA sent against the connection window.
    mutating func sent(dataBytes bytes: Int) {
        sendWindow -= bytes
    }

    /// Counts `bytes` of DATA received; returns the increment of the WINDOW_UPDATE to send when half of our
    /// window is used.
    mutating func received(dataBytes bytes: Int) -> Int? {
        inboundConsumed += bytes
        guard inboundConsumed >= Self.inboundWindow / 2 else { return nil }
        defer { inboundConsumed = 0 }
        return inboundConsumed
    }

    /// Applies a connection-level WINDOW_UPDATE.
    mutating func windowUpdate(increment: UInt32) throws(HTTP2ConnectionError) {
        guard increment & 0x7FFF_FFFF != 0 else {
            throw HTTP2ConnectionError(code: .protocolError, reason: "WINDOW_UPDATE of 0")
        }
        sendWindow += Int(increment & 0x7FFF_FFFF)
        guard sendWindow <= Int(Int32.max) else {
            throw HTTP2ConnectionError(code: .flowControlError, reason: "connection window above 2^31-1")
        }
    }

    /// Applies the peer's SETTINGS_INITIAL_WINDOW_SIZE.
    mutating func setPeerInitialStreamWindow(_ value: UInt32) throws(HTTP2ConnectionError) {
        guard value <= UInt32(Int32.max) else {
            throw HTTP2ConnectionError(code: .flowControlError, reason: "initial window above 2^31-1")
        }
        peerInitialStreamWindow = Int(value)
    }

    /// Applies the peer's SETTINGS_MAX_FRAME_SIZE.
    mutating func setPeerMaxFrameSize(_ value: UInt32) throws(HTTP2ConnectionError) {
        guard (16_384...16_777_215).contains(value) else {
            throw HTTP2ConnectionError(code: .protocolError, reason: "MAX_FRAME_SIZE \(value)")
        }
        peerMaxFrameSize = Int(value)
    }
}

import PushRelayProtocol
import RelayStore

extension SessionStateMachine {
    /// Where a session is in its life.
    enum State: Equatable {
        /// Connected; only a HELLO is taken (other frames are answered `HELLO_REQUIRED`), within the HELLO
        /// deadline, and a frame is at most ``ConnectionBounds/helloFrameBytes``.
        case awaitingHello
        /// The HELLO of `requestID` is being checked: nothing more is read until it is answered.
        case authenticating(requestID: UInt32, hello: Pushrelay_V1_Hello)
        /// HELLO was accepted: requests run for the credential.
        case open(VerifiedCredential)
        /// GOODBYE said or heard: in-flight requests are answered, later frames answered `SHUTTING_DOWN`; the
        /// connection closes once none is in flight.
        case closing(VerifiedCredential)
        /// Closed (by the relay or the peer): nothing more is read or written.
        case closed
    }

    /// What holds a connection's socket unread, and what waits for it to be read again.
    struct Reading {
        /// Whether the channel takes writes: `false` while more than ``ConnectionBounds/outboundHighWaterMark``
        /// bytes of answers wait for the peer.
        var writable = true
        /// The next frame waits for inflated bytes to be given back.
        var waitingForBytes = false
        /// The connection waits for its credential's tokens: it was answered `RATE_LIMITED` and kept sending, so
        /// the socket is not read until the frame it holds can pay.
        var waitingForTokens = false
        /// The connection was answered `RATE_LIMITED` and has not had a frame taken without waiting since.
        var toldRateLimited = false
        /// The frame being admitted is read again after a wait for tokens.
        var resumedFromTokenWait = false
        /// The pipeline asked for a read while reading was paused: it is done once reading may go on.
        var pendingRead = false
        /// The peer shut down its sending side: nothing more comes; the connection closes once what came is
        /// answered.
        var peerClosedInput = false
        /// The buffered frames are handled on in a later event-loop turn.
        var nextTurnScheduled = false
    }
}

extension SessionStateMachine.State {
    /// The credential requests run for: while open or closing.
    var caller: VerifiedCredential? {
        switch self {
        case .open(let credential), .closing(let credential): credential
        case .awaitingHello, .authenticating, .closed: nil
        }
    }
}

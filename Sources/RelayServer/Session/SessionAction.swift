import Foundation
import NIOCore
import PushRelayProtocol
import RelayStore

/// What a ``SessionStateMachine`` asks its channel handler to do, in the order given: the machine decides, the
/// handler (``RelaySessionHandler``) carries out. The handler flushes what the actions wrote once they are all
/// carried out (or at the end of the frames it is handling), and before it closes the channel.
enum SessionAction {
    /// Count `output` as a request's answer when it is one (metrics, the "request answered" debug line), and
    /// write its frame.
    case write(SessionOutput)
    /// Count a request of `kind` (`nil`: a frame too broken to say) as answered with `error` (`nil`: answered)
    /// and write nothing: an accepted GOODBYE, or an answer that came after the connection closed.
    case count(FrameKind?, requestID: UInt32, error: ProtocolError?)
    /// Log `note` with the connection's metadata.
    case log(SessionNote)
    /// Arm `timer` for `deadline` (replacing the one armed before, if any); when it fires, tell the machine
    /// ``SessionStateMachine/timerFired(_:now:)``.
    case scheduleTimer(SessionTimer, at: NIODeadline)
    /// Disarm `timer`.
    case cancelTimer(SessionTimer)
    /// Disarm every timer: the session is over.
    case stopTimers
    /// Check `hello`'s credential (spaced out for an address that keeps failing HELLOs), then tell the machine
    /// ``SessionStateMachine/authenticated(_:now:ledger:)``.
    case authenticate(Pushrelay_V1_Hello)
    /// Count a failed HELLO against the peer's address (``ConnectionAdmission/noteFailure(from:now:)``).
    case noteFailedHello
    /// HELLO was accepted for `tenant`: frames are held to the configured limits from now on (no longer to
    /// ``ConnectionBounds/helloFrameBytes``), log lines carry the tenant, and answers are compressed when the
    /// client `acceptsZstd`.
    case open(tenant: String, acceptsZstd: Bool)
    /// Check that `credential` still gives its rights, then tell the machine
    /// ``SessionStateMachine/rightsChecked(_:)``.
    case checkRights(VerifiedCredential)
    /// Run request `frame` for `caller` as a task; tell the machine ``SessionStateMachine/requestTookEffect(_:)``
    /// when a SEND's job is stored, and ``SessionStateMachine/requestEnded(_:kind:result:ledger:)`` with its answer.
    case startRequest(Frame, caller: VerifiedCredential)
    /// Subscribe to `tenant`'s results stream (with receipts when `receipts`) for the SUBSCRIBE_RESULTS of
    /// `requestID`, then tell the machine ``SessionStateMachine/subscribed(requestID:subscription:)``; each event
    /// goes to ``SessionStateMachine/resultEvent(_:requestID:)``.
    case subscribe(requestID: UInt32, tenant: String, receipts: Bool)
    /// End the results-stream subscription `id`.
    case unsubscribe(UUID)
    /// Handle the frames buffered so far, as many as the machine lets through
    /// (``SessionStateMachine/isReadingPaused``), at most ``ConnectionBounds/framesPerTurn``; then tell the
    /// machine ``SessionStateMachine/inboundHandled(turnEnded:)``.
    case handleBufferedFrames
    /// Handle the buffered frames in a later event-loop turn (the connection had its
    /// ``ConnectionBounds/framesPerTurn``): tell the machine ``SessionStateMachine/nextTurnBegan()`` then.
    case continueInNextTurn
    /// Read the socket: a read the machine held while reading was paused, now that it may go on.
    case read
    /// Flush what was written and close the channel.
    case close
}

/// A frame a session writes to its peer.
enum SessionOutput: Equatable {
    /// An ERROR answering request `requestID` of `kind` (`nil` when the frame could not be read; request id 0
    /// when the error is about the connection).
    case error(ProtocolError, requestID: UInt32, kind: FrameKind?)
    /// HELLO_OK for the HELLO of `requestID`, naming `tenant` and the connection's limits.
    case helloOK(requestID: UInt32, tenant: String)
    /// PONG with the PING's `nonce`.
    case pong(requestID: UInt32, nonce: UInt64)
    /// The answer to SUBSCRIBE_RESULTS.
    case subscribed(requestID: UInt32)
    /// The answer to UNSUBSCRIBE_RESULTS.
    case unsubscribed(requestID: UInt32)
    /// The service's answer to request `requestID` of kind `request`: a frame of `kind` with `body`.
    case answer(request: FrameKind, requestID: UInt32, kind: FrameKind, body: [UInt8])
    /// GOODBYE on request id 0: the relay closes the connection once what is in flight is answered.
    case goodbye(reason: String)
    /// An event of the results stream subscribed with `requestID`.
    case resultEvent(requestID: UInt32, Pushrelay_V1_ResultEvent)
}

/// A log line a session's decision calls for; the handler words it and adds the connection's metadata.
enum SessionNote: Equatable {
    /// No HELLO was accepted within the HELLO deadline: the connection closes.
    case helloDeadlinePassed
    /// No frame came for the idle timeout: GOODBYE, then the connection closes.
    case idleTimeout
    /// The credential was revoked or its tenant disabled (`message` says which): the connection closes.
    case rightsLost(message: String)
    /// The peer left its answers unread for the write-stall timeout: the connection closes.
    case writeStalled
    /// A frame that cannot be read on from (its request id as far as it could be read): the connection closes.
    case unreadableFrame(requestID: UInt32, ProtocolError)
    /// HELLO was refused: `tenant` holds its `cap` connections.
    case tenantAtCap(tenant: String, cap: Int)
    /// HELLO was accepted from a client that calls itself `clientName`.
    case authenticated(clientName: String, requestID: UInt32)
    /// HELLO was refused; `claimedTenant` is the tenant it named when that is a valid id that holds no secret,
    /// else a placeholder.
    case authenticationFailed(claimedTenant: String, requestID: UInt32)
    /// Result events were dropped for a subscriber that did not read them: `count` of them.
    case eventsDropped(count: Int)
}

/// The deadlines a session keeps, each armed at most once at a time.
enum SessionTimer: Hashable, CaseIterable, Sendable {
    /// HELLO must be accepted by then (``RelayListenerConfiguration/helloTimeout`` after the connection opened).
    case hello
    /// A connection with no frame for ``RelayListenerConfiguration/idleTimeout`` is said GOODBYE and closed.
    case idle
    /// The next check that the credential and its tenant still give their rights
    /// (``ConnectionBounds/rightsCheckInterval``).
    case rights
    /// A peer that leaves its answers unread until then (``RelayListenerConfiguration/writeStallTimeout``) is closed.
    case writeStall
    /// The end of a wait for the credential's tokens, during which the socket is not read.
    case tokenWait
}

import Logging
import PushRelayProtocol
import RelayStore

/// What a connection's handler asks of the service behind it: checking HELLO and rights, answering requests, the
/// request limit and the results stream. ``RelayService`` is the one the relay runs; tests run a session against
/// one of their own.
protocol SessionService: Sendable {
    /// The credential a HELLO is bound to (``RelayService/authenticate(_:)``).
    func authenticate(_ hello: Pushrelay_V1_Hello) async throws(ProtocolError) -> VerifiedCredential
    /// `AUTHENTICATION_FAILED` once `credential` is revoked or its tenant disabled
    /// (``RelayService/checkRights(_:)``).
    func checkRights(_ credential: VerifiedCredential) async throws(ProtocolError)
    /// The answer to one request of an authenticated connection (``RelayService/handle(_:caller:logger:jobStored:)``).
    func handle(
        _ frame: Frame,
        caller: VerifiedCredential,
        logger: Logger,
        jobStored: @Sendable () -> Void
    ) async throws(ProtocolError) -> (FrameKind, [UInt8])
    /// Each credential's request limit.
    var requests: RequestLimiter { get }
    /// The results stream's subscribers.
    var results: ResultBroadcaster { get }
}

extension RelayService: SessionService {}

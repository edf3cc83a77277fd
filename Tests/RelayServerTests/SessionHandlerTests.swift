import Logging
import NIOCore
import NIOEmbedded
import PushRelayProtocol
import RelayStore
import Synchronization
import Testing

@testable import RelayServer

extension SessionStateMachineTests {
    /// The channel handler around the state machine, on NIO's embedded channels: their event loops keep a time of
    /// their own, which the tests move, so deadlines pass without waiting for them.
    @Suite struct OnAnEmbeddedChannel {
        @Test func noHelloByTheDeadlineIsAnsweredHelloRequiredOnRequestIDZeroAndTheChannelClosed() throws {
            let (channel, loop, _) = try embeddedSession { $0.helloTimeout = .seconds(10) }
            // Half a header, then silence.
            try channel.writeInbound(ByteBuffer(bytes: [0, 0, 0]))
            loop.advanceTime(by: .milliseconds(9_999))
            #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
            #expect(channel.isActive)
            loop.advanceTime(by: .milliseconds(1))
            let answer = try #require(try frames(in: channel.readOutbound(as: ByteBuffer.self)).first)
            #expect(answer.kind == .error && answer.requestID == 0)
            #expect(try answer.decode(Pushrelay_V1_Error.self).code == .helloRequired)
            #expect(!channel.isActive)
        }

        @Test func aPeerThatLeavesItsAnswersUnreadIsNotReadThenClosedAfterTheWriteStallTimeout() throws {
            let (channel, loop, reads) = try embeddedSession {
                $0.helloTimeout = .seconds(60)
                $0.writeStallTimeout = .seconds(5)
            }
            channel.isWritable = false
            channel.pipeline.fireChannelWritabilityChanged()
            // While its answers wait, a frame is not handled, and the socket is not read.
            try channel.writeInbound(FrameEncoder().frame(kind: .ping, requestID: 2, message: Pushrelay_V1_Ping()))
            let readsBefore = reads.count
            channel.read()
            #expect(reads.count == readsBefore)
            #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)

            // It reads its answers: the frame is handled (HELLO_REQUIRED: it came before HELLO) and the read done.
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            let answer = try #require(try frames(in: channel.readOutbound(as: ByteBuffer.self)).first)
            #expect(answer.requestID == 2)
            #expect(try answer.decode(Pushrelay_V1_Error.self).code == .helloRequired)
            #expect(reads.count == readsBefore + 1)

            // It stops reading for good: closed once the write-stall timeout has passed.
            channel.isWritable = false
            channel.pipeline.fireChannelWritabilityChanged()
            loop.advanceTime(by: .milliseconds(4_999))
            #expect(channel.isActive)
            loop.advanceTime(by: .milliseconds(1))
            #expect(!channel.isActive)
        }

        @Test func aCredentialRevokedWhileTheConnectionIsOpenIsRefusedOnRequestIDZeroAtTheNextCheck() async throws {
            let service = FakeSessionService()
            let loop = NIOAsyncTestingEventLoop()
            let configuration = RelayListenerConfiguration(port: 0)
            let channel = try await NIOAsyncTestingChannel(loop: loop) { channel in
                try channel.pipeline.syncOperations.addHandler(
                    RelaySessionHandler(
                        service: service, configuration: configuration,
                        admission: ConnectionAdmission(maximumPerTenant: 4, logger: quietLogger),
                        bodies: InflatedBytesBudget(limit: 1 << 20), connectionID: "c1", logger: quietLogger))
            }
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4_000))
            var hello = Pushrelay_V1_Hello()
            (hello.minVersion, hello.maxVersion) = (1, 1)
            hello.tenant = "circl"
            hello.credential = "prk_test"
            try await channel.writeInbound(FrameEncoder().frame(kind: .hello, requestID: 1, message: hello))
            let answer = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
            let ok = try #require(try frames(in: answer).first)
            #expect(ok.kind == FrameKind.hello.answer)
            #expect(try ok.decode(Pushrelay_V1_HelloOk.self).tenant == "circl")

            service.revoke()
            await loop.advanceTime(by: .seconds(1))
            let written = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
            let refusal = try #require(try frames(in: written).first)
            #expect(refusal.kind == .error && refusal.requestID == 0)
            #expect(try refusal.decode(Pushrelay_V1_Error.self).code == .authenticationFailed)
            try await channel.closeFuture.get()
            #expect(service.rightsChecks == 1)
        }
    }
}

/// A session handler on an embedded channel, connected, with `configure` applied to the listener's settings; and
/// the reads that pass it towards the socket.
private func embeddedSession(
    configure: (inout RelayListenerConfiguration) -> Void
) throws -> (EmbeddedChannel, EmbeddedEventLoop, ReadCounter) {
    var configuration = RelayListenerConfiguration(port: 0)
    configure(&configuration)
    let loop = EmbeddedEventLoop()
    let reads = ReadCounter()
    let handler = RelaySessionHandler(
        service: FakeSessionService(), configuration: configuration,
        admission: ConnectionAdmission(maximumPerTenant: 4, logger: quietLogger),
        bodies: InflatedBytesBudget(limit: 1 << 20), connectionID: "c1", logger: quietLogger)
    let channel = EmbeddedChannel(loop: loop)
    try channel.pipeline.syncOperations.addHandlers([reads, handler])
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4_000)).wait()
    return (channel, loop, reads)
}

/// The frames in `buffer` (none when it is `nil`).
private func frames(in buffer: ByteBuffer?) throws -> [Frame] {
    guard var buffer else { return [] }
    var parser = FrameParser(limits: RelayListenerConfiguration(port: 0).limits)
    var found: [Frame] = []
    while let parsed = parser.next(from: &buffer) {
        guard case .frame(let frame) = parsed else {
            Issue.record("the relay wrote a frame that cannot be read: \(parsed)")
            break
        }
        found.append(frame)
    }
    return found
}

/// Counts the reads that pass towards the socket: those the session handler did not hold.
private final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer

    private(set) var count = 0

    func read(context: ChannelHandlerContext) {
        count += 1
        context.read()
    }
}

/// A service that accepts every HELLO, answers every request with an empty answer, and finds the credential revoked
/// once ``revoke()`` is called.
final class FakeSessionService: SessionService {
    let requests = RequestLimiter(requestsPerSecond: 1_000, burst: 2_000)
    let results = ResultBroadcaster()
    private let revoked = Mutex(false)
    private let checks = Mutex(0)

    /// The credential is revoked from now on.
    func revoke() {
        revoked.withLock { $0 = true }
    }

    /// The rights checks made so far.
    var rightsChecks: Int { checks.withLock { $0 } }

    func authenticate(_ hello: Pushrelay_V1_Hello) async throws(ProtocolError) -> VerifiedCredential {
        VerifiedCredential(tenantID: hello.tenant, id: "credential-1")
    }

    func checkRights(_ credential: VerifiedCredential) async throws(ProtocolError) {
        checks.withLock { $0 += 1 }
        if revoked.withLock({ $0 }) { throw ProtocolError(.authenticationFailed, "the credential was revoked") }
    }

    func handle(
        _ frame: Frame,
        caller: VerifiedCredential,
        logger: Logger,
        jobStored: @Sendable () -> Void
    ) async throws(ProtocolError) -> (FrameKind, [UInt8]) {
        (frame.kind.answer, [])
    }
}

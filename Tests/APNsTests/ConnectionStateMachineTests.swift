import NIOCore
import Testing

@testable import APNs

/// The connection's state machine on a test clock: plain values, no sockets.
@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    @Test func theConnectionIsReadyOnceTheHandshakeChoseH2AndTheFirstSettingsCameInEitherOrder() throws {
        let clock = ManualClock()
        let configuration = ConnectionStateMachine.Configuration(Fixtures.configuration())
        var settingsFirst = ConnectionStateMachine(configuration: configuration, authority: "a", now: clock.now)
        settingsFirst.channelActive()
        var opening = settingsFirst.takeOutbound(allocator: ByteBufferAllocator())
        #expect(opening.readString(length: 24) == "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        let frames = FakeAPNs.frames(in: opening)
        #expect(frames.map(\.knownType) == [.settings, .windowUpdate])
        #expect(frames[1].firstWord == UInt32((1 << 20) - 65_535))
        guard case .settings(nil, .unchanged) = try settingsFirst.receive(Fixtures.settings([(0x3, 1)])) else {
            Issue.record("SETTINGS before the handshake made the connection ready")
            return
        }
        #expect(settingsFirst.isConnecting)
        #expect(settingsFirst.tlsHandshakeCompleted(alpn: "h2") == .becameReady)
        #expect(settingsFirst.isReady)

        var handshakeFirst = ConnectionStateMachine(configuration: configuration, authority: "a", now: clock.now)
        #expect(handshakeFirst.tlsHandshakeCompleted(alpn: "h2") == .none)
        guard case .settings(nil, .becameReady) = try handshakeFirst.receive(Fixtures.settings([])) else {
            Issue.record("the first SETTINGS after the handshake did not make the connection ready")
            return
        }
        let acknowledgement = try #require(FakeAPNs.written(by: &handshakeFirst).first)
        #expect(acknowledgement.knownType == .settings && acknowledgement.has(HTTP2FrameFlag.ack))

        var notH2 = ConnectionStateMachine(configuration: configuration, authority: "a", now: clock.now)
        #expect(notH2.tlsHandshakeCompleted(alpn: "http/1.1") == .close)
        #expect(notH2.channelInactive().setupError as? APNsTransportFailure == .connectFailed("ALPN did not select h2"))
    }

    @Test func streamsAreLimitedByThePeersSettingsAndOurOwnCap() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(
            at: clock.now, settings: [(0x3, 3)],
            configuration: Fixtures.configuration { $0.maximumStreamsPerConnection = 2 }
        )
        #expect(connection.availableStreams == 2)
        #expect(
            connection.sendRequest(Fixtures.request(deadline: clock.now + .seconds(30)), authorization: nil) == .sent)
        #expect(connection.availableStreams == 1)
        let frames = FakeAPNs.written(by: &connection)
        #expect(frames.map(\.knownType) == [.headers, .data])
        #expect(frames.map(\.streamID) == [1, 1])
        #expect(frames[1].has(HTTP2FrameFlag.endStream))
        guard case .settings(.some(1), .hasCapacity) = try connection.receive(Fixtures.settings([(0x3, 1)])) else {
            Issue.record("a lower stream limit was not reported")
            return
        }
        #expect(connection.availableStreams == 0)
        #expect(connection.streams.peakPerLimit == [3: 1])
    }

    @Test func aRequestPastItsDeadlineIsFinishedAsTimedOutAndItsStreamReset() throws {
        var clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        let early = Fixtures.request(deadline: clock.now + .seconds(1))
        let late = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = connection.sendRequest(early, authorization: nil)
        _ = connection.sendRequest(late, authorization: nil)
        _ = FakeAPNs.written(by: &connection)

        clock.advance(.milliseconds(999))
        #expect(connection.expireStreams(now: clock.now) == nil)
        clock.advance(.milliseconds(1))
        let expiry = connection.expireStreams(now: clock.now)
        let expired = try #require(expiry)
        #expect(expired.requests.map(ObjectIdentifier.init) == [ObjectIdentifier(early)])
        #expect(expired.then == .hasCapacity)
        let reset = try #require(FakeAPNs.written(by: &connection).first)
        #expect(reset.knownType == .rstStream && reset.streamID == 1)
        #expect(reset.firstWord == HTTP2ErrorCode.cancel.rawValue)
        #expect(connection.streams.count == 1)

        // The answer that comes too late for the reset stream is dropped.
        var apns = FakeAPNs()
        guard case .none = try connection.receive(apns.headers(1, status: 200, endStream: true)) else {
            Issue.record("a reset stream's late answer finished a request")
            return
        }
    }

    @Test func aPingUnansweredByItsDeadlineGivesTheConnectionUpAndLosesItsRequests() throws {
        var clock = ManualClock()
        let configuration = Fixtures.configuration {
            $0.idlePingInterval = .seconds(60)
            $0.pingTimeout = .seconds(10)
        }
        var connection = try FakeAPNs.readyConnection(at: clock.now, configuration: configuration)
        let requests = (0..<2).map { _ in Fixtures.request(deadline: clock.now + .seconds(300)) }
        for request in requests { _ = connection.sendRequest(request, authorization: nil) }
        _ = FakeAPNs.written(by: &connection)

        clock.advance(.seconds(59))
        guard case .none = connection.checkPing(now: clock.now) else {
            Issue.record("a PING went out before the idle interval")
            return
        }
        clock.advance(.seconds(1))
        guard case .sent = connection.checkPing(now: clock.now) else {
            Issue.record("no PING after the idle interval")
            return
        }
        let ping = try #require(FakeAPNs.written(by: &connection).first)
        #expect(ping.knownType == .ping && !ping.has(HTTP2FrameFlag.ack))
        #expect(connection.pings.sent == 1)

        clock.advance(.milliseconds(9_999))
        guard case .none = connection.checkPing(now: clock.now) else {
            Issue.record("the PING timed out before its deadline")
            return
        }
        clock.advance(.milliseconds(1))
        guard case .timedOut(let lost, let wasReady) = connection.checkPing(now: clock.now) else {
            Issue.record("an unanswered PING did not give the connection up")
            return
        }
        #expect(lost.map(ObjectIdentifier.init) == requests.map(ObjectIdentifier.init))
        #expect(wasReady)
        #expect(connection.phase == .draining)
        #expect(connection.streams.isEmpty)
        #expect(connection.availableStreams == 0)
    }

    @Test func anAnsweredPingKeepsTheConnectionAndReadsPutTheNextOneOff() throws {
        var clock = ManualClock()
        let configuration = Fixtures.configuration {
            $0.idlePingInterval = .seconds(60)
            $0.pingTimeout = .seconds(10)
        }
        var connection = try FakeAPNs.readyConnection(at: clock.now, configuration: configuration)
        clock.advance(.seconds(30))
        connection.bytesRead(now: clock.now)
        clock.advance(.seconds(59))
        guard case .none = connection.checkPing(now: clock.now) else {
            Issue.record("a PING went out although the connection read 59 s ago")
            return
        }
        clock.advance(.seconds(1))
        guard case .sent = connection.checkPing(now: clock.now) else {
            Issue.record("no PING after the idle interval")
            return
        }
        let ping = try #require(FakeAPNs.written(by: &connection).first)
        let data = try #require(ping.payload.getInteger(at: ping.payload.readerIndex, as: UInt64.self))
        connection.bytesRead(now: clock.now)  // The handler notes every read, the acknowledgement's too.
        guard case .none = try connection.receive(Fixtures.ping(data, ack: true)) else {
            Issue.record("a PING acknowledgement did something")
            return
        }
        #expect(connection.pings.acknowledged == 1)
        clock.advance(.seconds(20))
        guard case .none = connection.checkPing(now: clock.now) else {
            Issue.record("an answered PING timed out")
            return
        }
        #expect(connection.isReady)
    }

    @Test func goAwayFailsTheStreamsAboveItsLastIdAndLetsThoseBelowFinish() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        let requests = (0..<3).map { _ in Fixtures.request(deadline: clock.now + .seconds(30)) }
        for request in requests { _ = connection.sendRequest(request, authorization: nil) }  // streams 1, 3, 5
        _ = FakeAPNs.written(by: &connection)

        guard
            case .goAway(let goAway) = try connection.receive(
                Fixtures.goAway(lastStreamID: 3, debug: #"{"reason":"Shutdown"}"#))
        else {
            Issue.record("GOAWAY was not reported")
            return
        }
        #expect(goAway.reason == "Shutdown")
        #expect(goAway.unprocessed.map(ObjectIdentifier.init) == [ObjectIdentifier(requests[2])])
        #expect(!goAway.close)
        #expect(connection.phase == .draining)
        #expect(connection.availableStreams == 0)

        var apns = FakeAPNs()
        guard
            case .finish(let first, .success(let response), .notReady(close: false)) =
                try connection.receive(apns.headers(1, status: 200, endStream: true))
        else {
            Issue.record("stream 1, below the last id, did not finish")
            return
        }
        #expect(first === requests[0] && response.status == 200)
        guard
            case .finish(let second, .success, .notReady(close: true)) =
                try connection.receive(apns.headers(3, status: 200, endStream: true))
        else {
            Issue.record("stream 3, the last id, did not finish and close the drained connection")
            return
        }
        #expect(second === requests[1])
    }

    @Test func goAwayWithEveryStreamAboveItsLastIdClosesAtOnce() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        let request = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = connection.sendRequest(request, authorization: nil)
        guard case .goAway(let goAway) = try connection.receive(Fixtures.goAway(lastStreamID: 0, code: .noError)) else {
            Issue.record("GOAWAY was not reported")
            return
        }
        #expect(goAway.reason == "NO_ERROR")
        #expect(goAway.unprocessed.count == 1 && goAway.unprocessed[0] === request)
        #expect(goAway.close)
    }

    @Test func aRefusedProviderTokenDrainsTheConnection() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        let refused = Fixtures.request(deadline: clock.now + .seconds(30))
        let other = Fixtures.request(deadline: clock.now + .seconds(30))
        _ = connection.sendRequest(refused, authorization: "bearer x")
        _ = connection.sendRequest(other, authorization: "bearer x")
        var apns = FakeAPNs()
        guard case .none = try connection.receive(apns.headers(1, status: 403, endStream: false)) else {
            Issue.record("headers without END_STREAM finished the stream")
            return
        }
        guard
            case .finish(
                let request, .success(let response), .beganDraining(reason: "ExpiredProviderToken", close: false)) =
                try connection.receive(Fixtures.data(1, #"{"reason":"ExpiredProviderToken"}"#, endStream: true))
        else {
            Issue.record("ExpiredProviderToken did not drain the connection")
            return
        }
        #expect(request === refused)
        #expect(response.status == 403 && response.reason == .expiredProviderToken)
        #expect(connection.phase == .draining)
        #expect(!connection.hasDelivered)
    }

    @Test func aRefusedStreamIsNotProcessedAndAnotherResetIsAStreamReset() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        _ = connection.sendRequest(Fixtures.request(deadline: clock.now + .seconds(30)), authorization: nil)
        _ = connection.sendRequest(Fixtures.request(deadline: clock.now + .seconds(30)), authorization: nil)
        guard
            case .finish(_, .failure(.notProcessed("REFUSED_STREAM")), .hasCapacity) =
                try connection.receive(Fixtures.rstStream(1, code: .refusedStream))
        else {
            Issue.record("REFUSED_STREAM was not 'not processed'")
            return
        }
        guard
            case .finish(_, .failure(.streamReset("INTERNAL_ERROR")), .hasCapacity) =
                try connection.receive(Fixtures.rstStream(3, code: .internalError))
        else {
            Issue.record("INTERNAL_ERROR was not a stream reset")
            return
        }
    }

    @Test func aProtocolErrorIsAnsweredWithGoAway() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        #expect(throws: HTTP2ConnectionError.self) {
            try connection.receive(Fixtures.frame(.headers, flags: HTTP2FrameFlag.endHeaders, stream: 0))
        }
        connection.protocolError(HTTP2ConnectionError(code: .protocolError, reason: "HEADERS on stream 0"))
        let goAway = try #require(FakeAPNs.written(by: &connection).first)
        #expect(goAway.knownType == .goAway)
        #expect(goAway.payload.getInteger(at: goAway.payload.readerIndex + 4, as: UInt32.self) == 1)
        #expect(connection.phase == .draining)
    }

    @Test func theChannelsEndLosesEveryRequestInStreamOrder() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(at: clock.now)
        let requests = (0..<4).map { _ in Fixtures.request(deadline: clock.now + .seconds(30)) }
        for request in requests { _ = connection.sendRequest(request, authorization: nil) }
        let closed = connection.channelInactive()
        #expect(closed.lost.map(ObjectIdentifier.init) == requests.map(ObjectIdentifier.init))
        #expect(closed.setupError == nil)
        #expect(connection.phase == .closed)
    }
}

import NIOCore
import NIOHPACK
import Testing

@testable import APNs

/// Requests to another HTTP/2 API (FCM's `messages:send`) through the engine's state machines, on a test clock.
@Suite("HTTP/2 requests of other APIs")
struct HTTP2RequestTests {
    static func request(deadline: NIODeadline, body: String = #"{"message":{"token":"t"}}"#) -> PendingRequest {
        request(deadline: deadline, body: HTTP2Request.Body(ByteBuffer(string: body)))
    }

    static func request(deadline: NIODeadline, body: HTTP2Request.Body) -> PendingRequest {
        let request = HTTP2Request(
            path: "/v1/projects/demo/messages:send",
            headers: [
                .init(name: "authorization", value: "Bearer ya29.token"),
                .init(name: "content-type", value: "application/json"),
            ],
            body: body)
        return PendingRequest(.request(request), deadline: deadline, completion: .answers({ _, _ in }, position: 0))
    }

    @Test func aRequestIsWrittenWithItsPathAndHeadersWhichTheNextOneRefersTo() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(
            at: clock.now, configuration: Fixtures.configuration { $0.credential = .none })
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var blocks: [Int] = []
        for body in [#"{"message":{"token":"a"}}"#, #"{"message":{"token":"b"}}"#] {
            #expect(
                connection.sendRequest(Self.request(deadline: clock.now + .seconds(30), body: body), authorization: nil)
                    == .sent)
            let frames = FakeAPNs.written(by: &connection)
            #expect(frames.map(\.knownType) == [.headers, .data])
            var block = frames[0].payload
            blocks.append(block.readableBytes)
            let headers = try decoder.decodeHeaders(from: &block)
            #expect(
                headers.map { "\($0.name): \($0.value)" } == [
                    ":method: POST", ":scheme: https", ":authority: api.push.apple.com",
                    ":path: /v1/projects/demo/messages:send", "authorization: Bearer ya29.token",
                    "content-type: application/json",
                ])
            #expect(frames[1].payload == ByteBuffer(string: body) && frames[1].has(HTTP2FrameFlag.endStream))
        }
        // The second block is references to the first one's table entries: a byte per field.
        #expect(blocks[1] <= 6 && blocks[1] < blocks[0])
        #expect(connection.headerBlocks.lastBlockReused == false)
        _ = connection.sendRequest(Self.request(deadline: clock.now + .seconds(30)), authorization: nil)
        #expect(connection.headerBlocks.lastBlockReused)
    }

    @Test func aSharedBodyIsSentWithEachRequestsTextInsertedAndStaysAsItWas() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(
            at: clock.now, configuration: Fixtures.configuration { $0.credential = .none })
        let shared = ByteBuffer(string: #"{"message":{"token":""}}"#)
        let hole = #"{"message":{"token":""#.utf8.count
        for token in ["cX9f:APA91b", "dY0g:APA91b-other"] {
            let body = HTTP2Request.Body(shared, inserting: token, at: hole)
            #expect(body.count == shared.readableBytes + token.utf8.count)
            _ = connection.sendRequest(Self.request(deadline: clock.now + .seconds(30), body: body), authorization: nil)
            let frames = FakeAPNs.written(by: &connection)
            #expect(frames.map(\.knownType) == [.headers, .data])
            #expect(frames[1].payload == ByteBuffer(string: #"{"message":{"token":""# + token + #""}}"#))
            #expect(frames[1].has(HTTP2FrameFlag.endStream))
        }
        #expect(shared == ByteBuffer(string: #"{"message":{"token":""}}"#))
        #expect(
            HTTP2Request.Body(shared, inserting: "x", at: 1_000).joined
                == ByteBuffer(string: #"{"message":{"token":""}}x"#))
    }

    @Test func anAnswerKeepsItsBodyAndRetryAfterAndIsClassedByItsStatus() throws {
        let clock = ManualClock()
        var connection = try FakeAPNs.readyConnection(
            at: clock.now, configuration: Fixtures.configuration { $0.credential = .none })
        let sent = Self.request(deadline: clock.now + .seconds(30))
        _ = connection.sendRequest(sent, authorization: nil)
        var peer = FakeAPNs()
        _ = try connection.receive(peer.headers(1, status: 429, fields: [("retry-after", "7")], endStream: false))
        let body = #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#
        guard
            case .finish(let request, .success(let response), .hasCapacity) =
                try connection.receive(Fixtures.data(1, body, endStream: true))
        else {
            Issue.record("the answer did not finish its request")
            return
        }
        #expect(request === sent)
        #expect(response.status == 429 && response.reason == nil && response.body == ByteBuffer(string: body))
        #expect(response.retryAfter == "7" && response.retryAfterDelay == .seconds(7))
        #expect(response.outcomeClass == .retryLater)
        #expect(APNsResponse(status: 404).outcomeClass == .configurationFault)
        #expect(!connection.hasDelivered)
    }

    @Test func aRetryWaitsAtLeastWhatRetryAfterAsks() {
        let clock = ManualClock()
        var (pool, connections) = PoolStateMachineTests.runningPool(slots: 1) { $0.credential = .none }
        let request = Self.request(deadline: clock.now + .seconds(30))
        _ = pool.submit(request, backPressure: .wait, connections: connections)
        var quota = APNsResponse(status: 429)
        quota.retryAfter = "3"
        guard
            case .retry(let delay) = pool.requestFinished(
                request, .success(quota), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a 429 was not retried")
            return
        }
        #expect(delay == .seconds(3))
        let late = Self.request(deadline: clock.now + .seconds(2))
        _ = pool.submit(late, backPressure: .wait, connections: connections)
        guard
            case .complete(let report) = pool.requestFinished(
                late, .success(quota), slot: 0, connections: connections, now: clock.now)
        else {
            Issue.record("a retry past the deadline was scheduled")
            return
        }
        #expect(report.outcome == .retryLater && report.response?.retryAfter == "3")
    }

    @Test func aRequestTheEngineCannotSendIsRefusedBeforeAnythingIsSent() {
        func code(_ request: HTTP2Request) -> APNsValidationError.Code? {
            do {
                try request.validate()
                return nil
            } catch {
                return error.code
            }
        }
        let body = ByteBuffer(string: "{}")
        #expect(code(HTTP2Request(path: "/v1/x", headers: [], body: body)) == nil)
        #expect(code(HTTP2Request(path: "v1/x", headers: [], body: body)) == .invalidPath)
        #expect(code(HTTP2Request(path: "/v1/x", headers: [], body: ByteBuffer())) == .emptyPayload)
        #expect(
            code(HTTP2Request(path: "/", headers: [], body: ByteBuffer(repeating: 0x20, count: 16_385)))
                == .payloadTooLarge)
        let nearlyFull = HTTP2Request.Body(ByteBuffer(repeating: 0x20, count: 16_380), inserting: "a token", at: 3)
        #expect(code(HTTP2Request(path: "/", headers: [], body: nearlyFull)) == .payloadTooLarge)
        #expect(
            code(HTTP2Request(path: "/", headers: [.init(name: "Authorization", value: "x")], body: body))
                == .invalidHeaderName)
        #expect(
            code(HTTP2Request(path: "/", headers: [.init(name: ":path", value: "/y")], body: body))
                == .invalidHeaderName)
    }
}

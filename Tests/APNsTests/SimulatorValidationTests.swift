import APNs
import APNsSimulator
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Testing

// MARK: - A raw HTTP/2 client

/// One request as it goes on the wire: header fields in order (pseudo-headers included, duplicates and
/// omissions allowed) and an optional body.
struct RawRequest: Sendable {
    struct Field: Sendable {
        var name: String
        var value: String
    }

    var fields: [Field]
    /// nil: the HEADERS frame ends the stream. Otherwise one DATA frame (possibly empty) ends it.
    var body: ByteBuffer?

    /// A request APNs accepts: POST to `deviceToken` with `authorization`, an alert to ``Harness/topic``.
    static func apns(
        deviceToken: String = Harness.randomToken(), authorization: String?,
        payload: String = #"{"aps":{"alert":"hello"}}"#
    ) -> RawRequest {
        var request = RawRequest(
            fields: [
                Field(name: ":method", value: "POST"),
                Field(name: ":scheme", value: "https"),
                Field(name: ":path", value: "/3/device/\(deviceToken)"),
                Field(name: ":authority", value: "localhost"),
            ],
            body: ByteBuffer(string: payload)
        )
        request.set("authorization", authorization)
        request.set("apns-topic", Harness.topic)
        request.set("apns-push-type", "alert")
        return request
    }

    /// Replaces every field `name` with one of `value` (at the first one's place), or removes them for nil.
    mutating func set(_ name: String, _ value: String?) {
        let index = fields.firstIndex { $0.name == name }
        fields.removeAll { $0.name == name }
        guard let value else { return }
        fields.insert(Field(name: name, value: value), at: index ?? fields.endIndex)
    }

    /// Appends a field, even when one of that name is already there.
    mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// A JSON alert payload of exactly `size` bytes.
    static func payload(size: Int) -> String {
        let prefix = #"{"aps":{"alert":""#
        let suffix = #""}}"#
        return prefix + String(repeating: "x", count: size - prefix.utf8.count - suffix.utf8.count) + suffix
    }
}

/// The answer to one stream: its response, or the RST_STREAM that ended it.
struct RawResponse: Sendable {
    /// The `:status`; nil when the stream was reset.
    var status: Int?
    var headers: HPACKHeaders
    var body: ByteBuffer
    /// The RST_STREAM error code, when the stream was reset.
    var resetCode: HTTP2ErrorCode?

    var apnsID: String? { headers.first(name: "apns-id") }

    private struct ErrorBody: Decodable {
        var reason: String
        var timestamp: Int64?
    }

    private var errorBody: ErrorBody? {
        guard body.readableBytes > 0 else { return nil }
        return try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView))
    }

    /// `reason` from the JSON body.
    var reason: String? { errorBody?.reason }
    /// `timestamp` from the JSON body.
    var timestamp: Int64? { errorBody?.timestamp }
}

enum RawClientError: Error {
    case noH2(negotiated: String?)
    case connectionClosed
}

/// A client that speaks HTTP/2 frames through `NIOHTTP2Handler` (no multiplexer) over TLS: it opens odd
/// streams in order, writes whatever headers it is given, and collects the response HEADERS and DATA.
///
/// Header-block and content-length validation are off so that malformed requests get out. The handler does
/// not replenish the connection window, which is fine for the few small responses a test reads.
final class RawHTTP2Client: Sendable {
    private let channel: any Channel
    private let collector: NIOLoopBound<RawResponseCollector>

    private init(channel: any Channel, collector: NIOLoopBound<RawResponseCollector>) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects to `simulator` over TLS (trusting its CA, ALPN h2) and checks that h2 was negotiated.
    static func connect(to simulator: APNsSimulator) async throws -> RawHTTP2Client {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(simulator.caFile)
        tls.applicationProtocols = ["h2"]
        tls.minimumTLSVersion = .tlsv12
        let sslContext = try NIOSSLContext(configuration: tls)
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.headerBlockValidation = .disabled
        configuration.contentLengthValidation = .disabled
        let http2 = configuration
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: nil))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client, connectionConfiguration: http2))
                    try sync.addHandler(RawResponseCollector(eventLoop: channel.eventLoop))
                }
            }
            .connect(host: simulator.host, port: simulator.port)
            .get()
        let collector = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: RawResponseCollector.self),
                eventLoop: channel.eventLoop
            )
        }.get()
        let client = RawHTTP2Client(channel: channel, collector: collector)
        do {
            let negotiated = try await client.onCollector { $0.handshake.futureResult }
            guard negotiated == "h2" else { throw RawClientError.noH2(negotiated: negotiated) }
        } catch {
            await client.close()
            throw error
        }
        return client
    }

    /// Sends `request` on the next stream and waits for its answer.
    func send(_ request: RawRequest) async throws -> RawResponse {
        try await onCollector { $0.send(request) }
    }

    /// A PING round trip. The simulator answers it in a later read than every request before it, so once it
    /// returns the simulator has finished with those requests, statistics included.
    func ping() async throws {
        try await onCollector { $0.ping() }
    }

    /// Closes the connection.
    func close() async {
        try? await channel.close()
    }

    private func onCollector<T: Sendable>(
        _ body: @escaping @Sendable (RawResponseCollector) -> EventLoopFuture<T>
    ) async throws -> T {
        let collector = self.collector
        return try await channel.eventLoop.flatSubmit { body(collector.value) }.get()
    }
}

/// The frame-level end of ``RawHTTP2Client``, on the channel's event loop.
final class RawResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Pending {
        var promise: EventLoopPromise<RawResponse>
        var headers: HPACKHeaders?
        var body: ByteBuffer
    }

    /// Completed with the ALPN protocol once the TLS handshake is done.
    let handshake: EventLoopPromise<String?>
    private let eventLoop: any EventLoop
    private var context: ChannelHandlerContext?
    private var nextStreamID = HTTP2StreamID(1)
    private var pending: [HTTP2StreamID: Pending] = [:]
    private var pings: [HTTP2PingData: EventLoopPromise<Void>] = [:]
    private var pingsSent: UInt64 = 0
    private var closed = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        handshake = eventLoop.makePromise()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func send(_ request: RawRequest) -> EventLoopFuture<RawResponse> {
        guard let context, !closed else { return eventLoop.makeFailedFuture(RawClientError.connectionClosed) }
        let streamID = nextStreamID
        nextStreamID = HTTP2StreamID(Int(streamID) + 2)
        let promise = eventLoop.makePromise(of: RawResponse.self)
        pending[streamID] = Pending(promise: promise, body: context.channel.allocator.buffer(capacity: 0))
        let headers = HPACKHeaders(request.fields.map { ($0.name, $0.value) })
        let head = HTTP2Frame.FramePayload.Headers(headers: headers, endStream: request.body == nil)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(head))), promise: nil)
        if let body = request.body {
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(body), endStream: true)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(data))), promise: nil)
        }
        context.flush()
        return promise.futureResult
    }

    func ping() -> EventLoopFuture<Void> {
        guard let context, !closed else { return eventLoop.makeFailedFuture(RawClientError.connectionClosed) }
        pingsSent += 1
        let data = HTTP2PingData(withInteger: pingsSent)
        let promise = eventLoop.makePromise(of: Void.self)
        pings[data] = promise
        let frame = HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: false))
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            guard pending[frame.streamID] != nil else { return }
            if pending[frame.streamID]!.headers == nil { pending[frame.streamID]!.headers = headers.headers }
            if headers.endStream { finish(frame.streamID, resetCode: nil) }
        case .data(let data):
            guard pending[frame.streamID] != nil, case .byteBuffer(var buffer) = data.data else { return }
            pending[frame.streamID]!.body.writeBuffer(&buffer)
            if data.endStream { finish(frame.streamID, resetCode: nil) }
        case .rstStream(let code):
            finish(frame.streamID, resetCode: code)
        case .ping(let data, ack: true):
            pings.removeValue(forKey: data)?.succeed()
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            handshake.succeed(negotiated)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(RawClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(RawClientError.connectionClosed)
        self.context = nil
    }

    private func finish(_ streamID: HTTP2StreamID, resetCode: HTTP2ErrorCode?) {
        guard let stream = pending.removeValue(forKey: streamID) else { return }
        let status = resetCode == nil ? stream.headers?.first(name: ":status").flatMap { Int($0) } : nil
        stream.promise.succeed(
            RawResponse(status: status, headers: stream.headers ?? [:], body: stream.body, resetCode: resetCode)
        )
    }

    private func failAll(_ error: any Error) {
        closed = true
        handshake.fail(error)
        let streams = pending
        let waiting = pings
        pending = [:]
        pings = [:]
        for stream in streams.values { stream.promise.fail(error) }
        for ping in waiting.values { ping.fail(error) }
    }
}

// MARK: - Tests

/// A malformed (or deliberately valid) request and how Apple answers it.
struct ValidationCase: Sendable, CustomTestStringConvertible {
    var name: String
    var status: Int
    var reason: APNsReason?
    var edit: @Sendable (inout RawRequest) throws -> Void

    var testDescription: String { name }

    static func otherKeyToken(keyID: String) throws -> String {
        let key = try APNsSigningKey(privateKey: .init(), keyID: keyID, teamID: "TEAM123456")
        return "bearer " + key.makeToken(issuedAt: Date())
    }

    static let all: [ValidationCase] = [
        ValidationCase(name: "a good request", status: 200, reason: nil) { _ in },
        ValidationCase(name: "GET", status: 405, reason: .methodNotAllowed) {
            $0.set(":method", "GET")
            $0.body = nil
        },
        ValidationCase(name: "path /3/other/abc", status: 404, reason: .badPath) { $0.set(":path", "/3/other/abc") },
        ValidationCase(name: "path /3/device/", status: 400, reason: .missingDeviceToken) {
            $0.set(":path", "/3/device/")
        },
        ValidationCase(name: "path /3/device", status: 400, reason: .missingDeviceToken) {
            $0.set(":path", "/3/device")
        },
        ValidationCase(name: "odd-length token", status: 400, reason: .badDeviceToken) {
            $0.set(":path", "/3/device/" + String(Harness.randomToken().dropLast()))
        },
        ValidationCase(name: "non-hex token", status: 400, reason: .badDeviceToken) {
            $0.set(":path", "/3/device/" + String(repeating: "zz", count: 32))
        },
        ValidationCase(name: "54-byte token", status: 200, reason: nil) {
            $0.set(":path", "/3/device/" + Harness.randomToken(bytes: 54))
        },
        ValidationCase(name: "no authorization", status: 403, reason: .missingProviderToken) {
            $0.set("authorization", nil)
        },
        ValidationCase(name: "token of an unknown key", status: 403, reason: .invalidProviderToken) {
            $0.set("authorization", try otherKeyToken(keyID: "UNKNOWN123"))
        },
        ValidationCase(name: "token of our key id signed by another key", status: 403, reason: .invalidProviderToken) {
            $0.set("authorization", try otherKeyToken(keyID: "KEY1234567"))
        },
        ValidationCase(name: "garbage bearer", status: 403, reason: .invalidProviderToken) {
            $0.set("authorization", "bearer not-a.jwt.at-all")
        },
        ValidationCase(name: "missing apns-topic", status: 400, reason: .missingTopic) { $0.set("apns-topic", nil) },
        ValidationCase(name: "topic not allowed", status: 400, reason: .topicDisallowed) {
            $0.set("apns-topic", "com.not.ours")
        },
        ValidationCase(name: "voip with a topic lacking .voip", status: 400, reason: .badTopic) {
            $0.set("apns-push-type", "voip")
        },
        ValidationCase(name: "unknown apns-push-type", status: 400, reason: .invalidPushType) {
            $0.set("apns-push-type", "telegram")
        },
        ValidationCase(name: "apns-priority 7", status: 400, reason: .badPriority) { $0.set("apns-priority", "7") },
        ValidationCase(name: "background with priority 10", status: 400, reason: .badPriority) {
            $0.set("apns-push-type", "background")
            $0.set("apns-priority", "10")
            $0.body = ByteBuffer(string: #"{"aps":{"content-available":1}}"#)
        },
        ValidationCase(name: "background with priority 5", status: 200, reason: nil) {
            $0.set("apns-push-type", "background")
            $0.set("apns-priority", "5")
            $0.body = ByteBuffer(string: #"{"aps":{"content-available":1}}"#)
        },
        ValidationCase(name: "64-byte apns-collapse-id", status: 200, reason: nil) {
            $0.set("apns-collapse-id", String(repeating: "c", count: 64))
        },
        ValidationCase(name: "65-byte apns-collapse-id", status: 400, reason: .badCollapseId) {
            $0.set("apns-collapse-id", String(repeating: "c", count: 65))
        },
        ValidationCase(name: "apns-id not-a-uuid", status: 400, reason: .badMessageId) {
            $0.set("apns-id", "not-a-uuid")
        },
        ValidationCase(name: "apns-expiration soon", status: 400, reason: .badExpirationDate) {
            $0.set("apns-expiration", "soon")
        },
        ValidationCase(name: "apns-topic twice", status: 400, reason: .duplicateHeaders) {
            $0.add("apns-topic", Harness.topic)
        },
        ValidationCase(name: "apns-id twice", status: 400, reason: .duplicateHeaders) {
            $0.add("apns-id", UUID().uuidString)
            $0.add("apns-id", UUID().uuidString)
        },
        ValidationCase(name: "no body", status: 400, reason: .payloadEmpty) { $0.body = nil },
        ValidationCase(name: "an empty DATA frame", status: 400, reason: .payloadEmpty) { $0.body = ByteBuffer() },
        ValidationCase(name: "4096-byte alert payload", status: 200, reason: nil) {
            $0.body = ByteBuffer(string: RawRequest.payload(size: 4096))
        },
        ValidationCase(name: "4097-byte alert payload", status: 413, reason: .payloadTooLarge) {
            $0.body = ByteBuffer(string: RawRequest.payload(size: 4097))
        },
        ValidationCase(name: "5120-byte voip payload", status: 200, reason: nil) {
            $0.set("apns-push-type", "voip")
            $0.set("apns-topic", Harness.topic + ".voip")
            $0.body = ByteBuffer(string: RawRequest.payload(size: 5120))
        },
        ValidationCase(name: "5121-byte voip payload", status: 413, reason: .payloadTooLarge) {
            $0.set("apns-push-type", "voip")
            $0.set("apns-topic", Harness.topic + ".voip")
            $0.body = ByteBuffer(string: RawRequest.payload(size: 5121))
        },
        ValidationCase(name: "a body that is not JSON", status: 400, reason: .payloadEmpty) {
            $0.body = ByteBuffer(string: "hello")
        },
        ValidationCase(name: "a JSON array body", status: 400, reason: .payloadEmpty) {
            $0.body = ByteBuffer(string: "[1,2]")
        },
        ValidationCase(name: "a truncated JSON object", status: 400, reason: .payloadEmpty) {
            $0.body = ByteBuffer(string: #"{"aps":{"alert":"hi"}"#)
        },
    ]
}

@Suite("APNs simulator validation")
struct SimulatorValidationTests {
    /// Sends `request` on a fresh connection and returns the answer with the statistics after it.
    private static func answer(
        _ request: RawRequest, _ h: Harness
    ) async throws -> (RawResponse, APNsSimulatorStatistics) {
        let client = try await RawHTTP2Client.connect(to: h.simulator)
        do {
            let response = try await client.send(request)
            try await client.ping()
            let statistics = h.simulator.statistics()
            await client.close()
            return (response, statistics)
        } catch {
            await client.close()
            throw error
        }
    }

    private static func authorization(_ h: Harness) -> String {
        "bearer " + h.key.makeToken(issuedAt: Date())
    }

    @Test(arguments: ValidationCase.all)
    func answersLikeApple(_ validation: ValidationCase) async throws {
        try await Harness.run { h in
            var request = RawRequest.apns(authorization: Self.authorization(h))
            try validation.edit(&request)
            let (response, statistics) = try await Self.answer(request, h)
            #expect(response.status == validation.status)
            #expect(response.reason == validation.reason?.rawValue)
            #expect(response.timestamp == nil)
            #expect(response.apnsID.flatMap { UUID(uuidString: $0) } != nil, "apns-id: \(response.apnsID ?? "none")")
            if validation.reason != nil {
                #expect(response.headers.first(name: "content-type") == "application/json")
            } else {
                #expect(response.body.readableBytes == 0)
            }
            #expect(statistics.requestsReceived == 1)
            #expect(statistics.responses(status: validation.status) == 1)
            if let reason = validation.reason {
                #expect(statistics.responses(reason: reason) == 1)
                #expect(statistics.responsesByReason.values.reduce(0, +) == 1)
            } else {
                #expect(statistics.responsesByReason.isEmpty)
            }
        }
    }

    @Test func oneConnectionAnswersEveryCaseInTurnAndCountsThem() async throws {
        try await Harness.run { h in
            let client = try await RawHTTP2Client.connect(to: h.simulator)
            let authorization = Self.authorization(h)
            for validation in ValidationCase.all {
                var request = RawRequest.apns(authorization: authorization)
                try validation.edit(&request)
                let response = try await client.send(request)
                #expect(response.status == validation.status, "\(validation.name)")
                #expect(response.reason == validation.reason?.rawValue, "\(validation.name)")
            }
            try await client.ping()
            let statistics = h.simulator.statistics()
            await client.close()
            let cases = ValidationCase.all
            #expect(statistics.connectionsAccepted == 1)
            #expect(statistics.requestsReceived == cases.count)
            for status in Set(cases.map(\.status)) {
                #expect(statistics.responses(status: status) == cases.filter { $0.status == status }.count)
            }
            for reason in Set(cases.compactMap(\.reason)) {
                #expect(statistics.responses(reason: reason) == cases.filter { $0.reason == reason }.count)
            }
            #expect(statistics.responses(reason: .payloadEmpty) == 5)
            // Three bodies were not a JSON object; "no body" and the empty DATA frame were empty.
            #expect(statistics.invalidJSONPayloads == 3)
        }
    }

    @Test func apnsIDIsEchoedOrMadeUp() async throws {
        try await Harness.run { h in
            let client = try await RawHTTP2Client.connect(to: h.simulator)
            let authorization = Self.authorization(h)
            let apnsID = UUID().uuidString.lowercased()
            var request = RawRequest.apns(authorization: authorization)
            request.set("apns-id", apnsID)
            let echoed = try await client.send(request)
            #expect(echoed.status == 200)
            #expect(echoed.apnsID == apnsID)
            // Refused requests echo it too.
            request.set("apns-topic", "com.not.ours")
            let refused = try await client.send(request)
            #expect(refused.status == 400)
            #expect(refused.reason == "TopicDisallowed")
            #expect(refused.apnsID == apnsID)
            // Without one, each answer carries a new UUID.
            let first = try await client.send(RawRequest.apns(authorization: authorization))
            let second = try await client.send(RawRequest.apns(authorization: authorization))
            let firstID = try #require(first.apnsID.flatMap { UUID(uuidString: $0) })
            let secondID = try #require(second.apnsID.flatMap { UUID(uuidString: $0) })
            #expect(firstID != secondID)
            #expect(firstID != UUID(uuidString: apnsID))
            await client.close()
        }
    }

    @Test func unregisteredTokenGets410WithItsTimestamp() async throws {
        let dead = Harness.randomToken()
        try await Harness.run(configure: { $0.faults.unregisteredTokens = [dead: 1_700_000_000_000] }) { h in
            let (response, statistics) = try await Self.answer(
                RawRequest.apns(deviceToken: dead, authorization: Self.authorization(h)), h
            )
            #expect(response.status == 410)
            #expect(response.reason == "Unregistered")
            #expect(response.timestamp == 1_700_000_000_000)
            #expect(response.apnsID.flatMap { UUID(uuidString: $0) } != nil)
            #expect(statistics.responses(status: 410) == 1)
            #expect(statistics.responses(reason: .unregistered) == 1)
            // Other tokens are still delivered; a malformed request to the dead token is judged first.
            let (other, _) = try await Self.answer(RawRequest.apns(authorization: Self.authorization(h)), h)
            #expect(other.status == 200)
            var malformed = RawRequest.apns(deviceToken: dead, authorization: Self.authorization(h))
            malformed.set("apns-priority", "7")
            let (refused, _) = try await Self.answer(malformed, h)
            #expect(refused.status == 400)
            #expect(refused.reason == "BadPriority")
            #expect(refused.timestamp == nil)
        }
    }

    /// Ways to make a request's header block malformed HTTP/2 (RFC 9113 8.2, 8.3).
    enum Malformation: String, CaseIterable, Sendable {
        case duplicatePseudoHeader, uppercaseName, connectionSpecificField, nulInValue, pseudoHeaderAfterRegular
        case missingScheme

        /// `request` made malformed this way.
        func apply(to request: RawRequest) -> RawRequest {
            var request = request
            switch self {
            case .duplicatePseudoHeader:
                request.fields.insert(.init(name: ":path", value: "/3/device/\(Harness.randomToken())"), at: 0)
            case .uppercaseName: request.fields.append(.init(name: "Apns-Priority", value: "10"))
            case .connectionSpecificField: request.fields.append(.init(name: "connection", value: "keep-alive"))
            case .nulInValue: request.set("apns-topic", Harness.topic + "\u{0}")
            case .pseudoHeaderAfterRegular:
                request.set(":authority", nil)
                request.fields.append(.init(name: ":authority", value: "localhost"))
            case .missingScheme: request.set(":scheme", nil)
            }
            return request
        }
    }

    @Test(arguments: Malformation.allCases)
    func malformedHTTP2IsResetNotAnswered(_ malformation: Malformation) async throws {
        try await Harness.run { h in
            // Malformed HTTP/2: the HTTP/2 layer resets the stream with PROTOCOL_ERROR before APNs's rules are
            // applied (a duplicate apns-* header is DuplicateHeaders, above).
            var request = RawRequest.apns(authorization: Self.authorization(h))
            request = malformation.apply(to: request)
            let malformed = try await RawHTTP2Client.connect(to: h.simulator)
            let reset = try await malformed.send(request)
            await malformed.close()
            #expect(reset.status == nil)
            #expect(reset.resetCode == .protocolError)
            // It is no request for the simulator: only the good one that follows is counted.
            let (good, statistics) = try await Self.answer(RawRequest.apns(authorization: Self.authorization(h)), h)
            #expect(good.status == 200)
            #expect(statistics.requestsReceived == 1)
            #expect(statistics.responses(status: 200) == 1)
            #expect(statistics.responsesByStatus.count == 1)
        }
    }
}

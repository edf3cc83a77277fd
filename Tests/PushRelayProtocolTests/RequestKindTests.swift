import NIOCore
import PushRelayProtocol
import SwiftProtobuf
import Testing

/// The table of request kinds (RequestKind.swift): it holds every request kind of pushrelay.proto's `FrameKind` once,
/// with the wire values of Protocol/README.md, each kind's frame decodes to its own ``Request`` case, and a frame of
/// any other kind is refused `UNKNOWN_KIND`.
@Suite struct RequestKindTests {
    static let now: Int64 = 1_780_000_000_000

    /// The wire value of every request kind, as Protocol/README.md's "Requests and answers" gives it.
    static let wireValues: [RequestKind: UInt16] = [
        .hello: 0x0001, .ping: 0x0002, .goodbye: 0x0003, .registerDevice: 0x0010, .unregisterDevice: 0x0011,
        .listDevices: 0x0012, .send: 0x0020, .jobStatus: 0x0021, .queryDeliveries: 0x0022, .cancelJob: 0x0023,
        .listNotificationTypes: 0x0024, .setPreferences: 0x0030, .getPreferences: 0x0031, .setMute: 0x0032,
        .clearMute: 0x0033, .listMutes: 0x0034, .setPresence: 0x0035, .subscribeResults: 0x0040,
        .unsubscribeResults: 0x0041,
    ]

    /// A message of `kind` that its field rules accept.
    static func validMessage(of kind: RequestKind) -> any SwiftProtobuf.Message {
        switch kind {
        case .hello:
            Pushrelay_V1_Hello.with {
                ($0.minVersion, $0.maxVersion, $0.tenant, $0.credential) = (1, 1, "circl", "prk_secret")
            }
        case .ping: Pushrelay_V1_Ping.with { $0.nonce = 7 }
        case .goodbye: Pushrelay_V1_Goodbye.with { $0.reason = "done" }
        case .registerDevice:
            Pushrelay_V1_RegisterDevice.with {
                ($0.userID, $0.token, $0.platform, $0.environment) = (
                    "ada", String(repeating: "ab", count: 32), "ios", .production
                )
            }
        case .unregisterDevice: Pushrelay_V1_UnregisterDevice.with { $0.token = String(repeating: "ab", count: 32) }
        case .listDevices: Pushrelay_V1_ListDevices.with { $0.userID = "ada" }
        case .send: Pushrelay_V1_Send.with { ($0.notificationType, $0.userIds) = ("message", ["ada"]) }
        case .jobStatus: Pushrelay_V1_JobStatus.with { $0.jobID = "job" }
        case .queryDeliveries: Pushrelay_V1_QueryDeliveries.with { $0.jobID = "job" }
        case .cancelJob: Pushrelay_V1_CancelJob.with { $0.jobID = "job" }
        case .listNotificationTypes: Pushrelay_V1_ListNotificationTypes()
        case .setPreferences: Pushrelay_V1_SetPreferences.with { $0.userID = "ada" }
        case .getPreferences: Pushrelay_V1_GetPreferences.with { $0.userID = "ada" }
        case .setMute: Pushrelay_V1_SetMute.with { ($0.userID, $0.threadID) = ("ada", "thread") }
        case .clearMute: Pushrelay_V1_ClearMute.with { ($0.userID, $0.threadID) = ("ada", "thread") }
        case .listMutes: Pushrelay_V1_ListMutes.with { $0.userID = "ada" }
        case .setPresence:
            Pushrelay_V1_SetPresence.with { ($0.userID, $0.threadID, $0.seconds) = ("ada", "thread", 60) }
        case .subscribeResults: Pushrelay_V1_SubscribeResults.with { $0.receipts = true }
        case .unsubscribeResults: Pushrelay_V1_UnsubscribeResults.with { $0.subscriptionRequestID = 3 }
        }
    }

    /// The kind of `request`'s case and the message it carries.
    static func kindAndMessage(of request: Request) -> (RequestKind, any SwiftProtobuf.Message) {
        switch request {
        case .hello(let message): (.hello, message)
        case .ping(let message): (.ping, message)
        case .goodbye(let message): (.goodbye, message)
        case .registerDevice(let message): (.registerDevice, message)
        case .unregisterDevice(let message): (.unregisterDevice, message)
        case .listDevices(let message): (.listDevices, message)
        case .send(let message): (.send, message)
        case .jobStatus(let message): (.jobStatus, message)
        case .queryDeliveries(let message): (.queryDeliveries, message)
        case .cancelJob(let message): (.cancelJob, message)
        case .listNotificationTypes(let message): (.listNotificationTypes, message)
        case .setPreferences(let message): (.setPreferences, message)
        case .getPreferences(let message): (.getPreferences, message)
        case .setMute(let message): (.setMute, message)
        case .clearMute(let message): (.clearMute, message)
        case .listMutes(let message): (.listMutes, message)
        case .setPresence(let message): (.setPresence, message)
        case .subscribeResults(let message): (.subscribeResults, message)
        case .unsubscribeResults(let message): (.unsubscribeResults, message)
        }
    }

    /// A frame of `kind` carrying `message`.
    static func frame(_ kind: FrameKind, _ message: any SwiftProtobuf.Message) throws -> Frame {
        Frame(kind: kind, requestID: 1, body: ByteBuffer(bytes: try message.serializedBytes() as [UInt8]))
    }

    @Test func theTableHoldsEveryRequestKindOfTheProtoOnceWithItsWireValue() {
        let proto = Pushrelay_V1_FrameKind.allCases.map(\.rawValue).filter { (0x0001...0x3FFF).contains($0) }
        let table = RequestKind.allCases.map { Int($0.frameKind.rawValue) }
        #expect(Set(table).count == table.count, "two kinds of one number")
        #expect(Set(table) == Set(proto))
        #expect(table.count == proto.count)
        #expect(FrameKind.requests == RequestKind.allCases.map(\.frameKind))
        for kind in RequestKind.allCases {
            #expect(kind.frameKind.rawValue == Self.wireValues[kind], "\(kind)")
            #expect(kind.frameKind.isRequest, "\(kind)")
            #expect(RequestKind(kind.frameKind) == kind, "\(kind)")
        }
        #expect(FrameKind.resultEvent.rawValue == 0x4040 && FrameKind.error.rawValue == 0xFFFF)
        #expect(Set(RequestKind.allCases.map(\.name)).count == RequestKind.allCases.count)
    }

    @Test(arguments: RequestKind.allCases)
    func eachKindDecodesToItsOwnCaseNamedAfterItsMessage(_ kind: RequestKind) throws {
        let sent = Self.validMessage(of: kind)
        let request = try Request(
            try Self.frame(kind.frameKind, sent), limits: ProtocolLimits(), nowMilliseconds: Self.now)
        let (decodedKind, message) = Self.kindAndMessage(of: request)
        #expect(decodedKind == kind)
        #expect(message.isEqualTo(message: sent), "\(kind): \(message)")
        // The name is the message's, in snake_case: "register_device" carries pushrelay.v1.RegisterDevice.
        let camel = kind.name.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        #expect(type(of: message).protoMessageName == "pushrelay.v1." + camel)
    }

    @Test func aFrameOfAnyOtherKindIsRefusedUnknownKind() throws {
        let others: [UInt16] = [0x0000, 0x0004, 0x0013, 0x0042, 0x3FFF, 0x4000, 0x4040, 0x7FFF, 0xFFFE, 0xFFFF]
        for raw in others + RequestKind.allCases.map(\.frameKind.answer.rawValue) {
            let kind = FrameKind(rawValue: raw)
            #expect(RequestKind(kind) == nil, "\(kind)")
            let frame = try Self.frame(kind, Pushrelay_V1_Ping.with { $0.nonce = 1 })
            for refusal in [
                #expect(throws: ProtocolError.self) { try RequestKind(of: frame) },
                #expect(throws: ProtocolError.self) {
                    try Request(frame, limits: ProtocolLimits(), nowMilliseconds: Self.now)
                },
            ] {
                #expect(refusal?.code == .unknownKind, "\(kind)")
                #expect(refusal?.message == "kind \(kind) is not a request of protocol version 1")
                #expect(refusal?.field == "")
            }
        }
    }

    @Test func aKnownKindWithABadBodyIsRefusedForItsBodyNotItsKind() throws {
        let frame = Frame(kind: .send, requestID: 1, body: ByteBuffer(bytes: [0x0F, 0x00]))
        #expect(try RequestKind(of: frame) == .send)
        let refusal = #expect(throws: ProtocolError.self) {
            try Request(frame, limits: ProtocolLimits(), nowMilliseconds: Self.now)
        }
        #expect(refusal?.code == .invalidBody)
    }
}

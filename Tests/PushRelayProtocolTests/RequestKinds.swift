import NIOCore
import PushRelayProtocol
import SwiftProtobuf

/// A request message with the frame kind that carries it and the name its fields are reported under
/// (Protocol/README.md, "Requests and answers"; RequestValidation.swift's `FieldChecker` names).
protocol FramedRequest: ValidatedRequest {
    /// The kind of the frames that carry this message.
    static var frameKind: FrameKind { get }
    /// The request's snake_case name, the first part of every `field` its errors name.
    static var fieldName: String { get }
    /// How many fields the message declares (Protocol/pushrelay.proto): they are numbered from 1 on.
    static var fieldCount: Int { get }
}

extension FramedRequest {
    /// What the relay makes of this message sent as a frame of its kind: the frame is decoded and its fields
    /// checked with `Frame.request(limits:nowMilliseconds:)`.
    func verdict(limits: ProtocolLimits = ProtocolLimits(), nowMilliseconds: Int64) -> Verdict {
        let bytes: [UInt8] = (try? serializedBytes()) ?? []
        return Verdict(of: Self.self, body: bytes, limits: limits, nowMilliseconds: nowMilliseconds)
    }
}

/// The outcome of decoding and validating one request body.
enum Verdict: Equatable, CustomStringConvertible {
    case accepted
    case refused(Pushrelay_V1_ErrorCode, field: String)

    /// `INVALID_ARGUMENT` naming `field`.
    static func invalid(_ field: String) -> Verdict { .refused(.invalidArgument, field: field) }

    /// The verdict on `body` sent as a frame of `M`'s kind.
    init<M: FramedRequest>(of type: M.Type, body: [UInt8], limits: ProtocolLimits, nowMilliseconds: Int64) {
        let frame = Frame(kind: M.frameKind, requestID: 1, body: ByteBuffer(bytes: body))
        do {
            _ = try frame.request(M.self, limits: limits, nowMilliseconds: nowMilliseconds)
            self = .accepted
        } catch {
            self = .refused(error.code, field: error.field)
        }
    }

    var description: String {
        switch self {
        case .accepted: "accepted"
        case .refused(let code, let field): field.isEmpty ? code.name : "\(code.name) (\(field))"
        }
    }
}

extension Pushrelay_V1_Hello: FramedRequest {
    static var frameKind: FrameKind { .hello }
    static var fieldName: String { "hello" }
    static var fieldCount: Int { 6 }
}

extension Pushrelay_V1_Ping: FramedRequest {
    static var frameKind: FrameKind { .ping }
    static var fieldName: String { "ping" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_Goodbye: FramedRequest {
    static var frameKind: FrameKind { .goodbye }
    static var fieldName: String { "goodbye" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_RegisterDevice: FramedRequest {
    static var frameKind: FrameKind { .registerDevice }
    static var fieldName: String { "register_device" }
    static var fieldCount: Int { 10 }
}

extension Pushrelay_V1_UnregisterDevice: FramedRequest {
    static var frameKind: FrameKind { .unregisterDevice }
    static var fieldName: String { "unregister_device" }
    static var fieldCount: Int { 3 }
}

extension Pushrelay_V1_ListDevices: FramedRequest {
    static var frameKind: FrameKind { .listDevices }
    static var fieldName: String { "list_devices" }
    static var fieldCount: Int { 3 }
}

extension Pushrelay_V1_Send: FramedRequest {
    static var frameKind: FrameKind { .send }
    static var fieldName: String { "send" }
    static var fieldCount: Int { 24 }
}

extension Pushrelay_V1_JobStatus: FramedRequest {
    static var frameKind: FrameKind { .jobStatus }
    static var fieldName: String { "job_status" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_CancelJob: FramedRequest {
    static var frameKind: FrameKind { .cancelJob }
    static var fieldName: String { "cancel_job" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_ListNotificationTypes: FramedRequest {
    static var frameKind: FrameKind { .listNotificationTypes }
    static var fieldName: String { "list_notification_types" }
    static var fieldCount: Int { 0 }
}

extension Pushrelay_V1_QueryDeliveries: FramedRequest {
    static var frameKind: FrameKind { .queryDeliveries }
    static var fieldName: String { "query_deliveries" }
    static var fieldCount: Int { 7 }
}

extension Pushrelay_V1_SetPreferences: FramedRequest {
    static var frameKind: FrameKind { .setPreferences }
    static var fieldName: String { "set_preferences" }
    static var fieldCount: Int { 2 }
}

extension Pushrelay_V1_GetPreferences: FramedRequest {
    static var frameKind: FrameKind { .getPreferences }
    static var fieldName: String { "get_preferences" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_SetMute: FramedRequest {
    static var frameKind: FrameKind { .setMute }
    static var fieldName: String { "set_mute" }
    static var fieldCount: Int { 4 }
}

extension Pushrelay_V1_ClearMute: FramedRequest {
    static var frameKind: FrameKind { .clearMute }
    static var fieldName: String { "clear_mute" }
    static var fieldCount: Int { 3 }
}

extension Pushrelay_V1_ListMutes: FramedRequest {
    static var frameKind: FrameKind { .listMutes }
    static var fieldName: String { "list_mutes" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_SetPresence: FramedRequest {
    static var frameKind: FrameKind { .setPresence }
    static var fieldName: String { "set_presence" }
    static var fieldCount: Int { 3 }
}

extension Pushrelay_V1_SubscribeResults: FramedRequest {
    static var frameKind: FrameKind { .subscribeResults }
    static var fieldName: String { "subscribe_results" }
    static var fieldCount: Int { 1 }
}

extension Pushrelay_V1_UnsubscribeResults: FramedRequest {
    static var frameKind: FrameKind { .unsubscribeResults }
    static var fieldName: String { "unsubscribe_results" }
    static var fieldCount: Int { 1 }
}

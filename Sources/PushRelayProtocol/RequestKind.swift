/// A request kind of protocol version 1. This file is the one table of them: each kind's number, its name and its
/// message (Protocol/README.md, "Requests and answers").
///
/// The numbers are pushrelay.proto's `FrameKind`, so the Python client reads the same ones from its generated code.
/// Code that treats kinds one by one switches over ``RequestKind`` or ``Request`` with no `default`: a kind added
/// here does not build until every such switch handles it. A frame of any other kind is refused `UNKNOWN_KIND`, by
/// ``init(of:)`` alone.
public enum RequestKind: CaseIterable, Hashable, Sendable {
    /// HELLO, the handshake.
    case hello
    /// PING, answered PONG with its nonce.
    case ping
    /// GOODBYE: the sender closes once its in-flight requests are answered.
    case goodbye
    /// REGISTER_DEVICE.
    case registerDevice
    /// UNREGISTER_DEVICE.
    case unregisterDevice
    /// LIST_DEVICES.
    case listDevices
    /// SEND.
    case send
    /// JOB_STATUS.
    case jobStatus
    /// QUERY_DELIVERIES.
    case queryDeliveries
    /// CANCEL_JOB.
    case cancelJob
    /// LIST_NOTIFICATION_TYPES.
    case listNotificationTypes
    /// SET_PREFERENCES.
    case setPreferences
    /// GET_PREFERENCES.
    case getPreferences
    /// SET_MUTE.
    case setMute
    /// CLEAR_MUTE.
    case clearMute
    /// LIST_MUTES.
    case listMutes
    /// SET_PRESENCE.
    case setPresence
    /// SUBSCRIBE_RESULTS, which starts the results stream.
    case subscribeResults
    /// UNSUBSCRIBE_RESULTS, which stops it.
    case unsubscribeResults

    /// The table's row of this kind: its number in pushrelay.proto's `FrameKind` and its name. Its message is the one
    /// its ``Request`` case carries.
    private var row: (number: Pushrelay_V1_FrameKind, name: String) {
        switch self {
        case .hello: (.hello, "hello")
        case .ping: (.ping, "ping")
        case .goodbye: (.goodbye, "goodbye")
        case .registerDevice: (.registerDevice, "register_device")
        case .unregisterDevice: (.unregisterDevice, "unregister_device")
        case .listDevices: (.listDevices, "list_devices")
        case .send: (.send, "send")
        case .jobStatus: (.jobStatus, "job_status")
        case .queryDeliveries: (.queryDeliveries, "query_deliveries")
        case .cancelJob: (.cancelJob, "cancel_job")
        case .listNotificationTypes: (.listNotificationTypes, "list_notification_types")
        case .setPreferences: (.setPreferences, "set_preferences")
        case .getPreferences: (.getPreferences, "get_preferences")
        case .setMute: (.setMute, "set_mute")
        case .clearMute: (.clearMute, "clear_mute")
        case .listMutes: (.listMutes, "list_mutes")
        case .setPresence: (.setPresence, "set_presence")
        case .subscribeResults: (.subscribeResults, "subscribe_results")
        case .unsubscribeResults: (.unsubscribeResults, "unsubscribe_results")
        }
    }

    /// The kind as the frame header carries it.
    public var frameKind: FrameKind { FrameKind(row.number) }

    /// The request's snake_case name: the `method` of its metrics and logs, and the first part of every `field` its
    /// errors name (`send.alert.title`).
    public var name: String { row.name }

    /// The request kind whose frames carry `kind`; `nil` when it is none (an answer's, an event's, or a kind this
    /// version does not have).
    public init?(_ kind: FrameKind) {
        guard let found = Self.byFrameKind[kind] else { return nil }
        self = found
    }

    /// The request kind of `frame`, or `UNKNOWN_KIND`: the one place a frame's kind is refused.
    public init(of frame: Frame) throws(ProtocolError) {
        guard let kind = RequestKind(frame.kind) else {
            throw ProtocolError(.unknownKind, "kind \(frame.kind) is not a request of protocol version 1")
        }
        self = kind
    }

    /// Every kind by its frame kind. Two kinds of one number would stop the process at its first lookup.
    private static let byFrameKind = [FrameKind: RequestKind](uniqueKeysWithValues: allCases.map { ($0.frameKind, $0) })
}

/// A request as the relay acts on it: one case per ``RequestKind``, carrying that kind's message decoded from the
/// frame's body and checked against its field rules.
public enum Request: Sendable {
    /// HELLO.
    case hello(Pushrelay_V1_Hello)
    /// PING.
    case ping(Pushrelay_V1_Ping)
    /// GOODBYE.
    case goodbye(Pushrelay_V1_Goodbye)
    /// REGISTER_DEVICE.
    case registerDevice(Pushrelay_V1_RegisterDevice)
    /// UNREGISTER_DEVICE.
    case unregisterDevice(Pushrelay_V1_UnregisterDevice)
    /// LIST_DEVICES.
    case listDevices(Pushrelay_V1_ListDevices)
    /// SEND.
    case send(Pushrelay_V1_Send)
    /// JOB_STATUS.
    case jobStatus(Pushrelay_V1_JobStatus)
    /// QUERY_DELIVERIES.
    case queryDeliveries(Pushrelay_V1_QueryDeliveries)
    /// CANCEL_JOB.
    case cancelJob(Pushrelay_V1_CancelJob)
    /// LIST_NOTIFICATION_TYPES.
    case listNotificationTypes(Pushrelay_V1_ListNotificationTypes)
    /// SET_PREFERENCES.
    case setPreferences(Pushrelay_V1_SetPreferences)
    /// GET_PREFERENCES.
    case getPreferences(Pushrelay_V1_GetPreferences)
    /// SET_MUTE.
    case setMute(Pushrelay_V1_SetMute)
    /// CLEAR_MUTE.
    case clearMute(Pushrelay_V1_ClearMute)
    /// LIST_MUTES.
    case listMutes(Pushrelay_V1_ListMutes)
    /// SET_PRESENCE.
    case setPresence(Pushrelay_V1_SetPresence)
    /// SUBSCRIBE_RESULTS.
    case subscribeResults(Pushrelay_V1_SubscribeResults)
    /// UNSUBSCRIBE_RESULTS.
    case unsubscribeResults(Pushrelay_V1_UnsubscribeResults)

    /// The request `frame` carries: `UNKNOWN_KIND` when its kind is no request kind (``RequestKind/init(of:)``),
    /// else its body as ``Frame/request(_:limits:nowMilliseconds:)`` decodes and checks it (the first rule broken,
    /// or `INVALID_BODY`). `nowMilliseconds` is the relay's clock, for rules relative to it.
    public init(_ frame: Frame, limits: ProtocolLimits, nowMilliseconds: Int64) throws(ProtocolError) {
        func message<M: ValidatedRequest>() throws(ProtocolError) -> M {
            try frame.request(limits: limits, nowMilliseconds: nowMilliseconds)
        }
        switch try RequestKind(of: frame) {
        case .hello: self = .hello(try message())
        case .ping: self = .ping(try message())
        case .goodbye: self = .goodbye(try message())
        case .registerDevice: self = .registerDevice(try message())
        case .unregisterDevice: self = .unregisterDevice(try message())
        case .listDevices: self = .listDevices(try message())
        case .send: self = .send(try message())
        case .jobStatus: self = .jobStatus(try message())
        case .queryDeliveries: self = .queryDeliveries(try message())
        case .cancelJob: self = .cancelJob(try message())
        case .listNotificationTypes: self = .listNotificationTypes(try message())
        case .setPreferences: self = .setPreferences(try message())
        case .getPreferences: self = .getPreferences(try message())
        case .setMute: self = .setMute(try message())
        case .clearMute: self = .clearMute(try message())
        case .listMutes: self = .listMutes(try message())
        case .setPresence: self = .setPresence(try message())
        case .subscribeResults: self = .subscribeResults(try message())
        case .unsubscribeResults: self = .unsubscribeResults(try message())
        }
    }
}

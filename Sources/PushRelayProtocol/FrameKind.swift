/// The kind of a frame: which message its body is (Protocol/README.md, "Requests and answers").
///
/// Requests are `0x0001`-`0x3FFF`; the answer to request kind `K` is `K | 0x8000`; ``resultEvent`` is
/// a results-stream event and ``error`` an ERROR frame. The numbers are pushrelay.proto's `FrameKind`; the request
/// kinds are listed once, in ``RequestKind``. A value of this type may be any 16-bit kind, since a peer may send one
/// this version does not have.
public struct FrameKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kind as it travels in the header.
    public var rawValue: UInt16

    /// A kind from its wire value.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// A kind from its number in pushrelay.proto's `FrameKind`, where every kind's number is written.
    init(_ number: Pushrelay_V1_FrameKind) {
        self.init(rawValue: UInt16(number.rawValue))
    }

    /// HELLO, the handshake (`Hello`).
    public static let hello = FrameKind(.hello)
    /// PING (`Ping`).
    public static let ping = FrameKind(.ping)
    /// GOODBYE (`Goodbye`): the sender closes once its in-flight requests are answered.
    public static let goodbye = FrameKind(.goodbye)
    /// REGISTER_DEVICE (`RegisterDevice`).
    public static let registerDevice = FrameKind(.registerDevice)
    /// UNREGISTER_DEVICE (`UnregisterDevice`).
    public static let unregisterDevice = FrameKind(.unregisterDevice)
    /// LIST_DEVICES (`ListDevices`).
    public static let listDevices = FrameKind(.listDevices)
    /// SEND (`Send`).
    public static let send = FrameKind(.send)
    /// JOB_STATUS (`JobStatus`).
    public static let jobStatus = FrameKind(.jobStatus)
    /// CANCEL_JOB (`CancelJob`).
    public static let cancelJob = FrameKind(.cancelJob)
    /// QUERY_DELIVERIES (`QueryDeliveries`).
    public static let queryDeliveries = FrameKind(.queryDeliveries)
    /// LIST_NOTIFICATION_TYPES (`ListNotificationTypes`).
    public static let listNotificationTypes = FrameKind(.listNotificationTypes)
    /// SET_PREFERENCES (`SetPreferences`).
    public static let setPreferences = FrameKind(.setPreferences)
    /// GET_PREFERENCES (`GetPreferences`).
    public static let getPreferences = FrameKind(.getPreferences)
    /// SET_MUTE (`SetMute`).
    public static let setMute = FrameKind(.setMute)
    /// CLEAR_MUTE (`ClearMute`).
    public static let clearMute = FrameKind(.clearMute)
    /// LIST_MUTES (`ListMutes`).
    public static let listMutes = FrameKind(.listMutes)
    /// SET_PRESENCE (`SetPresence`).
    public static let setPresence = FrameKind(.setPresence)
    /// SUBSCRIBE_RESULTS (`SubscribeResults`).
    public static let subscribeResults = FrameKind(.subscribeResults)
    /// UNSUBSCRIBE_RESULTS (`UnsubscribeResults`).
    public static let unsubscribeResults = FrameKind(.unsubscribeResults)
    /// RESULT_EVENT (`ResultEvent`), sent by the relay with the subscription's request id.
    public static let resultEvent = FrameKind(.resultEvent)
    /// ERROR (`Error`), sent by the relay with the failed request's id.
    public static let error = FrameKind(.error)

    /// Every request kind a client may send in version 1, in the order of ``RequestKind``, their table.
    public static let requests: [FrameKind] = RequestKind.allCases.map(\.frameKind)

    /// Whether this is a request kind (`0x0001`-`0x3FFF`).
    public var isRequest: Bool { rawValue >= 0x0001 && rawValue <= 0x3FFF }

    /// The kind of the answer to this request kind.
    public var answer: FrameKind { FrameKind(rawValue: rawValue | 0x8000) }

    /// The kind as hex, `0x0020`.
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

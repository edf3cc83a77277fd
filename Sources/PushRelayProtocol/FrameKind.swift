/// The kind of a frame: which message its body is (Protocol/README.md, "Requests and answers").
///
/// Requests are `0x0001`-`0x3FFF`; the answer to request kind `K` is `K | 0x8000`; ``resultEvent`` is
/// a results-stream event and ``error`` an ERROR frame.
public struct FrameKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kind as it travels in the header.
    public var rawValue: UInt16

    /// A kind from its wire value.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// HELLO, the handshake (`Hello`).
    public static let hello = FrameKind(rawValue: 0x0001)
    /// PING (`Ping`).
    public static let ping = FrameKind(rawValue: 0x0002)
    /// GOODBYE (`Goodbye`): the sender closes once its in-flight requests are answered.
    public static let goodbye = FrameKind(rawValue: 0x0003)
    /// REGISTER_DEVICE (`RegisterDevice`).
    public static let registerDevice = FrameKind(rawValue: 0x0010)
    /// UNREGISTER_DEVICE (`UnregisterDevice`).
    public static let unregisterDevice = FrameKind(rawValue: 0x0011)
    /// LIST_DEVICES (`ListDevices`).
    public static let listDevices = FrameKind(rawValue: 0x0012)
    /// SEND (`Send`).
    public static let send = FrameKind(rawValue: 0x0020)
    /// JOB_STATUS (`JobStatus`).
    public static let jobStatus = FrameKind(rawValue: 0x0021)
    /// CANCEL_JOB (`CancelJob`).
    public static let cancelJob = FrameKind(rawValue: 0x0023)
    /// QUERY_DELIVERIES (`QueryDeliveries`).
    public static let queryDeliveries = FrameKind(rawValue: 0x0022)
    /// LIST_NOTIFICATION_TYPES (`ListNotificationTypes`).
    public static let listNotificationTypes = FrameKind(rawValue: 0x0024)
    /// SET_PREFERENCES (`SetPreferences`).
    public static let setPreferences = FrameKind(rawValue: 0x0030)
    /// GET_PREFERENCES (`GetPreferences`).
    public static let getPreferences = FrameKind(rawValue: 0x0031)
    /// SET_MUTE (`SetMute`).
    public static let setMute = FrameKind(rawValue: 0x0032)
    /// CLEAR_MUTE (`ClearMute`).
    public static let clearMute = FrameKind(rawValue: 0x0033)
    /// LIST_MUTES (`ListMutes`).
    public static let listMutes = FrameKind(rawValue: 0x0034)
    /// SET_PRESENCE (`SetPresence`).
    public static let setPresence = FrameKind(rawValue: 0x0035)
    /// SUBSCRIBE_RESULTS (`SubscribeResults`).
    public static let subscribeResults = FrameKind(rawValue: 0x0040)
    /// UNSUBSCRIBE_RESULTS (`UnsubscribeResults`).
    public static let unsubscribeResults = FrameKind(rawValue: 0x0041)
    /// RESULT_EVENT (`ResultEvent`), sent by the relay with the subscription's request id.
    public static let resultEvent = FrameKind(rawValue: 0x4040)
    /// ERROR (`Error`), sent by the relay with the failed request's id.
    public static let error = FrameKind(rawValue: 0xFFFF)

    /// Every request kind a client may send in version 1.
    public static let requests: [FrameKind] = [
        .hello, .ping, .goodbye, .registerDevice, .unregisterDevice, .listDevices, .send, .jobStatus,
        .cancelJob, .queryDeliveries, .listNotificationTypes, .setPreferences, .getPreferences, .setMute, .clearMute,
        .listMutes, .setPresence,
        .subscribeResults, .unsubscribeResults,
    ]

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

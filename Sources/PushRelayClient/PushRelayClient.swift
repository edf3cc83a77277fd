import Foundation
public import NIOCore
public import NIOPosix
import NIOSSL
public import PushRelayProtocol
import SwiftProtobuf

/// What a ``PushRelayClient`` call can fail with: a ``code`` to act on, the details the code has, and a sentence for
/// people.
///
/// A struct rather than an enum, in the manner of postgres-nio's `PSQLError`, so that a new code is not a breaking
/// change: compare ``code`` (`error.code == .connectionClosed`) instead of matching cases; the relay's own error is
/// ``relayError``.
public struct PushRelayClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case relay, connectionClosed, connectFailed, protocolViolation
        }

        let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The relay answered the request with an ERROR frame (``PushRelayClientError/relayError``).
        public static let relay = Code(.relay)
        /// The connection closed before the answer came; the request may or may not have taken effect.
        public static let connectionClosed = Code(.connectionClosed)
        /// The relay could not be reached or did not complete HELLO.
        public static let connectFailed = Code(.connectFailed)
        /// The relay sent something this client cannot read.
        public static let protocolViolation = Code(.protocolViolation)

        /// The code's name (`connectionClosed`).
        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// With ``Code/relay``: the error the relay's ERROR frame carried.
    public var relayError: ProtocolError?
    /// With ``Code/connectFailed`` and ``Code/protocolViolation``: why.
    public var reason: String?

    private init(_ code: Code, relayError: ProtocolError? = nil, reason: String? = nil) {
        self.code = code
        self.relayError = relayError
        self.reason = reason
    }

    /// The relay answered the request with an ERROR frame carrying `error`.
    public static func relay(_ error: ProtocolError) -> Self { Self(.relay, relayError: error) }
    /// The connection closed before the answer came; the request may or may not have taken effect.
    public static let connectionClosed = Self(.connectionClosed)
    /// The relay could not be reached or did not complete HELLO, for `reason`.
    public static func connectFailed(_ reason: String) -> Self { Self(.connectFailed, reason: reason) }
    /// The relay sent something this client cannot read, as `reason` says.
    public static func protocolViolation(_ reason: String) -> Self { Self(.protocolViolation, reason: reason) }

    /// The error for people.
    public var description: String {
        switch code.base {
        case .relay: "relay error \(relayError.map { "\($0)" } ?? "")"
        case .connectionClosed: "the connection to the relay closed before the answer"
        case .connectFailed: "cannot connect to the relay: \(reason ?? "")"
        case .protocolViolation: "protocol violation: \(reason ?? "")"
        }
    }
}

/// An async client of the pushrelay wire protocol: one connection, pipelined requests answered by request
/// id, reconnect with backoff, typed errors, optional TLS.
///
/// Every method sends one request and waits for its answer; calls from several tasks share the
/// connection and are in flight together.
public actor PushRelayClient {
    /// Where and how the client connects.
    public let configuration: PushRelayClientConfiguration
    private let group: any EventLoopGroup
    private var connection: ClientConnection?
    private var connecting: Task<ClientConnection, any Error>?
    private var nextRequestID: UInt32 = 0
    /// Limits the relay announced in its last HELLO_OK.
    public private(set) var serverLimits: Pushrelay_V1_HelloOk?

    /// A client for `configuration`; it connects on first use or with ``connect()``.
    public init(
        configuration: PushRelayClientConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.group = group
    }

    /// Connects and completes HELLO now (otherwise the first request does).
    public func connect() async throws(PushRelayClientError) {
        _ = try await liveConnection()
    }

    /// Says GOODBYE, waits for in-flight answers, and closes the connection.
    public func close() async {
        connecting?.cancel()
        connecting = nil
        guard let connection else { return }
        self.connection = nil
        await connection.goodbye(requestID: takeRequestID(on: connection))
    }

    // MARK: Methods

    /// Registers a device token under the tenant's token policy.
    public func registerDevice(_ request: Pushrelay_V1_RegisterDevice) async throws(PushRelayClientError)
        -> Pushrelay_V1_RegisterDeviceResult
    {
        try await call(.registerDevice, request)
    }

    /// Removes a device by token, or by user id and platform.
    public func unregisterDevice(_ request: Pushrelay_V1_UnregisterDevice) async throws(PushRelayClientError)
        -> Pushrelay_V1_UnregisterDeviceResult
    {
        try await call(.unregisterDevice, request)
    }

    /// A page of a user's devices, at most `limit` (0: 100), after `cursor` (the `nextCursor` of the page before).
    public func listDevices(
        userID: String, limit: UInt32 = 0, cursor: String = ""
    ) async throws(PushRelayClientError) -> Pushrelay_V1_DeviceList {
        var request = Pushrelay_V1_ListDevices()
        request.userID = userID
        request.limit = limit
        request.cursor = cursor
        return try await call(.listDevices, request)
    }

    /// Sends a notification; answers the job at once, or every device's outcome when `request.wait` is set.
    public func send(_ request: Pushrelay_V1_Send) async throws(PushRelayClientError) -> Pushrelay_V1_SendResult {
        try await call(.send, request)
    }

    /// A job's state and counts.
    public func jobStatus(jobID: String) async throws(PushRelayClientError) -> Pushrelay_V1_Job {
        var request = Pushrelay_V1_JobStatus()
        request.jobID = jobID
        return try await call(.jobStatus, request)
    }

    /// Cancels a job: nothing more of it is sent (pages being sent finish).
    public func cancelJob(jobID: String) async throws(PushRelayClientError) -> Pushrelay_V1_Job {
        var request = Pushrelay_V1_CancelJob()
        request.jobID = jobID
        return try await call(.cancelJob, request)
    }

    /// Recorded APNs attempts by job, user, token or time range.
    public func queryDeliveries(_ request: Pushrelay_V1_QueryDeliveries) async throws(PushRelayClientError)
        -> Pushrelay_V1_DeliveryList
    {
        try await call(.queryDeliveries, request)
    }

    /// The notification types of the connection's tenant, as its tenant file declares them.
    public func notificationTypes() async throws(PushRelayClientError) -> Pushrelay_V1_NotificationTypeList {
        try await call(.listNotificationTypes, Pushrelay_V1_ListNotificationTypes())
    }

    /// Sets a user's opt-outs per notification type; answers every type's effective setting.
    public func setPreferences(_ request: Pushrelay_V1_SetPreferences) async throws(PushRelayClientError)
        -> Pushrelay_V1_Preferences
    {
        try await call(.setPreferences, request)
    }

    /// Every notification type with the user's effective setting.
    public func preferences(userID: String) async throws(PushRelayClientError) -> Pushrelay_V1_Preferences {
        var request = Pushrelay_V1_GetPreferences()
        request.userID = userID
        return try await call(.getPreferences, request)
    }

    /// Mutes a thread or a scope for a user.
    public func setMute(_ request: Pushrelay_V1_SetMute) async throws(PushRelayClientError) -> Pushrelay_V1_Mute {
        try await call(.setMute, request)
    }

    /// Lifts a mute.
    public func clearMute(_ request: Pushrelay_V1_ClearMute) async throws(PushRelayClientError)
        -> Pushrelay_V1_ClearMuteResult
    {
        try await call(.clearMute, request)
    }

    /// A user's mutes in force.
    public func mutes(userID: String) async throws(PushRelayClientError) -> Pushrelay_V1_MuteList {
        var request = Pushrelay_V1_ListMutes()
        request.userID = userID
        return try await call(.listMutes, request)
    }

    /// Marks a user active in a thread for `seconds` (0 clears it).
    public func setPresence(userID: String, threadID: String, seconds: UInt32) async throws(PushRelayClientError)
        -> Pushrelay_V1_Presence
    {
        var request = Pushrelay_V1_SetPresence()
        request.userID = userID
        request.threadID = threadID
        request.seconds = seconds
        return try await call(.setPresence, request)
    }

    /// Round trip to the relay; returns the echoed nonce.
    public func ping(nonce: UInt64 = 0) async throws(PushRelayClientError) -> UInt64 {
        var request = Pushrelay_V1_Ping()
        request.nonce = nonce
        let pong: Pushrelay_V1_Pong = try await call(.ping, request)
        return pong.nonce
    }

    /// Starts the tenant's results stream on this connection: dead tokens, and receipts when asked.
    /// The stream ends when the connection closes.
    public func subscribeResults(receipts: Bool) async throws(PushRelayClientError)
        -> AsyncStream<Pushrelay_V1_ResultEvent>
    {
        var request = Pushrelay_V1_SubscribeResults()
        request.receipts = receipts
        let connection = try await liveConnection()
        let id = takeRequestID(on: connection)
        let (stream, continuation) = AsyncStream.makeStream(
            of: Pushrelay_V1_ResultEvent.self, bufferingPolicy: .bufferingNewest(10_000)
        )
        let frame = try await connection.request(
            kind: .subscribeResults, requestID: id, body: try Self.serialize(request), events: continuation
        )
        _ = try Self.decode(frame, expecting: FrameKind.subscribeResults.answer) as Pushrelay_V1_Subscribed
        return stream
    }

    // MARK: Plumbing

    private func call<Answer: SwiftProtobuf.Message>(
        _ kind: FrameKind,
        _ request: some SwiftProtobuf.Message
    ) async throws(PushRelayClientError) -> Answer {
        let body = try Self.serialize(request)
        let connection = try await liveConnection()
        let frame = try await connection.request(
            kind: kind, requestID: takeRequestID(on: connection), body: body, events: nil)
        return try Self.decode(frame, expecting: kind.answer)
    }

    private static func serialize(_ message: some SwiftProtobuf.Message) throws(PushRelayClientError) -> [UInt8] {
        do {
            return try message.serializedBytes()
        } catch {
            throw .protocolViolation("the request cannot be encoded: \(error)")
        }
    }

    private static func decode<Answer: SwiftProtobuf.Message>(
        _ frame: Frame,
        expecting kind: FrameKind
    ) throws(PushRelayClientError) -> Answer {
        if frame.kind == .error {
            let error: Pushrelay_V1_Error
            do {
                error = try frame.decode()
            } catch {
                throw .protocolViolation("an unreadable ERROR frame: \(error)")
            }
            throw .relay(ProtocolError(error))
        }
        guard frame.kind == kind else {
            throw .protocolViolation("expected kind \(kind), got \(frame.kind)")
        }
        do {
            return try frame.decode()
        } catch {
            throw .protocolViolation("\(error)")
        }
    }

    /// The next request id (never 0; the counter wraps) that `connection` does not hold: an id still waiting for
    /// its answer or kept by a live subscription is skipped.
    private func takeRequestID(on connection: ClientConnection) -> UInt32 {
        repeat {
            nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1
        } while connection.holds(nextRequestID)
        return nextRequestID
    }

    /// The open connection, connecting (with backoff when reconnecting is on) when there is none.
    private func liveConnection() async throws(PushRelayClientError) -> ClientConnection {
        if let connection, connection.isOpen { return connection }
        connection = nil
        if connecting == nil {
            let configuration = self.configuration
            let group = self.group
            connecting = Task { try await Self.connectWithBackoff(configuration: configuration, group: group) }
        }
        do {
            let connection = try await connecting!.value
            connecting = nil
            self.connection = connection
            serverLimits = connection.helloOK
            return connection
        } catch let error as PushRelayClientError {
            connecting = nil
            throw error
        } catch {
            connecting = nil
            throw .connectFailed("\(error)")
        }
    }

    private static func connectWithBackoff(
        configuration: PushRelayClientConfiguration,
        group: any EventLoopGroup
    ) async throws -> ClientConnection {
        var delay = configuration.initialBackoff
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await ClientConnection.open(configuration: configuration, group: group)
            } catch let error as PushRelayClientError where error.code == .relay {
                // A refused HELLO (wrong credential, version) does not get better by retrying.
                throw error
            } catch {
                guard configuration.reconnect, attempt < 6 else { throw error }
                let jittered = delay * Double.random(in: 0.5...1.0)
                try await Task.sleep(for: .milliseconds(Int(jittered * 1000)))
                delay = min(delay * 2, configuration.maximumBackoff)
            }
        }
    }
}

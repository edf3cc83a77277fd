public import APNs
public import Foundation

/// Counters of everything a simulator saw and did since it started (or since ``APNsSimulator/reset()``).
public struct APNsSimulatorStatistics: Sendable {
    /// Requests whose body was completely received (refused streams are not requests).
    public var requestsReceived = 0
    /// Responses sent, by HTTP status.
    public var responsesByStatus: [Int: Int] = [:]
    /// Error responses sent, by reason.
    public var responsesByReason: [APNsReason: Int] = [:]
    /// Payloads that were not a JSON object (answered 400 PayloadEmpty, see ``APNsSimulator``).
    public var invalidJSONPayloads = 0
    /// TCP connections accepted.
    public var connectionsAccepted = 0
    /// Per connection id, the distinct valid provider tokens presented, in order, with when each was
    /// first presented. Two entries less than 20 minutes apart mean the client rotated too fast.
    public var tokensByConnection: [Int: [APNsSimulatorTokenSighting]] = [:]
    /// GOAWAY frames sent.
    public var goawaysSent = 0
    /// Streams reset with REFUSED_STREAM.
    public var streamsRefused = 0
    /// Streams a client opened beyond the SETTINGS_MAX_CONCURRENT_STREAMS the simulator announced (each reset):
    /// a client that keeps within the peer's limit never opens one.
    public var streamsOverLimit = 0
    /// Connections closed abruptly by the `dropConnectionAfter` fault.
    public var connectionsDropped = 0
    /// Connections stalled by the `stallAfter` fault.
    public var connectionsStalled = 0

    /// No counts.
    public init() {}

    /// Number of responses with this status.
    public func responses(status: Int) -> Int { responsesByStatus[status, default: 0] }

    /// Number of error responses with this reason.
    public func responses(reason: APNsReason) -> Int { responsesByReason[reason, default: 0] }
}

/// A provider token as first presented on one connection.
public struct APNsSimulatorTokenSighting: Sendable, Hashable {
    /// The JWT.
    public var token: String
    /// Its `kid`.
    public var keyID: String
    /// Its `iat`, in seconds since 1970.
    public var issuedAt: Int64
    /// When the connection first saw it, by the simulator's clock.
    public var firstSeen: Date

    /// A sighting with these parts.
    public init(token: String, keyID: String, issuedAt: Int64, firstSeen: Date) {
        self.token = token
        self.keyID = keyID
        self.issuedAt = issuedAt
        self.firstSeen = firstSeen
    }
}

/// One request as the simulator received and answered it (kept when
/// ``APNsSimulatorConfiguration/recordRequests`` is set).
public struct APNsSimulatorRequest: Sendable {
    /// The connection's id (1 for the first connection accepted).
    public var connectionID: Int
    /// The HTTP/2 stream id.
    public var streamID: Int
    /// `:method`.
    public var method: String
    /// `:path`.
    public var path: String
    /// The device token from the path, when the path has one.
    public var deviceToken: String?
    /// Every header of the request, pseudo-headers included, in order.
    public var headers: [(name: String, value: String)]
    /// The provider token's `kid`, when a token was verified.
    public var keyID: String?
    /// The provider token's `iss`, when a token was verified.
    public var issuer: String?
    /// The provider token's `iat` (seconds since 1970), when a token was verified.
    public var issuedAt: Int64?
    /// The topic (UID) of the client certificate the connection authenticated with, if it did.
    public var certificateTopic: String?
    /// The body.
    public var payload: [UInt8]
    /// The `apns-id` the response carried.
    public var apnsID: String
    /// The status answered.
    public var status: Int
    /// The reason answered (nil for 200).
    public var reason: APNsReason?
    /// When the request was complete, by the simulator's clock.
    public var receivedAt: Date

    /// The first value of the header `name` (lower case), if present.
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

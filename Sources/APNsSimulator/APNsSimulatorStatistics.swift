package import APNs
package import Foundation

/// Counters of everything a simulator saw and did since it started (or since ``APNsSimulator/reset()``).
package struct APNsSimulatorStatistics: Sendable {
    /// Requests whose body was completely received (refused streams are not requests).
    package var requestsReceived = 0
    /// Responses sent, by HTTP status.
    package var responsesByStatus: [Int: Int] = [:]
    /// Error responses sent, by reason.
    package var responsesByReason: [APNsReason: Int] = [:]
    /// Payloads that were not a JSON object (answered 400 PayloadEmpty, see ``APNsSimulator``).
    package var invalidJSONPayloads = 0
    /// TCP connections accepted.
    package var connectionsAccepted = 0
    /// Per connection id, the distinct valid provider tokens presented, in order, with when each was
    /// first presented. Two entries less than 20 minutes apart mean the client rotated too fast.
    package var tokensByConnection: [Int: [APNsSimulatorTokenSighting]] = [:]
    /// GOAWAY frames sent.
    package var goawaysSent = 0
    /// Streams reset with REFUSED_STREAM.
    package var streamsRefused = 0
    /// Streams a client opened beyond the SETTINGS_MAX_CONCURRENT_STREAMS the simulator announced (each reset):
    /// a client that keeps within the peer's limit never opens one.
    package var streamsOverLimit = 0
    /// Connections closed abruptly by the `dropConnectionAfter` fault.
    package var connectionsDropped = 0
    /// Connections stalled by the `stallAfter` fault.
    package var connectionsStalled = 0

    /// No counts.
    package init() {}

    /// Number of responses with this status.
    package func responses(status: Int) -> Int { responsesByStatus[status, default: 0] }

    /// Number of error responses with this reason.
    package func responses(reason: APNsReason) -> Int { responsesByReason[reason, default: 0] }
}

/// A provider token as first presented on one connection.
package struct APNsSimulatorTokenSighting: Sendable, Hashable {
    /// The JWT.
    package var token: String
    /// Its `kid`.
    package var keyID: String
    /// Its `iat`, in seconds since 1970.
    package var issuedAt: Int64
    /// When the connection first saw it, by the simulator's clock.
    package var firstSeen: Date

    /// A sighting with these parts.
    package init(token: String, keyID: String, issuedAt: Int64, firstSeen: Date) {
        self.token = token
        self.keyID = keyID
        self.issuedAt = issuedAt
        self.firstSeen = firstSeen
    }
}

/// One request as the simulator received and answered it (kept when
/// ``APNsSimulatorConfiguration/recordRequests`` is set).
package struct APNsSimulatorRequest: Sendable {
    /// The connection's id (1 for the first connection accepted).
    package var connectionID: Int
    /// The HTTP/2 stream id.
    package var streamID: Int
    /// `:method`.
    package var method: String
    /// `:path`.
    package var path: String
    /// The device token from the path, when the path has one.
    package var deviceToken: String?
    /// Every header of the request, pseudo-headers included, in order.
    package var headers: [(name: String, value: String)]
    /// The provider token's `kid`, when a token was verified.
    package var keyID: String?
    /// The provider token's `iss`, when a token was verified.
    package var issuer: String?
    /// The provider token's `iat` (seconds since 1970), when a token was verified.
    package var issuedAt: Int64?
    /// The topic (UID) of the client certificate the connection authenticated with, if it did.
    package var certificateTopic: String?
    /// The body.
    package var payload: [UInt8]
    /// The `apns-id` the response carried.
    package var apnsID: String
    /// The status answered.
    package var status: Int
    /// The reason answered (nil for 200).
    package var reason: APNsReason?
    /// When the request was complete, by the simulator's clock.
    package var receivedAt: Date

    /// The first value of the header `name` (lower case), if present.
    package func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

package import Foundation

/// Counters of everything a simulator saw and did since it started (or since ``FCMSimulator/reset()``).
package struct FCMSimulatorStatistics: Sendable {
    /// TCP connections accepted.
    package var connectionsAccepted = 0
    /// Requests whose body was completely received (token requests included).
    package var requestsReceived = 0
    /// Answers decided, by HTTP status.
    package var responsesByStatus: [Int: Int] = [:]
    /// Error answers decided, by FCM error code (Google's status when there is no FcmError detail, the OAuth error
    /// of the token endpoint).
    package var responsesByErrorCode: [String: Int] = [:]
    /// Access tokens issued, by the account's `client_email`: a relay fetches one per account and lifetime, never
    /// one per message.
    package var accessTokensIssued: [String: Int] = [:]
    /// Messages FCM took (200, `validate_only` ones excluded), by project.
    package var messagesSent: [String: Int] = [:]
    /// GOAWAY frames sent by the `goawayAfter` fault.
    package var goawaysSent = 0
    /// Connections closed abruptly by the `dropConnectionAfter` fault.
    package var connectionsDropped = 0
    /// Streams a client opened beyond the SETTINGS_MAX_CONCURRENT_STREAMS the simulator announced (each reset).
    package var streamsOverLimit = 0

    /// No counts.
    package init() {}

    /// Number of answers with this status.
    package func responses(status: Int) -> Int { responsesByStatus[status, default: 0] }

    /// Number of error answers with this code.
    package func responses(errorCode: String) -> Int { responsesByErrorCode[errorCode, default: 0] }

    /// Access tokens issued to the account `clientEmail`.
    package func accessTokens(issuedTo clientEmail: String) -> Int { accessTokensIssued[clientEmail, default: 0] }

    /// Access tokens issued, all accounts together.
    package var accessTokensIssuedInAll: Int { accessTokensIssued.values.reduce(0, +) }
}

/// One `messages:send` request as the simulator received and answered it: the raw `message` object, what the
/// simulator read from it for the tests' assertions, and the answer.
package struct FCMSimulatorMessage: Sendable {
    /// The notification's visible part (`message.notification`).
    package struct Notification: Sendable, Hashable {
        /// `title`.
        package var title: String?
        /// `body`.
        package var body: String?
        /// `image`.
        package var image: String?

        /// A notification with these texts, to compare a received one with.
        package init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    /// Android's options (`message.android`), as written.
    package struct Android: Sendable, Hashable {
        /// `priority`: `NORMAL` or `HIGH`.
        package var priority: String?
        /// `ttl`: a duration such as `"3600s"`.
        package var ttl: String?
        /// `collapse_key`.
        package var collapseKey: String?
        /// `notification.channel_id`.
        package var channelID: String?
        /// `notification.tag`.
        package var tag: String?
        /// `notification.click_action`.
        package var clickAction: String?

        /// Android options with these values, to compare received ones with.
        package init(
            priority: String? = nil, ttl: String? = nil, collapseKey: String? = nil, channelID: String? = nil,
            tag: String? = nil, clickAction: String? = nil
        ) {
            self.priority = priority
            self.ttl = ttl
            self.collapseKey = collapseKey
            self.channelID = channelID
            self.tag = tag
            self.clickAction = clickAction
        }
    }

    /// The connection's id (1 for the first connection accepted).
    package var connectionID: Int
    /// The `{project}` of the path.
    package var projectID: String
    /// The `client_email` of the account whose access token authorized the request.
    package var clientEmail: String
    /// When the request was complete, by the simulator's clock.
    package var receivedAt: Date
    /// The bytes of the `message` object as received (empty when the body had none, or was not JSON).
    package var messageJSON: [UInt8] = []
    /// `validate_only`.
    package var validateOnly = false
    /// `message.token`.
    package var token: String?
    /// `message.topic`.
    package var topic: String?
    /// `message.condition`.
    package var condition: String?
    /// `message.data` (its string values; a message with another value is refused).
    package var data: [String: String] = [:]
    /// `message.notification`.
    package var notification: Notification?
    /// `message.android`.
    package var android: Android?
    /// `message.apns.headers`.
    package var apnsHeaders: [String: String] = [:]
    /// The status answered.
    package var status = 200
    /// The FCM error code answered (Google's status when there is no FcmError detail); nil for 200.
    package var errorCode: String?
    /// The message's name answered with 200: `projects/{project}/messages/{id}`.
    package var name: String?

    /// A request of `projectID`, authorized by `clientEmail`, received on `connectionID` at `receivedAt`; the
    /// validator fills in the rest.
    package init(connectionID: Int, projectID: String, clientEmail: String, receivedAt: Date) {
        self.connectionID = connectionID
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.receivedAt = receivedAt
    }
}

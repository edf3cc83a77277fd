public import APNs

/// Everything an ``FCMPool`` needs: the service account it sends as, where FCM is, and the engine's settings for
/// `messages:send`.
public struct FCMPoolConfiguration: Sendable {
    /// Google's FCM endpoint.
    public static let googleEndpoint = APNsEndpoint(host: "fcm.googleapis.com", port: 443)
    /// How many streams a connection carries at most: Google's front ends commonly announce 100.
    public static let streamsPerConnection = 100
    /// How many connections a pool may open under load: at 100 streams each and a round trip of 200 ms, 64
    /// connections carry 32,000 messages a second, above a project's default quota (600,000 a minute).
    public static let maximumConnections = 64

    /// FCM's default quota of messages a minute per project.
    public static let defaultMessagesPerMinute = 600_000

    /// The account whose project the messages go to, and whose access tokens they carry.
    public var account: FCMServiceAccount
    /// The engine's settings for `messages:send`: the endpoint (``googleEndpoint``), a CA file to trust instead
    /// of the system's (trusted for the account's `token_uri` too), the pool's floor and cap of connections,
    /// deadlines and retries. Its credential is ``APNs/APNsCredential/none``: each request carries its token.
    public var messages: APNsPoolConfiguration
    /// Messages a minute the pool sends to the project at most (``ProjectQuota``): FCM's default quota unless
    /// the project was granted more.
    public var messagesPerMinute = Self.defaultMessagesPerMinute

    /// A configuration for `account` sending to `endpoint`, trusting `caFile` when given, with the engine's
    /// defaults but for 100 streams a connection, up to 64 connections, and bodies of up to 16 KiB.
    public init(account: FCMServiceAccount, endpoint: APNsEndpoint = Self.googleEndpoint, caFile: String? = nil) {
        self.account = account
        var messages = APNsPoolConfiguration(endpoint: endpoint, credential: .none, caFile: caFile)
        messages.maximumStreamsPerConnection = Self.streamsPerConnection
        messages.maximumConnections = Self.maximumConnections
        messages.largestBody = HTTP2Request.maximumBodySize
        self.messages = messages
    }
}

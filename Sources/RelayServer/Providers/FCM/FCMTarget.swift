package import APNs
package import FCM

/// Where the relay's FCM pools connect and how large they are.
package struct FCMTarget: Sendable {
    /// FCM's host and port: Google's (`fcm.googleapis.com:443`) unless set (the simulator, a proxy).
    package var endpoint: APNsEndpoint
    /// A CA file to trust instead of the system's, for FCM and for the accounts' token endpoints (the
    /// simulator's CA).
    package var caFile: String?
    /// HTTP/2 connections each pool keeps open however idle (its floor).
    package var connectionsPerPool: Int
    /// HTTP/2 connections each pool may open under load (its cap).
    package var maximumConnectionsPerPool: Int
    /// Messages a project may be sent a minute: FCM's default quota.
    package var messagesPerMinute: Int
    /// Service accounts used for tenants that have no stored one, by tenant id (the simulator's, made by
    /// `serve --apns-simulator`).
    package var fallbackAccounts: [String: FCMServiceAccount]

    /// A target; the defaults are Google's endpoint, pools of two to 64 connections and FCM's default quota.
    package init(
        endpoint: APNsEndpoint = FCMPoolConfiguration.googleEndpoint,
        caFile: String? = nil,
        connectionsPerPool: Int = 2,
        maximumConnectionsPerPool: Int = FCMPoolConfiguration.maximumConnections,
        messagesPerMinute: Int = FCMPoolConfiguration.defaultMessagesPerMinute,
        fallbackAccounts: [String: FCMServiceAccount] = [:]
    ) {
        self.endpoint = endpoint
        self.caFile = caFile
        self.connectionsPerPool = connectionsPerPool
        self.maximumConnectionsPerPool = maximumConnectionsPerPool
        self.messagesPerMinute = messagesPerMinute
        self.fallbackAccounts = fallbackAccounts
    }
}

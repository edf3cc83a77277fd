package import APNs

/// Where the relay's APNs pools connect and how large they are.
package struct APNsTarget: Sendable {
    /// One endpoint for every environment (the simulator), or `nil` for Apple's endpoints.
    package var endpointOverride: APNsEndpoint?
    /// A CA file to trust instead of the system's (the simulator's CA).
    package var caFile: String?
    /// HTTP/2 connections each pool keeps open however idle (its floor).
    package var connectionsPerPool: Int
    /// HTTP/2 connections each pool may open while its streams stay near APNs' limit (its cap; below
    /// ``connectionsPerPool``, pools of a fixed size).
    package var maximumConnectionsPerPool: Int
    /// Signing keys used for tenants that have no stored key for an environment, by tenant id
    /// (the ephemeral keys `serve --apns-simulator` makes).
    package var fallbackKeys: [String: APNsSigningKey]

    /// A target; the defaults are Apple's endpoints with pools of two to sixteen connections.
    package init(
        endpointOverride: APNsEndpoint? = nil,
        caFile: String? = nil,
        connectionsPerPool: Int = 2,
        maximumConnectionsPerPool: Int = 16,
        fallbackKeys: [String: APNsSigningKey] = [:]
    ) {
        self.endpointOverride = endpointOverride
        self.caFile = caFile
        self.connectionsPerPool = connectionsPerPool
        self.maximumConnectionsPerPool = maximumConnectionsPerPool
        self.fallbackKeys = fallbackKeys
    }

    /// The endpoint a pool for `environment` connects to.
    package func endpoint(for environment: APNsEnvironment) -> APNsEndpoint {
        endpointOverride ?? .apple(environment)
    }
}

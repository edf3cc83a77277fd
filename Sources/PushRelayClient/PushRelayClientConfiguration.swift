public import NIOSSL

/// Where and how a ``PushRelayClient`` connects.
public struct PushRelayClientConfiguration: Sendable {
    /// The relay's host name or address.
    public var host: String
    /// The relay's TCP port.
    public var port: Int
    /// The tenant the client acts for.
    public var tenant: String
    /// The tenant's credential secret (`prk_…`).
    public var credential: String
    /// A name for the relay's logs.
    public var clientName: String
    /// TLS settings when the relay listens with TLS; `nil` for plain TCP.
    public var tls: TLSConfiguration?
    /// The server name checked against the relay's certificate (defaults to `host`).
    public var tlsServerName: String?
    /// Whether to reconnect (with backoff) when the connection drops between requests.
    public var reconnect: Bool
    /// First delay before a reconnect attempt, in seconds; doubles up to ``maximumBackoff``.
    public var initialBackoff: Double
    /// Largest delay between reconnect attempts, in seconds.
    public var maximumBackoff: Double
    /// Seconds to wait for the TCP connection and HELLO_OK.
    public var connectTimeout: Double

    /// A configuration for `tenant` at `host:port`.
    public init(
        host: String,
        port: Int,
        tenant: String,
        credential: String,
        clientName: String = "pushrelay-swift",
        tls: TLSConfiguration? = nil,
        tlsServerName: String? = nil,
        reconnect: Bool = true,
        initialBackoff: Double = 0.5,
        maximumBackoff: Double = 30,
        connectTimeout: Double = 10
    ) {
        self.host = host
        self.port = port
        self.tenant = tenant
        self.credential = credential
        self.clientName = clientName
        self.tls = tls
        self.tlsServerName = tlsServerName
        self.reconnect = reconnect
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.connectTimeout = connectTimeout
    }
}

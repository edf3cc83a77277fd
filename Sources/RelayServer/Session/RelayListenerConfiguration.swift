package import NIOSSL
package import PushRelayProtocol

/// How a ``RelayListener`` listens and what it holds connections to.
package struct RelayListenerConfiguration: Sendable {
    /// The address to listen on.
    package var host: String
    /// The TCP port; 0 picks a free one.
    package var port: Int
    /// TLS for the listener; `nil` for plain TCP.
    package var tls: TLSConfiguration?
    /// The limits every connection is held to.
    package var limits: ProtocolLimits
    /// Time a new connection has to complete HELLO.
    package var helloTimeout: Duration
    /// Time without a client frame after which the relay says GOODBYE and closes; `nil` never.
    package var idleTimeout: Duration?
    /// Time a connection's answers may wait for a peer that does not read them (the socket not writable)
    /// before the connection is closed.
    package var writeStallTimeout: Duration
    /// Time a graceful close waits for in-flight requests before closing anyway.
    package var closeGracePeriod: Duration
    /// Answers at least this large are compressed for clients that accept zstd.
    package var compressionThreshold: Int
    /// Connections the listener holds at most, before HELLO or after; one more is refused at once
    /// (`TOO_MANY_CONNECTIONS` on a plain TCP listener, closed before the TLS handshake on a TLS one).
    package var maximumConnections: Int
    /// Authenticated connections one tenant may hold on this relay; one more HELLO is refused
    /// `TOO_MANY_CONNECTIONS`.
    package var maximumConnectionsPerTenant: Int
    /// Bytes of request bodies, after decompression, that one connection's in-flight requests may hold; a request
    /// that does not fit waits, the socket not read, until answers give some back (one request is always taken).
    package var maximumInflightBytesPerConnection: Int
    /// Bytes of request bodies, after decompression, that the in-flight requests of all connections may hold
    /// (``InflatedBytesBudget``; each connection may hold ``ConnectionBounds/assuredInflightBytes`` beyond it).
    package var maximumInflightBytes: Int

    /// A configuration with the documented defaults.
    package init(
        host: String = "127.0.0.1",
        port: Int = 7411,
        tls: TLSConfiguration? = nil,
        limits: ProtocolLimits = ProtocolLimits(),
        helloTimeout: Duration = .seconds(10),
        idleTimeout: Duration? = .seconds(300),
        writeStallTimeout: Duration = .seconds(30),
        closeGracePeriod: Duration = .seconds(30),
        compressionThreshold: Int = 8_192,
        maximumConnections: Int = 4_096,
        maximumConnectionsPerTenant: Int = 1_024,
        maximumInflightBytesPerConnection: Int = 16 << 20,
        maximumInflightBytes: Int = 256 << 20
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.limits = limits
        self.helloTimeout = helloTimeout
        self.idleTimeout = idleTimeout
        self.writeStallTimeout = writeStallTimeout
        self.closeGracePeriod = closeGracePeriod
        self.compressionThreshold = compressionThreshold
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerTenant = maximumConnectionsPerTenant
        self.maximumInflightBytesPerConnection = maximumInflightBytesPerConnection
        self.maximumInflightBytes = maximumInflightBytes
    }
}

public import NIOCore
public import NIOSSL

/// How a pool proves who it is to APNs.
public enum APNsCredential: Sendable {
    /// Token-based authentication: each connection signs its own ES256 provider token with this key.
    case token(APNsSigningKey)
    /// No credential of the pool's own: each request carries its `authorization` header (a pool of
    /// ``HTTP2Request``s, such as FCM's with its OAuth 2.0 access tokens).
    case none
    /// Certificate-based authentication: a TLS client certificate Apple issued for the app's topic.
    case certificate(chain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey)

    /// A certificate credential from PEM files (the certificate chain, and its private key).
    public static func certificate(certificateFile: String, keyFile: String) throws -> APNsCredential {
        .certificate(
            chain: try NIOSSLCertificate.fromPEMFile(certificateFile),
            privateKey: try NIOSSLPrivateKey(file: keyFile, format: .pem)
        )
    }
}

/// What a full pool does with a new request.
public enum APNsBackPressure: Sendable, Hashable {
    /// Wait until the wait queue has room (the caller is suspended; the pool's memory stays bounded).
    case wait
    /// Fail at once with ``APNsPoolError/queueFull(capacity:)``.
    case failFast
}

/// Everything a pool needs: where to connect, how to authenticate, and its limits.
public struct APNsPoolConfiguration: Sendable {
    /// The endpoint all connections of the pool go to.
    public var endpoint: APNsEndpoint
    /// The credential of the pool.
    public var credential: APNsCredential
    /// A PEM file of CA certificates to trust instead of the system's (the simulator's CA in tests).
    public var caFile: String?
    /// How many HTTP/2 connections the pool keeps open however idle: its floor (at least 1; default 2).
    public var connections: Int = 2
    /// How many HTTP/2 connections the pool may open while its streams stay near the peers' limits: its cap
    /// (default 16; a cap below ``connections`` is ``connections``, a pool of a fixed size). At a round trip of
    /// R seconds a connection of S streams carries at most S / R notifications a second: 16 connections of
    /// APNs' 1,000 streams carry 80,000 a second at 200 ms, more than one pool's event loop sends.
    public var maximumConnections: Int = 16
    /// How long a connection above the floor may go without a new stream before it is closed.
    public var idleConnectionTimeout: TimeAmount = .minutes(5)
    /// The largest request body the pool sends: a connection takes a request only while its flow-control windows
    /// take this many bytes, and a longer ``HTTP2Request`` is refused. APNs' largest payload (a VoIP
    /// notification's) by default; up to ``HTTP2Request/maximumBodySize`` for a pool of other requests.
    public var largestBody: Int = APNsPushType.voip.maximumPayloadSize
    /// Our own cap on streams per connection, below whatever the peer allows.
    public var maximumStreamsPerConnection: Int = 1000
    /// How many requests may wait for a free stream before the pool is full.
    public var waitQueueCapacity: Int = 10_000
    /// How many callers may wait for room in a full queue (``APNsBackPressure/wait``); beyond this
    /// even waiting callers fail fast, so that callers who do not await cannot grow memory.
    public var waiterCapacity: Int = 100_000
    /// What a full pool does with a new request, unless the call says otherwise.
    public var backPressure: APNsBackPressure = .wait
    /// How long one request may take, from the call to the final answer, retries included.
    public var requestTimeout: TimeAmount = .seconds(30)
    /// How many attempts a retryable failure gets in all.
    public var maximumAttempts: Int = 5
    /// How many times a request may be sent again at once without using an attempt: when APNs did not
    /// process it (a refused stream, a stream beyond GOAWAY's last id) or it was lost with its connection
    /// (a connection dropped with a thousand streams in flight must not use up their attempts). Within
    /// ``requestTimeout`` too.
    public var maximumResends: Int = 50
    /// Delays between attempts of a retryable request: 100 ms doubling to 5 s, with jitter.
    public var retryBackoff = ExponentialBackoff(first: .milliseconds(100), maximum: .seconds(5))
    /// Delays between failed connection attempts of a slot: 1 s doubling to 60 s, with jitter.
    /// A connection that was ready and then closed is replaced at once; backoff starts when that fails.
    public var reconnectBackoff = ExponentialBackoff(first: .seconds(1), maximum: .seconds(60))
    /// TCP connect plus TLS handshake plus the peer's first SETTINGS must finish within this.
    public var connectTimeout: TimeAmount = .seconds(10)
    /// Send a PING when nothing was read for this long.
    public var idlePingInterval: TimeAmount = .seconds(60)
    /// Send a PING at least this often, busy or not.
    public var pingInterval: TimeAmount = .seconds(300)
    /// An unanswered PING closes the connection after this long.
    public var pingTimeout: TimeAmount = .seconds(10)
    /// How often each connection checks deadlines and PINGs.
    public var housekeepingInterval: TimeAmount = .milliseconds(100)

    /// A configuration with defaults for everything but the endpoint and credential.
    public init(endpoint: APNsEndpoint, credential: APNsCredential, caFile: String? = nil) {
        self.endpoint = endpoint
        self.credential = credential
        self.caFile = caFile
    }

    func makeTLSConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if let caFile { tls.trustRoots = .file(caFile) }
        if case .certificate(let chain, let key) = credential {
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(key)
        }
        return tls
    }
}

import NIOConcurrencyHelpers
package import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A local stand-in for Apple's APNs provider API: HTTP/2 over TLS, answering like APNs does, with faults
/// to inject, for tests (in-process) and the `pushrelay apns-sim` command.
///
/// Connections start with SETTINGS_MAX_CONCURRENT_STREAMS 1 and raise it to
/// ``APNsSimulatorConfiguration/maxConcurrentStreams`` after their first successful request. A request is
/// authenticated by the connection's client certificate (issued by ``issueClientCertificate(topic:)``) or,
/// without one, by its provider token: verified once per token and connection, at most an hour old, of the
/// connection's team, and not replaced less than 20 minutes after the previous token was first seen.
/// Malformed JSON payloads are answered 400 PayloadEmpty (Apple has no reason for them).
///
/// TLS uses a server certificate for `localhost`, 127.0.0.1 and ::1 (and the bound host) issued by the
/// simulator's CA; clients trust ``caFile``.
package final class APNsSimulator: Sendable {
    /// The TCP port the simulator listens on.
    package let port: Int
    /// The address the simulator is bound to.
    package let host: String
    /// The PEM file of the simulator's CA certificate, for clients to trust.
    package var caFile: String { authority.caFile }

    private let core: SimulatorCore
    private let authority: SimulatorCertificateAuthority
    private let serverChannel: any Channel
    private let connections: ConnectionRegistry

    private init(
        core: SimulatorCore, authority: SimulatorCertificateAuthority, serverChannel: any Channel,
        connections: ConnectionRegistry, host: String, port: Int
    ) {
        self.core = core
        self.authority = authority
        self.serverChannel = serverChannel
        self.connections = connections
        self.host = host
        self.port = port
    }

    /// Makes or loads the CA, then listens on `configuration.host` and `configuration.port` on `group`.
    package static func start(
        configuration: APNsSimulatorConfiguration, group: any EventLoopGroup
    ) async throws -> APNsSimulator {
        let authority = try SimulatorCertificateAuthority.loadOrCreate(in: configuration.certificateDirectory)
        let identity = try authority.makeServerIdentity(host: configuration.host)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.key)
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        // A client certificate is asked for but optional; one that is presented must be from our CA.
        tls.certificateVerification = .optionalVerification
        tls.trustRoots = .certificates([try authority.trustRoot()])
        let sslContext = try NIOSSLContext(configuration: tls)
        let core = try SimulatorCore(configuration: configuration)
        let connections = ConnectionRegistry()
        let (http2Connection, http2Stream) = Self.http2Configuration()

        let serverChannel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connectionID = core.connectionAccepted()
                    let gate = TransportGate()
                    let tlsHandler = NIOSSLServerHandler(context: sslContext)
                    let pipeline = channel.pipeline.syncOperations
                    let handler = SimulatorConnectionHandler(
                        core: core, connectionID: connectionID, tls: tlsHandler, gate: gate
                    )
                    try pipeline.addHandler(gate)
                    try pipeline.addHandler(tlsHandler)
                    try pipeline.addHandler(WriteCoalescer())
                    try pipeline.addHandler(StatisticsBarrier(handler: handler))
                    try pipeline.addHandler(
                        NIOHTTP2Handler(
                            mode: .server, connectionConfiguration: http2Connection, streamConfiguration: http2Stream
                        )
                    )
                    try pipeline.addHandler(handler)
                    connections.add(channel)
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        return APNsSimulator(
            core: core, authority: authority, serverChannel: serverChannel, connections: connections,
            host: configuration.host, port: serverChannel.localAddress?.port ?? configuration.port
        )
    }

    /// Stops listening, closes every connection abruptly, and closes the request log.
    package func shutdown() async throws {
        try await serverChannel.close()
        await connections.closeAll()
        try core.close()
    }

    /// A client certificate and key (PEM) for certificate-based authentication to `topic`, signed by the
    /// simulator's CA: subject UID = `topic`, CN = "Apple Push Services: `topic`".
    package func issueClientCertificate(topic: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        try authority.issueClientCertificate(topic: topic)
    }

    /// The faults in force.
    package var faults: APNsSimulatorFaults { core.faults }

    /// Changes the faults; connections apply the change from their next read.
    package func updateFaults(_ update: (inout APNsSimulatorFaults) -> Void) {
        core.updateFaults(update)
    }

    /// The statistics so far.
    package func statistics() -> APNsSimulatorStatistics {
        core.statistics
    }

    /// The recorded requests, oldest first (empty unless ``APNsSimulatorConfiguration/recordRequests``).
    package func receivedRequests() -> [APNsSimulatorRequest] {
        core.recordedRequests
    }

    /// Forgets the statistics and recorded requests.
    package func reset() {
        core.reset()
    }

    /// APNs's observed SETTINGS (one stream until the first success), and DoS limits loose enough for
    /// load tests that cancel many streams.
    private static func http2Configuration() -> (
        NIOHTTP2Handler.ConnectionConfiguration, NIOHTTP2Handler.StreamConfiguration
    ) {
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 1),
            HTTP2Setting(parameter: .headerTableSize, value: 4096),
            HTTP2Setting(parameter: .initialWindowSize, value: 65535),
            HTTP2Setting(parameter: .maxFrameSize, value: 16384),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
        ]
        connection.maximumRecentlyResetStreams = 4096
        connection.maximumConnectionGlitches = 100_000
        connection.controlFrameRateLimit.maximumCount = 100_000
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamResetFrameRateLimit.maximumCount = 100_000
        stream.streamErrorRateLimit.maximumCount = 100_000
        return (connection, stream)
    }
}

/// The open connections of a simulator, so that shutdown can close them.
package final class ConnectionRegistry: Sendable {
    private let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])

    /// A registry with no connection yet.
    package init() {}

    /// Tracks `channel` until it closes.
    package func add(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        channels.withLockedValue { $0[id] = channel }
        channel.closeFuture.whenComplete { _ in
            self.channels.withLockedValue { $0[id] = nil }
        }
    }

    /// Closes every connection at the TCP level (a stalled one would wait for a TLS goodbye) and waits.
    package func closeAll() async {
        let open = channels.withLockedValue { Array($0.values) }
        for channel in open {
            channel.eventLoop.execute {
                try? channel.pipeline.syncOperations.handler(type: TransportGate.self).closeAbruptly()
            }
        }
        for channel in open {
            try? await channel.closeFuture.get()
        }
    }
}

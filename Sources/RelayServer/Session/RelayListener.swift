package import Logging
package import NIOCore
import NIOPosix
import NIOSSL
import PushRelayProtocol
import Synchronization

/// The relay's TCP listener for backend connections (optionally TLS): one ``RelayService`` behind it,
/// one session per connection.
package final class RelayListener: Sendable {
    /// The bound address's port (the chosen one when the configuration asked for port 0).
    package let port: Int
    /// The bound host.
    package let host: String
    private let serverChannel: any Channel
    /// The event loops of the backends' connections: their own, apart from the loops of the provider pools and
    /// PostgreSQL, so that a fan-out's bursts of answers never queue a tenant's request behind them.
    private let sessionLoops: MultiThreadedEventLoopGroup
    private let connections: ConnectionRegistry
    private let bodies: InflatedBytesBudget
    private let configuration: RelayListenerConfiguration
    private let logger: Logger

    private init(
        serverChannel: any Channel,
        sessionLoops: MultiThreadedEventLoopGroup,
        connections: ConnectionRegistry,
        bodies: InflatedBytesBudget,
        configuration: RelayListenerConfiguration,
        logger: Logger
    ) {
        self.serverChannel = serverChannel
        self.sessionLoops = sessionLoops
        self.connections = connections
        self.bodies = bodies
        self.configuration = configuration
        self.logger = logger
        self.host = configuration.host
        self.port = serverChannel.localAddress?.port ?? configuration.port
    }

    /// Listens on `configuration.host` and `configuration.port` (accepting on `group`) and serves connections with
    /// `service`, each on one of the listener's own event loops (one per core).
    package static func start(
        configuration: RelayListenerConfiguration,
        service: RelayService,
        group: any EventLoopGroup,
        logger: Logger
    ) async throws -> RelayListener {
        let sslContext = try configuration.tls.map { try NIOSSLContext(configuration: $0) }
        let registry = ConnectionRegistry()
        let admission = ConnectionAdmission(
            maximumPerTenant: configuration.maximumConnectionsPerTenant, logger: logger)
        let bodies = InflatedBytesBudget(limit: configuration.maximumInflightBytes)
        let counter = Atomic<Int>(0)
        let sessionLoops = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let bound = ServerBootstrap(group: group, childGroup: sessionLoops)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // A peer that shuts down its sending side still gets the answers to what it sent.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.maxMessagesPerRead, value: UInt(ConnectionBounds.readsPerCycle))
            .childChannelOption(
                .writeBufferWaterMark,
                value: .init(low: ConnectionBounds.outboundLowWaterMark, high: ConnectionBounds.outboundHighWaterMark)
            )
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    // Over the cap, the connection costs no TLS handshake and no session: refused and closed.
                    guard registry.count < configuration.maximumConnections else {
                        try pipeline.addHandler(
                            ConnectionRefusal(
                                error: ProtocolError(
                                    .tooManyConnections,
                                    "the relay holds its \(configuration.maximumConnections) connections; try again "
                                        + "later or another relay", retryAfterMilliseconds: 1_000),
                                writesFrame: sslContext == nil))
                        return
                    }
                    let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
                    if let sslContext { try pipeline.addHandler(NIOSSLServerHandler(context: sslContext)) }
                    try pipeline.addHandler(
                        RelaySessionHandler(
                            service: service, configuration: configuration, admission: admission, bodies: bodies,
                            connectionID: "c\(number)", logger: logger
                        )
                    )
                    registry.add(channel)
                }
            }
            .bind(host: configuration.host, port: configuration.port)
        let channel: any Channel
        do {
            channel = try await bound.get()
        } catch {
            try? await sessionLoops.shutdownGracefully()
            throw error
        }
        return RelayListener(
            serverChannel: channel, sessionLoops: sessionLoops, connections: registry, bodies: bodies,
            configuration: configuration, logger: logger)
    }

    /// Connections open right now.
    package var connectionCount: Int {
        connections.channels.withLock { $0.count }
    }

    /// The most bytes of answers any open connection has waiting for its peer to read them (written by the relay,
    /// not yet taken by the socket): what ``ConnectionBounds/outboundHighWaterMark`` bounds, for operators and
    /// tests to check.
    package func largestAnswerBacklog() async -> Int {
        var largest = 0
        for channel in connections.channels.withLock({ Array($0.values) }) {
            if let bytes = try? await channel.getOption(.bufferedWritableBytes).get() { largest = max(largest, bytes) }
        }
        return largest
    }

    /// Bytes of request bodies, after decompression, that in-flight requests hold now, all connections together:
    /// what `maximumInflightBytes` bounds, for operators and tests to check.
    package var inflightBodyBytes: Int {
        bodies.held
    }

    /// Stops accepting, says GOODBYE on every connection, waits for their in-flight requests (at most the
    /// configured grace period), then closes what is left.
    package func shutdown() async {
        try? await serverChannel.close()
        let open = connections.channels.withLock { Array($0.values) }
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(RelayShutdownEvent())
        }
        let deadline = ContinuousClock.now + configuration.closeGracePeriod
        while connectionCount > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in connections.channels.withLock({ Array($0.values) }) {
            try? await channel.close()
        }
        try? await sessionLoops.shutdownGracefully()
        logger.info("relay listener stopped")
    }
}

/// The open connections, so shutdown can close them; each removes itself when it closes.
final class ConnectionRegistry: Sendable {
    let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    /// The connections open now.
    var count: Int { channels.withLock { $0.count } }

    func add(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        channels.withLock { $0[id] = channel }
        channel.closeFuture.whenComplete { _ in
            _ = self.channels.withLock { $0.removeValue(forKey: id) }
        }
    }
}

import APNsSimulator
package import Foundation
package import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A local stand-in for Firebase Cloud Messaging's HTTP v1 API and Google's OAuth 2.0 token endpoint: HTTP/2 over
/// TLS (ALPN `h2` only), answering like Google does, with faults to inject, for tests (in-process) and the
/// `pushrelay fcm-sim` command.
///
/// `POST /token` exchanges a service account's signed assertion for an access token (``TokenGrantVerifier``);
/// `POST /v1/projects/{project}/messages:send` takes a message with such a token (``FCMRequestValidator``). The
/// service-account files it makes (``makeServiceAccount(projectID:clientEmail:)``) point their `token_uri` here.
///
/// TLS uses a server certificate for `localhost`, 127.0.0.1 and ::1 (and the bound host) issued by the simulator's
/// CA; clients trust ``caFile``.
package final class FCMSimulator: Sendable {
    /// The TCP port the simulator listens on.
    package let port: Int
    /// The address the simulator is bound to.
    package let host: String
    /// The PEM file of the simulator's CA certificate, for clients to trust.
    package var caFile: String { authority.caFile }
    /// The URL of the token endpoint, as service-account files name it (`token_uri`).
    package var tokenURI: String {
        let name = ["0.0.0.0", "::"].contains(host) ? "127.0.0.1" : host.contains(":") ? "[\(host)]" : host
        return "https://\(name):\(port)/token"
    }

    /// The shared state and judgement.
    private let core: FCMSimulatorCore
    /// The CA of the server certificate.
    private let authority: SimulatorCertificateAuthority
    /// The listening socket.
    private let serverChannel: any Channel
    /// The open connections, closed at shutdown.
    private let connections: ConnectionRegistry

    /// A running simulator's parts.
    private init(
        core: FCMSimulatorCore, authority: SimulatorCertificateAuthority, serverChannel: any Channel,
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
        configuration: FCMSimulatorConfiguration, group: any EventLoopGroup
    ) async throws -> FCMSimulator {
        let authority = try SimulatorCertificateAuthority.loadOrCreate(in: configuration.certificateDirectory)
        let identity = try authority.makeServerIdentity(host: configuration.host)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let core = FCMSimulatorCore(configuration: configuration)
        let connections = ConnectionRegistry()

        let serverChannel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connectionID = core.connectionAccepted()
                    let gate = TransportGate()
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(gate)
                    try pipeline.addHandler(NIOSSLServerHandler(context: sslContext))
                    try pipeline.addHandler(WriteCoalescer())
                    try pipeline.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            connectionConfiguration: Self.http2Configuration(
                                maxConcurrentStreams: core.faults.maxConcurrentStreams)))
                    try pipeline.addHandler(FCMConnectionHandler(core: core, connectionID: connectionID, gate: gate))
                    connections.add(channel)
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        return FCMSimulator(
            core: core, authority: authority, serverChannel: serverChannel, connections: connections,
            host: configuration.host, port: serverChannel.localAddress?.port ?? configuration.port)
    }

    /// Stops listening and closes every connection abruptly.
    package func shutdown() async throws {
        try await serverChannel.close()
        await connections.closeAll()
    }

    /// A new service account of `projectID` (RSA-2048), accepted from now on: its JSON file exactly in Google's
    /// format, `token_uri` pointing at this simulator. `clientEmail` defaults to a `firebase-adminsdk-…` address of
    /// the project.
    package func makeServiceAccount(projectID: String, clientEmail: String? = nil) throws -> Data {
        let file = try ServiceAccountFile.make(projectID: projectID, clientEmail: clientEmail, tokenURI: tokenURI)
        core.add(file.account)
        return file.json
    }

    /// Accepts `account` from now on (replacing an account with the same key id).
    package func addAccount(_ account: FCMSimulatorAccount) {
        core.add(account)
    }

    /// The faults in force.
    package var faults: FCMSimulatorFaults { core.faults }

    /// Changes the faults; requests apply the change from the next one received (`maxConcurrentStreams` from the
    /// next connection).
    package func updateFaults(_ update: (inout FCMSimulatorFaults) -> Void) {
        core.updateFaults(update)
    }

    /// Refuses every access token issued so far: the next send with one gets 401 UNAUTHENTICATED, and the relay
    /// must fetch a new one.
    package func revokeAccessTokens() {
        core.revokeAccessTokens()
    }

    /// The statistics so far.
    package func statistics() -> FCMSimulatorStatistics {
        core.statistics
    }

    /// The recorded `messages:send` requests that carried a valid access token of their project, oldest first,
    /// whatever their answer (empty unless ``FCMSimulatorConfiguration/recordMessages``).
    package func receivedMessages() -> [FCMSimulatorMessage] {
        core.recordedMessages
    }

    /// Forgets the statistics and recorded messages (access tokens stay valid).
    package func reset() {
        core.reset()
    }

    /// Google's front ends' SETTINGS: `maxConcurrentStreams` streams, a 1 MiB stream window (a request body fits in
    /// it); DoS limits loose enough for load tests.
    private static func http2Configuration(maxConcurrentStreams: Int) -> NIOHTTP2Handler.ConnectionConfiguration {
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 65_536),
        ]
        connection.maximumRecentlyResetStreams = 4096
        connection.maximumConnectionGlitches = 100_000
        return connection
    }
}

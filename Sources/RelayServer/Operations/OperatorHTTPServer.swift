package import Logging
package import NIOCore
import NIOHTTP1
import NIOPosix
package import Prometheus

/// The operators' HTTP port: `GET /metrics` (the Prometheus text exposition of a registry),
/// `GET /healthz` (200 while the process runs), `GET /readyz` (200 when the readiness check finds nothing
/// wrong, with a `warning:` line for each thing to look at that does not stop the relay, else 503 with the reason), `GET /status` (the delivery health per tenant and environment, JSON), 404 for
/// anything else. One request per connection.
package final class OperatorHTTPServer: Sendable {
    /// Says why the process is not ready, or `nil` when it is.
    package typealias Readiness = @Sendable () async -> String?
    /// What `/readyz` names without making the relay unready, a line each.
    package typealias Warnings = @Sendable () async -> [String]
    /// The `/status` document: the relay's delivery health per tenant and environment, as JSON.
    package typealias Status = @Sendable () async -> [UInt8]

    /// The bound port (the chosen one when port 0 was asked for).
    package let port: Int
    /// The bound host.
    package let host: String
    private let channel: any Channel

    private init(channel: any Channel, host: String, port: Int) {
        self.channel = channel
        self.host = host
        self.port = port
    }

    /// Listens on `host`:`port` (0 picks a free port), exposing `registry` and answering readiness
    /// with `readiness`.
    package static func start(
        host: String,
        port: Int,
        registry: PrometheusCollectorRegistry,
        readiness: @escaping Readiness,
        warnings: @escaping Warnings = { [] },
        status: @escaping Status = { Array("{}\n".utf8) },
        group: any EventLoopGroup,
        logger: Logger
    ) async throws -> OperatorHTTPServer {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(
                        OperatorHTTPHandler(
                            registry: registry, readiness: readiness, warnings: warnings, status: status))
                }
            }
            .bind(host: host, port: port)
            .get()
        let server = OperatorHTTPServer(channel: channel, host: host, port: channel.localAddress?.port ?? port)
        logger.info("operator HTTP listening", metadata: ["address": "\(host):\(server.port)"])
        return server
    }

    /// Stops listening.
    package func shutdown() async {
        try? await channel.close()
    }
}

/// Answers one HTTP request per connection, then closes it.
final class OperatorHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Prometheus' text exposition format.
    static let metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

    private let registry: PrometheusCollectorRegistry
    private let readiness: OperatorHTTPServer.Readiness
    private let warnings: OperatorHTTPServer.Warnings
    private let status: OperatorHTTPServer.Status
    private var head: HTTPRequestHead?

    init(
        registry: PrometheusCollectorRegistry, readiness: @escaping OperatorHTTPServer.Readiness,
        warnings: @escaping OperatorHTTPServer.Warnings, status: @escaping OperatorHTTPServer.Status
    ) {
        self.registry = registry
        self.readiness = readiness
        self.warnings = warnings
        self.status = status
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        guard head.method == .GET || head.method == .HEAD else {
            write(.methodNotAllowed, body: "GET only\n", head: head, context: context)
            return
        }
        switch path {
        case "/metrics":
            write(
                .ok, body: MetricsPage.render(registry), contentType: Self.metricsContentType, head: head,
                context: context)
        case "/healthz":
            write(.ok, body: "ok\n", head: head, context: context)
        case "/readyz":
            let (readiness, warnings) = (self.readiness, self.warnings)
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { (await readiness(), await warnings()) }.whenComplete { result in
                let (handler, context) = bound.value
                switch result {
                case .success((nil, let warnings)):
                    let body = "ready\n" + warnings.map { "warning: \($0)\n" }.joined()
                    handler.write(.ok, body: body, head: head, context: context)
                case .success((let reason?, let warnings)):
                    let body = "not ready: \(reason)\n" + warnings.map { "warning: \($0)\n" }.joined()
                    handler.write(.serviceUnavailable, body: body, head: head, context: context)
                case .failure(let error):
                    handler.write(.serviceUnavailable, body: "not ready: \(error)\n", head: head, context: context)
                }
            }
        case "/status":
            let status = self.status
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await status() }.whenComplete { result in
                let (handler, context) = bound.value
                handler.write(
                    .ok, body: (try? result.get()) ?? Array("{}\n".utf8), contentType: "application/json",
                    head: head, context: context)
            }
        default:
            write(.notFound, body: "not found\n", head: head, context: context)
        }
    }

    private func write(
        _ status: HTTPResponseStatus,
        body: String,
        head: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        write(
            status, body: Array(body.utf8), contentType: "text/plain; charset=utf-8", head: head, context: context
        )
    }

    private func write(
        _ status: HTTPResponseStatus,
        body: [UInt8],
        contentType: String,
        head: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.count)")
        headers.add(name: "Connection", value: "close")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil
        )
        if head.method != .HEAD {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

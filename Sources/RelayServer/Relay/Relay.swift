import Foundation
package import Logging
package import NIOCore
package import RelayStore
package import ServiceLifecycle

/// The relay, wired once: the APNs pools, the service, the operator port and the listener, built in their order
/// by ``start(configuration:store:group:logger:)``, then run as one swift-service-lifecycle `ServiceGroup` of
/// ``RelayPart``s until a graceful shutdown stops them in the reverse order. `pushrelay serve` runs it; the tests
/// run the same type.
package struct Relay: Sendable {
    /// The names of the parts, in the order they are listed in the service group; a graceful shutdown stops
    /// them from the last to the first: the listener (GOODBYE, in-flight requests answered), the operator port,
    /// the fan-out (pages being sent are finished and their delivery rows written), the samplers, the heartbeat
    /// (its row removed: the other relays take its share of the tenants' rates), then the pools.
    package static let partOrder = [
        "APNs pools", "key-change follower", "maintenance", "node heartbeat", "metrics sampler", "fan-out worker",
        "operator HTTP server", "relay listener",
    ]

    /// The store every part reads and writes.
    package let store: RelayStore
    /// The APNs pools, one per tenant and environment.
    package let pools: PoolRegistry
    /// What the relay does for each request, and its fan-out worker.
    package let service: RelayService
    /// The wire protocol's listener, accepting from ``start(configuration:store:group:logger:)`` on.
    package let listener: RelayListener
    /// The operators' HTTP port, when it is configured and could be opened.
    package let operatorServer: OperatorHTTPServer?
    /// Whether the relay takes work, and its delivery health (`/readyz`, `/status`).
    package let readiness: Readiness
    /// The metrics sampler part.
    package let metrics: MetricsSampler
    private let configuration: Configuration
    private let logger: Logger

    /// Builds the pools and the service, warms the pools, opens the operator port and the listener: from its
    /// return, the relay accepts connections. Run its parts with ``run()``.
    ///
    /// - Throws: ``RelayStartError`` when the operator port cannot be opened (a second relay on the same host
    ///   with the default address), the listener's errors when it cannot listen.
    package static func start(
        configuration: Configuration,
        store: RelayStore,
        group: any EventLoopGroup,
        logger: Logger
    ) async throws -> Relay {
        let apns = APNsService(
            store: store, masterKey: configuration.masterKey, target: configuration.target, group: group)
        let fcm = FCMService(
            store: store, masterKey: configuration.masterKey, target: configuration.fcmTarget, group: group)
        let pools = PoolRegistry(
            store: store, masterKey: configuration.masterKey,
            services: PushServices([apns, fcm] + configuration.additionalServices), logger: logger,
            relayName: ProcessInfo.processInfo.hostName
        )
        let service = RelayService(
            store: store, pools: pools, limits: configuration.server.limits,
            requestsPerSecond: configuration.requestsPerSecond, requestBurst: configuration.requestBurst,
            statementsPerTenant: configuration.statementsPerTenant, fanOutTuning: configuration.fanOutTuning,
            logger: logger
        )
        if configuration.warmsPools {
            let records = try await store.listTenants().filter(\.enabled)
            await pools.warm(
                records.flatMap { record in
                    let apns = Set(record.configuration.bundleIDs.values.flatMap(\.environments)).map(Destination.apns)
                    let fcm = record.configuration.fcm == nil ? [] : [FCMService.destination]
                    return (apns.sorted() + fcm).map { (tenant: record.id, destination: $0) }
                }
            )
        }
        let readiness = Readiness(store: store, pools: pools)
        let metrics = MetricsSampler(store: store, pools: pools, logger: logger)
        var operatorServer: OperatorHTTPServer?
        if let address = configuration.operatorPort {
            do {
                operatorServer = try await OperatorHTTPServer.start(
                    host: address.host, port: address.port, registry: address.registry,
                    readiness: { await readiness.notReadyReason() }, warnings: { await readiness.warnings() },
                    status: { await readiness.status().json() },
                    group: group, logger: logger
                )
            } catch {
                // A relay without the metrics and health its operators expect would look dead to them: refused.
                await pools.shutdown(gracePeriod: .zero)
                throw RelayStartError.operatorPortUnavailable(
                    address: "\(address.host):\(address.port)", reason: Self.reason(error))
            }
        }
        let listener = try await RelayListener.start(
            configuration: configuration.server, service: service, group: group, logger: logger
        )
        readiness.setListening(true)
        return Relay(
            store: store, pools: pools, service: service, listener: listener, operatorServer: operatorServer,
            readiness: readiness, metrics: metrics, configuration: configuration, logger: logger
        )
    }

    /// The system's words for a failed bind (`address already in use`), else the error as it describes itself.
    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError {
            return String(cString: strerror(error.errnoCode)).lowercased()
        }
        return "\(error)"
    }

    /// Runs the parts until SIGTERM or SIGINT (or the task's cancellation), then stops them in the reverse of
    /// ``partOrder``.
    package func run() async throws {
        try await ServiceGroup(
            services: parts(stopped: { _ in }), gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
        ).run()
    }

    /// The parts as a service group that no signal stops, for a caller that triggers the graceful shutdown
    /// itself; `stopped` is told the name of each part once it has stopped.
    package func serviceGroup(stopped: @escaping @Sendable (String) -> Void = { _ in }) -> ServiceGroup {
        ServiceGroup(services: parts(stopped: stopped), logger: logger)
    }

    /// The parts that this configuration runs, in ``partOrder``.
    private func parts(stopped: @escaping @Sendable (String) -> Void) -> [RelayPart] {
        let (store, pools, service, listener, logger) = (store, pools, service, listener, logger)
        let (readiness, metrics) = (readiness, metrics)
        let configuration = configuration
        var parts = [
            RelayPart("APNs pools", stop: { await pools.shutdown(gracePeriod: configuration.poolShutdownGrace) })
        ]
        if configuration.runsBackgroundParts {
            parts += [
                RelayPart("key-change follower", work: { await pools.followKeyChanges() }),
                RelayPart(
                    "maintenance",
                    work: {
                        await Self.maintain(
                            store, retentionDays: configuration.retentionDays,
                            every: configuration.maintenanceInterval, logger: logger)
                    }
                ),
                // This process in relay_nodes, by its lease owner name: the relays share each tenant's rate.
                RelayPart(
                    "node heartbeat",
                    work: { await RelayHeartbeat(store: store, logger: logger).run(node: service.worker.owner) }),
                RelayPart("metrics sampler", work: { await metrics.run(every: configuration.metricsInterval) }),
            ]
        }
        if configuration.runsFanOut {
            parts.append(RelayPart("fan-out worker", work: { await service.runFanOut() }))
        }
        if let operatorServer {
            parts.append(RelayPart("operator HTTP server", stop: { await operatorServer.shutdown() }))
        }
        parts.append(
            RelayPart(
                "relay listener",
                stop: {
                    logger.info("shutting down gracefully")
                    readiness.setListening(false)
                    await listener.shutdown()
                }
            )
        )
        return parts.map { $0.reporting(to: stopped) }
    }

    /// Runs maintenance every `interval` until the task is cancelled.
    private static func maintain(_ store: RelayStore, retentionDays: Int, every interval: Duration, logger: Logger)
        async
    {
        while !Task.isCancelled {
            do {
                let report = try await store.maintain(retentionDays: retentionDays)
                logger.info("maintenance done", metadata: ["report": "\(report)"])
            } catch {
                logger.warning("maintenance failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}

import ServiceLifecycle

/// One part of a running relay (the listener, the fan-out worker, the operator port, maintenance, the
/// key-change follower, the pools) as a swift-service-lifecycle `Service`.
///
/// `work` runs until the group shuts down gracefully (it is then cancelled, and awaited: the fan-out finishes
/// the pages it is sending), then `stop` runs. A `ServiceGroup` shuts its services down one at a time in
/// the reverse order of its list, so the parts are listed in the order they depend on each other: the
/// pools first, the listener last (it stops first: no new requests while the rest finishes).
package struct RelayPart: Service, CustomStringConvertible {
    /// The part's name in the group's logs.
    package let description: String
    private let work: @Sendable () async -> Void
    private let stop: @Sendable () async -> Void

    /// A part named `name` doing `work` until the graceful shutdown (by default nothing: it only waits for
    /// it), then `stop`.
    package init(
        _ name: String,
        work: @escaping @Sendable () async -> Void = { try? await gracefulShutdown() },
        stop: @escaping @Sendable () async -> Void = {}
    ) {
        self.description = name
        self.work = work
        self.stop = stop
    }

    /// The same part, telling `stopped` its name once it has stopped.
    func reporting(to stopped: @escaping @Sendable (String) -> Void) -> RelayPart {
        let (name, stop) = (description, stop)
        return RelayPart(
            name, work: work,
            stop: {
                await stop()
                stopped(name)
            })
    }

    /// Runs `work` until the graceful shutdown or cancellation, then `stop`.
    package func run() async {
        let work = self.work
        await cancelWhenGracefulShutdown { await work() }
        await stop()
    }
}

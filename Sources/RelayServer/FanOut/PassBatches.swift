import Foundation
import RelayStore

/// The requests of one pass for one pool, handed to it together, with their devices' positions in the page.
struct PoolBatch {
    let pool: any ProviderPool
    let rendering: any ProviderRendering
    private(set) var indices: [Int] = []
    private(set) var requests: [ProviderRequest] = []

    init(pool: any ProviderPool, rendering: any ProviderRendering) {
        self.pool = pool
        self.rendering = rendering
    }

    /// Adds the request to the device at `index`.
    mutating func append(_ index: Int, _ request: ProviderRequest) {
        indices.append(index)
        requests.append(request)
    }

    /// Empties the batch, keeping its capacity for the next pass.
    mutating func removeAll() {
        indices.removeAll(keepingCapacity: true)
        requests.removeAll(keepingCapacity: true)
    }
}

/// The requests a page starts in one pass, by destination: handed to their pools together when the pass ends
/// (one hop to each pool's engine), their answers left in the page's ``AnswerInbox``. The requests of a pass
/// share the time they were started: they leave together.
struct PassBatches {
    let inbox: AnswerInbox
    private var batches: [Destination: PoolBatch] = [:]
    private var passStart: (date: Date, instant: ContinuousClock.Instant)?

    init(inbox: AnswerInbox) {
        self.inbox = inbox
    }

    /// When this pass's requests were started: the first call of a pass reads the clocks.
    mutating func startTime() -> (date: Date, instant: ContinuousClock.Instant) {
        if let passStart { return passStart }
        let now = (Date(), ContinuousClock.now)
        passStart = now
        return now
    }

    /// Ends the pass's shared start time: what starts next (after a wait) reads the clocks again.
    mutating func restartClock() {
        passStart = nil
    }

    /// Adds the request to the device at `index` to the batch of `destination`'s `pool`, whose requests are
    /// rendered from `rendering`.
    mutating func append(
        _ index: Int, _ request: ProviderRequest, to pool: any ProviderPool, destination: Destination,
        rendering: any ProviderRendering
    ) {
        batches[destination, default: PoolBatch(pool: pool, rendering: rendering)].append(index, request)
    }

    /// Hands every batch to its pool and ends the pass.
    mutating func submit() {
        passStart = nil
        let inbox = inbox
        for (destination, batch) in batches where !batch.requests.isEmpty {
            let indices = batch.indices
            batch.pool.send(batch.requests, rendering: batch.rendering) { position, report in
                inbox.put(Answer(index: indices[position], report: report, at: ContinuousClock.now))
            }
            batches[destination]?.removeAll()
        }
    }
}

extension PageSender {
    /// Why a device gets no request: its row's outcome and reason, or why it is held instead.
    struct Refusal: Error {
        var outcome: DeliveryOutcome
        var reason: String
        /// Set when the device is held (no usable pool now), not recorded.
        var hold: HoldCause?
    }

    /// A page's pools, looked up once per destination from the ``PoolRegistry``.
    struct Pools {
        let tenant: String
        let registry: PoolRegistry
        private var byDestination: [Destination: Result<any ProviderPool, Refusal>] = [:]

        init(tenant: String, registry: PoolRegistry) {
            self.tenant = tenant
            self.registry = registry
        }

        /// The pool for `destination` or why there is none, when that is known without the registry: a destination
        /// the send does not reach (a configuration fault), or one looked up before. `nil`: look it up.
        func known(_ destination: Destination, allowed: Set<Destination>) -> Result<any ProviderPool, Refusal>? {
            guard allowed.contains(destination) else {
                let reason = destination.provider == .apns ? "EnvironmentNotConfigured" : "ProviderNotConfigured"
                return .failure(Refusal(outcome: .configurationFault, reason: reason))
            }
            return byDestination[destination]
        }

        /// Looks the pool for `destination` up in the registry, once per page: the pool, or why there is none now
        /// (its devices are held). The lookup ends the pass's shared start time.
        mutating func lookUp(_ destination: Destination, passes: inout PassBatches) async -> Result<
            any ProviderPool, Refusal
        > {
            let found: Result<any ProviderPool, Refusal>
            do throws(PoolUnavailable) {
                found = .success(try await registry.pool(tenant: tenant, destination: destination))
            } catch {
                let cause: HoldCause =
                    error.isConfiguration ? .configuration(reason: error.reason) : .outage(reason: error.reason)
                found = .failure(Refusal(outcome: .retryLater, reason: error.message, hold: cause))
            }
            byDestination[destination] = found
            passes.restartClock()
            return found
        }
    }
}

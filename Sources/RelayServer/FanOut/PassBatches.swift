import APNs
import Foundation
import PushRelayProtocol
import RelayStore

/// The requests of one pass for one pool, handed to it together, with their devices' positions in the page.
struct PoolBatch {
    let pool: APNsPool
    private(set) var indices: [Int] = []
    private(set) var notifications: [APNsNotification] = []

    init(pool: APNsPool) {
        self.pool = pool
    }

    /// Adds the request to the device at `index`.
    mutating func append(_ index: Int, _ notification: APNsNotification) {
        indices.append(index)
        notifications.append(notification)
    }

    /// Empties the batch, keeping its capacity for the next pass.
    mutating func removeAll() {
        indices.removeAll(keepingCapacity: true)
        notifications.removeAll(keepingCapacity: true)
    }
}

/// The requests a page starts in one pass, by environment: handed to their pools together when the pass ends
/// (one hop to each pool's event loop), their answers left in the page's ``AnswerInbox``. The requests of a pass
/// share the time they were started: they leave together.
struct PassBatches {
    let inbox: AnswerInbox
    private var batches: [APNsEnvironment: PoolBatch] = [:]
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

    /// Adds the request to the device at `index` to `pool`'s batch.
    mutating func append(
        _ index: Int, _ notification: APNsNotification, to pool: APNsPool, environment: APNsEnvironment
    ) {
        batches[environment, default: PoolBatch(pool: pool)].append(index, notification)
    }

    /// Hands every batch to its pool and ends the pass.
    mutating func submit() {
        passStart = nil
        let inbox = inbox
        for (environment, batch) in batches where !batch.notifications.isEmpty {
            let indices = batch.indices
            batch.pool.send(batch.notifications) { position, result in
                inbox.put(Answer(index: indices[position], result: result, at: ContinuousClock.now))
            }
            batches[environment]?.removeAll()
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

    /// A page's pools, looked up once per environment from the ``PoolRegistry``.
    struct Pools {
        let tenant: String
        let registry: PoolRegistry
        private var byEnvironment: [APNsEnvironment: Result<APNsPool, Refusal>] = [:]

        init(tenant: String, registry: PoolRegistry) {
            self.tenant = tenant
            self.registry = registry
        }

        /// The pool for `environment` or why there is none, when that is known without the registry: an
        /// environment the send does not name (a configuration fault), or one looked up before. `nil`: look it up.
        func known(_ environment: APNsEnvironment, allowed: Set<APNsEnvironment>) -> Result<APNsPool, Refusal>? {
            guard allowed.contains(environment) else {
                return .failure(Refusal(outcome: .configurationFault, reason: "EnvironmentNotConfigured"))
            }
            return byEnvironment[environment]
        }

        /// Looks the pool for `environment` up in the registry, once per page: the pool, or why there is none now
        /// (its devices are held). The lookup ends the pass's shared start time.
        mutating func lookUp(_ environment: APNsEnvironment, passes: inout PassBatches) async -> Result<
            APNsPool, Refusal
        > {
            let found: Result<APNsPool, Refusal>
            do throws(PoolUnavailable) {
                found = .success(try await registry.pool(tenant: tenant, environment: environment))
            } catch {
                let cause: HoldCause =
                    error.isConfiguration ? .configuration(reason: error.reason) : .outage(reason: error.reason)
                found = .failure(Refusal(outcome: .retryLater, reason: error.message, hold: cause))
            }
            byEnvironment[environment] = found
            passes.restartClock()
            return found
        }
    }
}

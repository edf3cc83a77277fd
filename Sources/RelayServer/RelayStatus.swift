import APNs
public import Foundation
import RelayStore

/// The relay's delivery health as the operator port's `/status` answers it (JSON): whether this relay is ready,
/// and per tenant and environment its pool, its key, a configuration fault and the notifications held for it.
/// One tenant's or environment's trouble shows here, never in readiness.
public struct RelayStatus: Codable, Sendable, Hashable {
    /// Whether this relay can accept, durably store and deliver work, and why not.
    public var ready: Bool
    /// Why it is not ready (`nil` when it is).
    public var notReadyReason: String?
    /// The relay's version.
    public var version: String
    /// When this answer was made.
    public var generatedAt: Date
    /// Every tenant, by id.
    public var tenants: [Tenant]

    /// One tenant's health.
    public struct Tenant: Codable, Sendable, Hashable {
        /// The tenant id.
        public var tenant: String
        /// Whether it is enabled (a disabled tenant's jobs wait).
        public var enabled: Bool
        /// Each environment its bundle ids register tokens in.
        public var environments: [Destination]
    }

    /// One tenant's destination (an APNs environment).
    public struct Destination: Codable, Sendable, Hashable {
        /// `production` or `development`.
        public var environment: String
        /// `delivering`, `connecting` (no ready connection yet), `unreachable` (held for an outage), `faulted`
        /// (held for a configuration fault) or `idle` (no pool built yet).
        public var state: String
        /// The pool's connections and streams, when it is built.
        public var pool: Pool?
        /// Why no usable signing key is there (`nil` when one is).
        public var keyProblem: String?
        /// The configuration fault holding its sends, if any.
        public var fault: Fault?
        /// The devices held for it, by reason.
        public var held: [Held]
    }

    /// A built pool's state.
    public struct Pool: Codable, Sendable, Hashable {
        /// Connections open.
        public var connections: Int
        /// Of them, ready for streams.
        public var readyConnections: Int
        /// Streams in flight.
        public var streamsInFlight: Int
        /// Requests waiting for a stream.
        public var queued: Int
    }

    /// A configuration fault.
    public struct Fault: Codable, Sendable, Hashable {
        /// The provider's or the relay's reason.
        public var reason: String
        /// What to fix.
        public var fix: String
        /// When it was first met.
        public var since: Date
    }

    /// Devices held for one reason.
    public struct Held: Codable, Sendable, Hashable {
        /// Why they wait.
        public var reason: String
        /// How many.
        public var devices: Int
        /// When the oldest was first held.
        public var oldestSince: Date
        /// When the next is tried again.
        public var nextAttempt: Date
    }

    /// The status as JSON (snake_case keys, ISO 8601 dates, sorted keys).
    public func json() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return Array((try? encoder.encode(self)) ?? Data("{}".utf8)) + [0x0A]
    }
}

extension PoolRegistry {
    /// The pool, key and fault parts of `tenant`'s destination `environment` (its held devices are the store's).
    func destinationStatus(tenant: String, environment: APNsEnvironment) async -> RelayStatus.Destination {
        let key = PoolKey(tenant: tenant, environment: environment)
        var pool: RelayStatus.Pool?
        var snapshot: APNsPoolSnapshot?
        if let entry = pools[key], let current = try? await entry.task.value {
            snapshot = try? await current.pool.snapshot()
        }
        if let snapshot {
            pool = RelayStatus.Pool(
                connections: snapshot.connections.count, readyConnections: snapshot.connections.count(where: \.isReady),
                streamsInFlight: snapshot.streamsInFlight, queued: snapshot.queued + snapshot.waiting)
        }
        let fault = faults[key].map { RelayStatus.Fault(reason: $0.reason, fix: $0.detail, since: $0.since) }
        let keyProblem = await sendRefusalProblem(key)
        let state: String =
            if fault != nil { "faulted" } else if let pool {
                pool.readyConnections > 0 ? "delivering" : (pool.connections > 0 ? "connecting" : "unreachable")
            } else { "idle" }
        return RelayStatus.Destination(
            environment: environment.rawValue, state: state, pool: pool, keyProblem: keyProblem, fault: fault, held: [])
    }
}

package import Foundation
import RelayStore

/// The relay's delivery health as the operator port's `/status` answers it (JSON): whether this relay is ready,
/// and per tenant and environment its pool, its key, a configuration fault and the notifications held for it.
/// One tenant's or environment's trouble shows here, never in readiness.
package struct RelayStatus: Codable, Sendable, Hashable {
    /// Whether this relay can accept, durably store and deliver work, and why not.
    package var ready: Bool
    /// Why it is not ready (`nil` when it is).
    package var notReadyReason: String?
    /// The relay's version.
    package var version: String
    /// When this answer was made.
    package var generatedAt: Date
    /// Every tenant, by id.
    package var tenants: [Tenant]

    /// One tenant's health.
    package struct Tenant: Codable, Sendable, Hashable {
        /// The tenant id.
        package var tenant: String
        /// Whether it is enabled (a disabled tenant's jobs wait).
        package var enabled: Bool
        /// Each environment its bundle ids register tokens in.
        package var environments: [Destination]
    }

    /// One tenant's destination (an APNs environment, its Firebase project).
    package struct Destination: Codable, Sendable, Hashable {
        /// The push service: `apns` or `fcm`.
        package var provider: String
        /// The destination's stored name: APNs' `production` or `development`, or `fcm`.
        package var environment: String
        /// `delivering`, `connecting` (no ready connection yet), `unreachable` (held for an outage), `faulted`
        /// (held for a configuration fault) or `idle` (no pool built yet).
        package var state: String
        /// The pool's connections and streams, when it is built.
        package var pool: Pool?
        /// Why no usable signing key is there (`nil` when one is).
        package var keyProblem: String?
        /// The configuration fault holding its sends, if any.
        package var fault: Fault?
        /// The devices held for it, by reason.
        package var held: [Held]
        /// The notifications its provider refused for one device each since the relay started, by reason.
        package var rejected: [Rejected]
    }

    /// Notifications a provider refused for one device each (``DeviceRejections``), for one reason.
    package struct Rejected: Codable, Sendable, Hashable {
        /// The provider's code.
        package var reason: String
        /// How many.
        package var count: Int
        /// When the first was recorded.
        package var since: Date
        /// When the last was recorded.
        package var last: Date
    }

    /// A built pool's state.
    package struct Pool: Codable, Sendable, Hashable {
        /// Connections open.
        package var connections: Int
        /// Of them, ready for streams.
        package var readyConnections: Int
        /// Streams in flight.
        package var streamsInFlight: Int
        /// Requests waiting for a stream.
        package var queued: Int
    }

    /// A configuration fault.
    package struct Fault: Codable, Sendable, Hashable {
        /// The provider's or the relay's reason.
        package var reason: String
        /// What to fix.
        package var fix: String
        /// When it was first met.
        package var since: Date
    }

    /// Devices held for one reason.
    package struct Held: Codable, Sendable, Hashable {
        /// Why they wait.
        package var reason: String
        /// How many.
        package var devices: Int
        /// When the oldest was first held.
        package var oldestSince: Date
        /// When the next is tried again.
        package var nextAttempt: Date
    }

    /// The status as JSON (snake_case keys, ISO 8601 dates, sorted keys).
    package func json() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return Array((try? encoder.encode(self)) ?? Data("{}".utf8)) + [0x0A]
    }
}

extension PoolRegistry {
    /// The pool, key and fault parts of `tenant`'s `destination` (its held devices are the store's).
    func destinationStatus(tenant: String, destination: Destination) async -> RelayStatus.Destination {
        let key = PoolKey(tenant: tenant, destination: destination)
        var pool: RelayStatus.Pool?
        if let entry = pools[key], let current = try? await entry.task.value, let status = await current.pool.status() {
            pool = RelayStatus.Pool(
                connections: status.connections, readyConnections: status.readyConnections,
                streamsInFlight: status.inFlight, queued: status.queued)
        }
        let fault = faults[key].map { RelayStatus.Fault(reason: $0.reason, fix: $0.detail, since: $0.since) }
        let keyProblem = await sendRefusalProblem(key)
        let state: String =
            if fault != nil { "faulted" } else if let pool {
                pool.readyConnections > 0 ? "delivering" : (pool.connections > 0 ? "connecting" : "unreachable")
            } else { "idle" }
        return RelayStatus.Destination(
            provider: destination.provider.rawValue, environment: destination.storedName, state: state, pool: pool,
            keyProblem: keyProblem, fault: fault, held: [],
            rejected: rejections[key]?.recent() ?? [])
    }
}

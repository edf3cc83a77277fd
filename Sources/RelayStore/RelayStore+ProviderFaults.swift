package import Foundation
import Logging
import PostgresNIO

/// A provider's refusal of a tenant's configuration (its key, team or topic) for one environment, as the relay
/// that met it last reported it: delivery to that destination is held until it is fixed.
package struct ProviderFaultRecord: Sendable, Hashable {
    /// The tenant.
    package var tenantID: String
    /// The environment (an APNs environment's raw value).
    package var environment: String
    /// The provider's reason (`InvalidProviderToken`, `BadTopic`, ...).
    package var reason: String
    /// What to fix, in a sentence.
    package var detail: String
    /// When it was first met.
    package var since: Date
    /// The relay that reported it.
    package var relay: String

    /// A fault with these fields.
    package init(tenantID: String, environment: String, reason: String, detail: String, since: Date, relay: String) {
        self.tenantID = tenantID
        self.environment = environment
        self.reason = reason
        self.detail = detail
        self.since = since
        self.relay = relay
    }
}

extension RelayStore {
    /// Records (or replaces) the fault of `fault.tenantID` in `fault.environment`.
    package func recordProviderFault(_ fault: ProviderFaultRecord) async throws(RelayStoreError) {
        try await mappingErrors {
            try await database.query(
                """
                INSERT INTO provider_faults (tenant_id, environment, reason, detail, since, relay)
                VALUES (\(fault.tenantID), \(fault.environment), \(fault.reason), \(fault.detail), \(fault.since),
                    \(fault.relay))
                ON CONFLICT (tenant_id, environment) DO UPDATE SET reason = excluded.reason, detail = excluded.detail,
                    since = excluded.since, relay = excluded.relay
                """,
                logger: logger
            )
        }
    }

    /// Removes the fault of `tenant` in `environment` (delivery resumed there).
    package func clearProviderFault(tenant: String, environment: String) async throws(RelayStoreError) {
        try await mappingErrors {
            try await database.query(
                "DELETE FROM provider_faults WHERE tenant_id = \(tenant) AND environment = \(environment)",
                logger: logger
            )
        }
    }

    /// Every recorded fault, by tenant and environment.
    package func providerFaults() async throws(RelayStoreError) -> [ProviderFaultRecord] {
        var faults: [ProviderFaultRecord] = []
        try await mappingErrors {
            for try await (tenant, environment, reason, detail, since, relay) in try await database.query(
                """
                SELECT tenant_id, environment, reason, detail, since, relay FROM provider_faults
                ORDER BY tenant_id, environment
                """,
                logger: logger
            ).decode((String, String, String, String, Date, String).self) {
                faults.append(
                    ProviderFaultRecord(
                        tenantID: tenant, environment: environment, reason: reason, detail: detail, since: since,
                        relay: relay))
            }
        }
        return faults
    }
}

import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// The devices of a job that wait for their provider (held pages still open), with why they wait. Counted
    /// distinct: a held page being sent has already written its devices' next page.
    package func heldDevices(tenant: String, jobID: String) async throws(RelayStoreError) -> (
        devices: Int, reason: String?
    ) {
        guard let uuid = UUID(uuidString: jobID) else { return (0, nil) }
        return try await mappingErrors {
            for try await (devices, reason) in try await database.query(
                """
                SELECT count(DISTINCT token)::int8, max(wait_reason) FROM job_pages, unnest(tokens) AS token
                WHERE job_id = \(uuid) AND tenant_id = \(tenant) AND retry_round > 0
                  AND state IN ('pending', 'leased')
                """,
                logger: logger
            ).decode((Int, String?).self) {
                return (devices, reason)
            }
            return (0, nil)
        }
    }

    /// Every tenant's held devices, by environment and reason: how many (distinct: a held page being sent has
    /// already written its devices' next page), since when the oldest waits, and the next attempt. Reads the held
    /// pages' partial index only: nothing while no device is held.
    package func heldDeliveries() async throws(RelayStoreError) -> [HeldDeliveries] {
        var summary: [HeldDeliveries] = []
        try await mappingErrors {
            for try await (tenant, environment, reason, devices, oldest, next) in try await database.query(
                """
                SELECT tenant_id, coalesce(wait_environment, ''), coalesce(wait_reason, ''),
                    count(DISTINCT (job_id, token))::int8, min(held_since), min(due_at)
                FROM job_pages, unnest(tokens) AS token WHERE retry_round > 0 AND state IN ('pending', 'leased')
                GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                """,
                logger: logger
            ).decode((String, String, String, Int, Date, Date).self) {
                summary.append(
                    HeldDeliveries(
                        tenantID: tenant, environment: environment, reason: reason, devices: devices,
                        oldestSince: oldest, nextAttempt: next))
            }
        }
        return summary
    }

    /// Makes `tenant`'s held pages due now (its provider came back, or its configuration was fixed), so they go
    /// out without waiting for their backoff; returns how many pages.
    @discardableResult
    package func retryHeldPagesNow(tenant: String, environment: String) async throws(RelayStoreError) -> Int {
        try await countRows(
            """
            UPDATE job_pages SET due_at = now()
            WHERE tenant_id = \(tenant) AND wait_environment = \(environment) AND retry_round > 0
              AND state = 'pending' AND due_at > now()
            RETURNING 1::int8
            """
        )
    }
}

import Foundation
import PushRelayProtocol
import RelayStore

/// JOB_STATUS and QUERY_DELIVERIES: the tenant's jobs and their delivery records.
extension RelayService {
    func jobStatus(_ request: Pushrelay_V1_JobStatus, tenant: String) async throws(ProtocolError)
        -> Pushrelay_V1_Job
    {
        let store = store
        let job = try await fromStore { try await store.job(tenant: tenant, id: request.jobID) }
        guard let job else { throw ProtocolError(.notFound, "no job \(request.jobID)", field: "job_status.job_id") }
        var answer = Pushrelay_V1_Job(job)
        if job.state == .running {
            let held = try await fromStore { try await store.heldDevices(tenant: tenant, jobID: job.id) }
            answer.waiting = UInt32(clamping: held.devices)
            answer.waitingReason = held.reason ?? ""
        }
        return answer
    }

    func queryDeliveries(
        _ request: Pushrelay_V1_QueryDeliveries,
        tenant: String
    ) async throws(ProtocolError) -> Pushrelay_V1_DeliveryList {
        let limit = request.limit == 0 ? Int(FieldRules.defaultQueryLimit) : Int(request.limit)
        let key = try PageCursor.deliveryKey(request.cursor, field: "query_deliveries.cursor")
        let store = store
        // One more than asked says whether a next page exists.
        let rows = try await fromStore { () async throws -> [DeliveryRecord] in
            if !request.jobID.isEmpty {
                return try await store.deliveries(tenant: tenant, job: request.jobID, limit: limit + 1, after: key)
            } else if !request.userID.isEmpty {
                return try await store.deliveries(tenant: tenant, user: request.userID, limit: limit + 1, after: key)
            } else if !request.token.isEmpty {
                return try await store.deliveries(tenant: tenant, token: request.token, limit: limit + 1, after: key)
            }
            // A bound past the calendar's end means "until the end": no row is later.
            let latest = FieldRules.latestMilliseconds
            return try await store.deliveries(
                tenant: tenant, from: Date(unixMilliseconds: min(request.fromMs, latest)),
                to: Date(unixMilliseconds: request.toMs == 0 ? latest : min(request.toMs, latest)),
                limit: limit + 1, after: key)
        }
        var answer = Pushrelay_V1_DeliveryList()
        answer.deliveries.reserveCapacity(min(rows.count, limit))
        for row in rows.prefix(limit) {
            answer.deliveries.append(Pushrelay_V1_Delivery(row))
            // Another tenant's request is not kept waiting while a large page is built.
            if answer.deliveries.count.isMultiple(of: RelayStore.rowsBetweenYields) { await Task.yield() }
        }
        if rows.count > limit, let last = rows.prefix(limit).last {
            answer.nextCursor = PageCursor.after(last)
        }
        return answer
    }
}

import Foundation
import Logging
import Metrics
import PushRelayProtocol
import RelayStore

extension PoolRegistry {
    /// Faults `tenant`'s `destination` for `reason` (a provider's refusal of its configuration, or no usable
    /// key): its sends are held until a key change or a probe finds it fixed. Logged at error level and recorded in
    /// `provider_faults` (unless it is this relay's own master key) once per change of reason, not per send.
    func reportFault(tenant: String, destination: Destination, reason: String) async {
        let key = PoolKey(tenant: tenant, destination: destination)
        let now = ContinuousClock.now
        if faults[key]?.reason == reason {
            faults[key]?.probeAt = now + Self.faultProbeInterval
            return
        }
        let fault = Fault(
            reason: reason, detail: HoldCause.fix(for: reason, tenant: tenant), since: Date(),
            probeAt: now + Self.faultProbeInterval)
        faults[key] = fault
        clearedFaults[key] = nil
        logger.error(
            "delivery stopped: configuration fault; notifications are held until it is fixed",
            metadata: [
                "tenant": "\(tenant)", "destination": "\(destination)", "reason": "\(reason)",
                "fix": "\(fault.detail)",
            ])
        // A master key this relay lacks is its own fault, not the tenant's: other relays may open the keys.
        guard reason != "no_master_key" && reason != "master_key_mismatch" else { return }
        do {
            try await store.recordProviderFault(
                ProviderFaultRecord(
                    tenantID: tenant, environment: destination.storedName, reason: reason, detail: fault.detail,
                    since: fault.since, relay: relayName))
        } catch {
            logger.warning("configuration fault not recorded", metadata: ["tenant": "\(tenant)", "error": "\(error)"])
        }
    }

    /// A send to `tenant`'s `destination` was delivered: a fault of it is over.
    func reportDelivered(tenant: String, destination: Destination) async {
        let key = PoolKey(tenant: tenant, destination: destination)
        guard faults[key] != nil else { return }
        await clearFault(key, why: "a notification was delivered")
    }

    /// Counts the notifications of a page that `tenant`'s `destination` refused for one device each, by reason
    /// (``DeviceRejections``): logged once per page, shown by the status view and readiness, and never a fault of
    /// the destination.
    func reportRejected(tenant: String, destination: Destination, reasons: [String: Int]) {
        let key = PoolKey(tenant: tenant, destination: destination)
        let now = Date()
        for (reason, count) in reasons {
            rejections[key, default: DeviceRejections()].record(reason, count: count, at: now)
        }
        logger.warning(
            "notifications refused for their devices, not retried",
            metadata: [
                "tenant": "\(tenant)", "destination": "\(destination)",
                "reasons":
                    "\(reasons.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))",
            ])
    }

    /// How long after its last refusal a reason stays in readiness's warnings.
    static let rejectionWarningWindow: TimeInterval = 3_600

    /// A line for each destination and reason refused in the last ``rejectionWarningWindow``: what readiness
    /// adds to its answer (the relay stays ready).
    func rejectionWarnings(now: Date) -> [String] {
        let keys = rejections.keys.sorted {
            ($0.tenant, $0.destination.storedName) < ($1.tenant, $1.destination.storedName)
        }
        return keys.flatMap { key in
            (rejections[key]?.recent(within: Self.rejectionWarningWindow, now: now) ?? []).map { refusals in
                "tenant \(key.tenant) \(key.destination.storedName): \(refusals.reason) for \(refusals.count) "
                    + "notification\(refusals.count == 1 ? "" : "s") since \(refusals.since.ISO8601Format()), the last "
                    + "at \(refusals.last.ISO8601Format()); \(DeviceRejections.fix(for: refusals.reason))"
            }
        }
    }

    /// Whether `tenant`'s `destination` is faulted now.
    func isFaulted(tenant: String, destination: Destination) -> Bool {
        faults[PoolKey(tenant: tenant, destination: destination)] != nil
    }

    /// Ends the fault of `key`: logged, removed from `provider_faults`, and its held notifications made due now.
    func clearFault(_ key: PoolKey, why: String) async {
        guard let fault = faults.removeValue(forKey: key) else { return }
        clearedFaults[key] = fault.reason
        logger.notice(
            "delivery resumed after a configuration fault",
            metadata: [
                "tenant": "\(key.tenant)", "destination": "\(key.destination)", "reason": "\(fault.reason)",
                "why": "\(why)",
            ])
        do {
            try await store.clearProviderFault(tenant: key.tenant, environment: key.destination.storedName)
            try await store.retryHeldPagesNow(tenant: key.tenant, environment: key.destination.storedName)
        } catch {
            logger.warning(
                "held notifications not made due; they wait for their backoff",
                metadata: ["tenant": "\(key.tenant)", "error": "\(error)"])
        }
    }

    /// Why no notification of a SEND to `tenant`'s `destinations` could ever be delivered now, or `nil` when one of
    /// them has a usable key: no key at all (``Pushrelay_V1_ErrorCode/noProviderKey``) or keys this relay cannot
    /// open (``Pushrelay_V1_ErrorCode/providerKeyUnreadable``). Answers from what it found in the last
    /// ``keyCheckLifetime`` seconds, so a SEND costs no key read.
    func sendRefusal(tenant: String, destinations: Set<Destination>) async -> ProtocolError? {
        let refusal = await keyRefusal(tenant: tenant, destinations: destinations)
        if refusal?.code != refusalsLogged[tenant] {
            if let refusal {
                logger.error(
                    "sends refused: no usable signing key",
                    metadata: ["tenant": "\(tenant)", "why": "\(refusal.message)"])
            }
            refusalsLogged[tenant] = refusal?.code
        }
        return refusal
    }

    private func keyRefusal(tenant: String, destinations: Set<Destination>) async -> ProtocolError? {
        guard !destinations.isEmpty else { return nil }
        var problems: [PoolUnavailable] = []
        for destination in destinations.sorted() {
            guard let problem = await keyProblem(PoolKey(tenant: tenant, destination: destination)) else { return nil }
            problems.append(problem)
        }
        let names = destinations.map(\.storedName).sorted().joined(separator: " and ")
        if let unreadable = problems.first(where: { $0.reason == "no_master_key" || $0.reason == "master_key_mismatch" }
        ) {
            return ProtocolError(
                .providerKeyUnreadable,
                "\(unreadable.message); nothing was sent (\(HoldCause.fix(for: unreadable.reason, tenant: tenant)))")
        }
        guard problems.allSatisfy({ $0.reason == "no_signing_key" }) else { return nil }
        return ProtocolError(
            .noProviderKey,
            "tenant \(tenant) has no APNs signing key for \(names), so nothing could be delivered; nothing was sent "
                + "(an operator adds one: pushrelay admin key add \(tenant) --p8 FILE --key-id ID --team-id TEAM)")
    }

    /// Why `key` has no usable signing key, in a sentence, or `nil` when it has one (for the status view).
    func sendRefusalProblem(_ key: PoolKey) async -> String? {
        await keyProblem(key)?.message
    }

    /// Whether `key` has a usable signing key (`nil`) or why not, as found in the last ``keyCheckLifetime``.
    private func keyProblem(_ key: PoolKey) async -> PoolUnavailable? {
        if pools[key] != nil, faults[key] == nil { return nil }
        let now = ContinuousClock.now
        if let check = keyChecks[key], now - check.at < Self.keyCheckLifetime { return check.problem }
        var problem: PoolUnavailable?
        do {
            _ = try await service(for: key.destination).credentialID(tenant: key.tenant, destination: key.destination)
        } catch {
            // A database that does not answer says nothing about the keys: the SEND is not refused for it.
            problem = error.isConfiguration ? error : nil
        }
        keyChecks[key] = (problem, now)
        return problem
    }

    /// Why the relay cannot open the stored signing keys of the enabled tenants, or `nil` when it can (or none
    /// are stored): no master key, or not the one that sealed them. Relay-wide, so readiness depends on it.
    /// Found again after ``keyCheckLifetime`` or a key change.
    package func sealedKeysProblem() async -> String? {
        let now = ContinuousClock.now
        if let check = sealedKeysCheck, now - check.at < Self.keyCheckLifetime { return check.problem }
        guard let tenants = try? await store.listTenants().filter(\.enabled) else { return sealedKeysCheck?.problem }
        var locked: [String] = []
        var unopened: [String] = []
        for tenant in tenants {
            guard let keys = try? await store.listSigningKeys(tenant: tenant.id) else {
                return sealedKeysCheck?.problem
            }
            guard keys.contains(where: { $0.status != .retired }) else { continue }
            guard let masterKey else {
                locked.append(tenant.id)
                continue
            }
            do {
                _ = try await store.loadSigningKeys(tenant: tenant.id, masterKey: masterKey)
            } catch  where error.code == .wrongMasterKey {
                unopened.append(tenant.id)
            } catch {
                if error.isTransient { return sealedKeysCheck?.problem }
            }
        }
        var problem: String?
        if !locked.isEmpty {
            problem =
                "no master key: the stored signing keys of \(locked.sorted().joined(separator: ", ")) cannot be "
                + "opened (give --master-key-file or PUSHRELAY_MASTER_KEY)"
        } else if !unopened.isEmpty {
            problem =
                "the master key does not open the stored signing keys of \(unopened.sorted().joined(separator: ", ")) "
                + "(it is not the master key that sealed them)"
        }
        if problem != sealedKeysCheck?.problem {
            if let problem {
                logger.error(
                    "stored signing keys cannot be opened; the relay is not ready", metadata: ["why": "\(problem)"])
            } else if sealedKeysCheck != nil {
                logger.notice("stored signing keys open again; the relay is ready")
            }
        }
        Gauge(label: RelayMetrics.sealedKeysUnreadableLabel).record(locked.count + unopened.count)
        sealedKeysCheck = (problem, now)
        return problem
    }

    /// Samples every built pool into the `pushrelay_pool_connections` (ready connections) and
    /// `pushrelay_pool_streams_in_flight` gauges, and each faulted destination into `pushrelay_provider_fault`
    /// (1 with its reason; 0 once cleared), by tenant and destination (label `environment`: an APNs environment, or
    /// another provider's name).
    package func recordMetrics() async {
        for (key, status) in await statuses() {
            let dimensions = [("tenant", key.tenant), ("environment", key.destination.storedName)]
            Gauge(label: RelayMetrics.poolConnectionsLabel, dimensions: dimensions).record(status.readyConnections)
            Gauge(label: RelayMetrics.poolStreamsLabel, dimensions: dimensions).record(status.inFlight)
        }
        for (key, fault) in faults {
            RelayMetrics.providerFault(
                tenant: key.tenant, environment: key.destination.storedName, reason: fault.reason, on: true)
        }
        for (key, reason) in clearedFaults {
            RelayMetrics.providerFault(
                tenant: key.tenant, environment: key.destination.storedName, reason: reason, on: false)
        }
        clearedFaults.removeAll()
        _ = await sealedKeysProblem()
    }
}

extension RelayMetrics {
    /// Each metric family's `# HELP` text. swift-metrics has no place for it (and swift-prometheus refuses a
    /// family registered with two different texts), so ``MetricsPage`` adds it to the exposition.
    static let help: [String: String] = [
        requestsLabel:
            "Requests answered, by kind and outcome (ok or the error code); frames refused before the service too.",
        notificationsLabel: "Delivery rows made by the fan-out, skips included, by tenant, outcome and reason.",
        apnsLatencyLabel: "Time from a send on an APNs pool to APNs' answer, retries included.",
        poolConnectionsLabel: "Ready HTTP/2 connections of each APNs pool.",
        poolStreamsLabel: "HTTP/2 streams in flight of each APNs pool.",
        sendWindowLabel: "Fan-out sends this process keeps in flight.",
        pagesDueLabel: "Fan-out pages due and not done, all relays together.",
        scheduledLagLabel: "How late the oldest due work nobody holds is.",
        writeBatchLabel: "Delivery rows per write.",
        holdsLabel: "Devices held for their provider (each retry round counts), by tenant and reason.",
        heldLabel: "Devices whose notification waits for its provider now, all relays together.",
        heldOldestLabel: "Seconds the oldest held notification of each tenant has waited.",
        providerFaultLabel: "1 while a tenant's destination is stopped by a configuration fault (its sends held).",
        sealedKeysUnreadableLabel: "Enabled tenants whose stored signing keys this relay's master key does not open.",
        sendsRefusedLabel: "SENDs refused because no usable signing key could serve them, by tenant and code.",
    ]
}

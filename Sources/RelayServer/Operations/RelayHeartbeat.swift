import Foundation
package import Logging
package import RelayStore

/// The node heartbeat, a part of the relay: this process's row in `relay_nodes`, so the relays on one database
/// share each tenant's rate between the live ones.
package struct RelayHeartbeat: Sendable {
    let store: RelayStore
    let logger: Logger

    /// A heartbeat in `store`, logging to `logger`.
    package init(store: RelayStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Beats relay `node`'s heartbeat in `relay_nodes` every `interval` and gives `share` what it saw (the
    /// live relays, each tenant's leased pages), until the calling task is cancelled; then removes the
    /// node's row, so the others take its share at their next beat. A failed beat keeps the last findings.
    /// `node` is the fan-out worker's lease owner name, so that the pages it holds are counted as its own.
    package func run(node: String, every interval: Duration = .seconds(2), share: RelayShare = .process) async {
        while !Task.isCancelled {
            do {
                let beat = try await store.heartbeat(node: node)
                if beat.liveRelays != share.liveRelays {
                    logger.info(
                        "live relays changed; each paces its share of the tenants' rates",
                        metadata: ["node": "\(node)", "relays": "\(beat.liveRelays)"]
                    )
                }
                share.update(beat)
            } catch {
                logger.warning("heartbeat failed", metadata: ["node": "\(node)", "error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
        // In a task of its own: this one is cancelled, and would cancel the query.
        let store = self.store
        let removal = Task { try await store.removeNode(node) }
        do {
            try await removal.value
        } catch {
            logger.warning("node row not removed", metadata: ["node": "\(node)", "error": "\(error)"])
        }
    }
}

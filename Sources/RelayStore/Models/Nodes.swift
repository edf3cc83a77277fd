import Foundation
import PostgresNIO

/// What one relay's heartbeat saw of the relays sharing its database.
package struct NodeHeartbeat: Sendable, Hashable {
    /// Relays that have beaten within ``RelayStore/nodeLiveness``, this one included (at least 1).
    package var liveRelays: Int
    /// Per tenant with pages being sent: the pages leased now.
    package var leasedPages: [String: LeasedPages]

    /// A heartbeat's findings.
    package init(liveRelays: Int, leasedPages: [String: LeasedPages]) {
        self.liveRelays = liveRelays
        self.leasedPages = leasedPages
    }
}

/// A tenant's pages whose lease is held now: by the relay that asked, and by every relay.
package struct LeasedPages: Sendable, Hashable {
    /// Pages leased by the relay that asked.
    package var mine: Int
    /// Pages leased by any relay.
    package var all: Int

    /// Counts of leased pages.
    package init(mine: Int, all: Int) {
        self.mine = mine
        self.all = all
    }
}

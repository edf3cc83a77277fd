package import RelayStore
import Synchronization

/// This process's share of each tenant's `notifications_per_second` among the relay processes on one
/// database, so that together they stay within it. A tenant whose pages are being sent is shared by demand:
/// a relay holding `mine` of the `all` pages leased for it paces at `rate × mine / all`, so a relay that
/// holds most of a job's pages gets most of the rate, and relays with no page of the tenant take none of it.
/// Until the heartbeat has seen this relay hold a page of the tenant, it paces at the rate divided by the
/// live relays (rounded down, at least 1). ``RelayHeartbeat/run(node:every:share:)`` keeps both
/// current from the heartbeats (`relay_nodes`) and page leases (`job_pages`) every 2 s; in between, shares
/// computed at different instants may add up to a little more than the rate.
package final class RelayShare: Sendable {
    private let state = Mutex<NodeHeartbeat>(NodeHeartbeat(liveRelays: 1, leasedPages: [:]))

    /// The share of the pacers of this process (a relay runs one per process).
    package static let process = RelayShare()

    /// A share of one relay: the whole rate, until told otherwise.
    package init() {}

    /// The live relays the rate is divided among (at least 1).
    package var liveRelays: Int {
        state.withLock { $0.liveRelays }
    }

    /// Takes a heartbeat's findings: the live relays (at least 1) and each tenant's leased pages.
    package func update(_ heartbeat: NodeHeartbeat) {
        var heartbeat = heartbeat
        heartbeat.liveRelays = max(1, heartbeat.liveRelays)
        state.withLock { $0 = heartbeat }
    }

    /// This relay's part of `tenant`'s `rate`: by its leased pages when it holds some, else `rate` / live
    /// relays; rounded down, at least 1.
    package func part(of rate: Int, tenant: String) -> Int {
        state.withLock { state in
            if let pages = state.leasedPages[tenant], pages.mine > 0, pages.all >= pages.mine {
                return max(1, rate * pages.mine / pages.all)
            }
            return max(1, rate / state.liveRelays)
        }
    }
}

import Foundation
import Logging
import Synchronization

/// Who may hold a connection: each tenant's authenticated connections within its cap; and the failed HELLOs, counted
/// per peer address and logged as a rate (a guesser or a misconfigured backend costs no log line per attempt). An
/// address that failed more than ``failuresPerWindow`` HELLOs in its window has its next HELLOs checked one at a
/// time, ``checkSpacing`` apart, however many connections it opens: a guesser gets 10 checks a second, not
/// thousands. (Behind a TCP load balancer every backend shares its address: they are slowed together while one of
/// them keeps failing.)
final class ConnectionAdmission: Sendable {
    /// The window over which a peer address's failed HELLOs are counted.
    static let failureWindow: Duration = .seconds(10)
    /// Failed HELLOs an address may make in one window before its HELLOs are slowed.
    static let failuresPerWindow = 20
    /// The time between two credential checks of a slowed address.
    static let checkSpacing: Duration = .milliseconds(100)
    /// Peer addresses remembered (the oldest window is forgotten beyond it).
    static let rememberedPeers = 10_000
    /// How often the failed HELLOs are summed up in the log.
    static let summaryInterval: Duration = .seconds(60)

    private struct Peer {
        var windowStart: ContinuousClock.Instant
        var failures: Int
        /// When the next check of a slowed address may run.
        var nextCheck: ContinuousClock.Instant?
    }

    private struct State {
        var tenants: [String: Int] = [:]
        var peers: [String: Peer] = [:]
        var failedSinceSummary = 0
        var addressesSinceSummary: Set<String> = []
        var lastSummary: ContinuousClock.Instant?
    }

    /// The most authenticated connections one tenant may hold on this relay.
    let maximumPerTenant: Int
    private let logger: Logger
    private let state = Mutex(State())

    /// Admission with a per-tenant cap of `maximumPerTenant`, logging its summaries to `logger`.
    init(maximumPerTenant: Int, logger: Logger) {
        self.maximumPerTenant = maximumPerTenant
        self.logger = logger
    }

    /// Takes one of `tenant`'s connections; `false` (nothing taken) when it holds its cap already.
    func admit(tenant: String) -> Bool {
        state.withLock { state in
            let held = state.tenants[tenant, default: 0]
            guard held < maximumPerTenant else { return false }
            state.tenants[tenant] = held + 1
            return true
        }
    }

    /// Gives back one of `tenant`'s connections.
    func release(tenant: String) {
        state.withLock { state in
            let held = state.tenants[tenant, default: 0] - 1
            state.tenants[tenant] = held > 0 ? held : nil
        }
    }

    /// `tenant`'s authenticated connections now.
    func connections(of tenant: String) -> Int {
        state.withLock { $0.tenants[tenant, default: 0] }
    }

    /// How long the HELLO of `peer` waits before its credential is checked: zero unless the address failed more
    /// than ``failuresPerWindow`` HELLOs in its window; then the checks are spaced ``checkSpacing`` apart.
    func checkDelay(for peer: String, now: ContinuousClock.Instant = .now) -> Duration {
        state.withLock { state in
            guard var known = state.peers[peer], now - known.windowStart < Self.failureWindow,
                known.failures >= Self.failuresPerWindow
            else { return .zero }
            let slot = max(now, known.nextCheck ?? now)
            known.nextCheck = slot + Self.checkSpacing
            state.peers[peer] = known
            return slot - now
        }
    }

    /// Counts a failed HELLO of `peer`; logs the failed HELLOs of the last ``summaryInterval`` (a rate, not a line
    /// each) when it has passed.
    func noteFailure(from peer: String, now: ContinuousClock.Instant = .now) {
        let summary: (failed: Int, addresses: Int, mostFromOne: Int)? = state.withLock { state in
            var known = state.peers[peer] ?? Peer(windowStart: now, failures: 0)
            if now - known.windowStart >= Self.failureWindow {
                known = Peer(windowStart: now, failures: 0, nextCheck: known.nextCheck)
            }
            known.failures += 1
            if state.peers[peer] == nil, state.peers.count >= Self.rememberedPeers,
                let oldest = state.peers.min(by: { $0.value.windowStart < $1.value.windowStart })?.key
            {
                state.peers[oldest] = nil
            }
            state.peers[peer] = known
            state.failedSinceSummary += 1
            state.addressesSinceSummary.insert(peer)
            // The first failure is logged at once; the others summed up every interval.
            if let last = state.lastSummary, now - last < Self.summaryInterval { return nil }
            defer {
                state.failedSinceSummary = 0
                state.addressesSinceSummary = []
                state.lastSummary = now
            }
            return (
                state.failedSinceSummary, state.addressesSinceSummary.count,
                state.peers.values.map(\.failures).max() ?? 0
            )
        }
        guard let summary else { return }
        logger.warning(
            "failed HELLOs",
            metadata: [
                "failed": "\(summary.failed)", "addresses": "\(summary.addresses)",
                "most_from_one_address_in_10s": "\(summary.mostFromOne)",
                "since_seconds": "\(Int(Self.summaryInterval.seconds))",
            ])
    }
}

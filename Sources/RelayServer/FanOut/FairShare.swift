import Foundation

/// The order in which one process takes its tenants' due work (pages for its page loops, jobs for its
/// planners): the tenant it served least lately goes first, so that one tenant's backlog never keeps another's
/// due page waiting for more than the time a loop takes to free up.
///
/// Weighted fair queueing by devices: each page a loop takes charges its tenant its devices divided by the
/// tenant's weight (`rate_limits.fanout_weight`, default 1); charges fade with a half-life, so a tenant is not
/// held back today for a fan-out it sent an hour ago. A tenant with no charge left is not in ``order(now:)`` and
/// goes before every tenant in it. A value on a clock passed in, as the APNs engine's state machines are.
struct FairShare: Sendable {
    /// How fast past service fades: after one half-life, half of it counts.
    let halfLife: Duration
    /// Each tenant's faded service as of the instant it was last brought up to date.
    private var served: [String: Service] = [:]

    private struct Service: Sendable {
        /// Weighted devices, faded to `at`.
        var devices: Double
        var at: ContinuousClock.Instant
    }

    /// Service below this many weighted devices is forgotten.
    private static let forgotten = 1.0

    /// A share where charges fade with `halfLife` (10 s by default: longer than a page, shorter than an outage).
    init(halfLife: Duration = .seconds(10)) {
        self.halfLife = halfLife
    }

    /// Charges `tenant` for a page of `devices` taken at `now`, divided by its `weight` (at least 1).
    mutating func charge(_ tenant: String, devices: Int, weight: Int, now: ContinuousClock.Instant) {
        let charge = Double(max(devices, 1)) / Double(max(weight, 1))
        let past = served[tenant].map { faded($0, to: now) } ?? 0
        served[tenant] = Service(devices: past + charge, at: now)
        if served.count > 64 {
            served = served.filter { faded($0.value, to: now) >= Self.forgotten }
        }
    }

    /// The tenants with service left at `now`, least served first (ties by name). Tenants not listed were not
    /// served lately and go before all of them.
    func order(now: ContinuousClock.Instant) -> [String] {
        served.map { (tenant: $0.key, devices: faded($0.value, to: now)) }
            .filter { $0.devices >= Self.forgotten }
            .sorted { ($0.devices, $0.tenant) < ($1.devices, $1.tenant) }
            .map(\.tenant)
    }

    /// `service` faded from its instant to `now`.
    private func faded(_ service: Service, to now: ContinuousClock.Instant) -> Double {
        guard now > service.at else { return service.devices }
        return service.devices * pow(0.5, (now - service.at).seconds / halfLife.seconds)
    }
}

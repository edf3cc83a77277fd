import APNs
import Foundation
import NIOCore
import RelayStore

/// An ``APNs/APNsPool`` behind the provider seam: each batch becomes the engine's requests (one hop to its event
/// loop), and each engine report a ``ProviderReport``.
final class APNsProviderPool: ProviderPool {
    let pool: APNsPool

    init(_ pool: APNsPool) {
        self.pool = pool
    }

    func send(
        _ requests: [ProviderRequest], rendering: any ProviderRendering,
        answer: @escaping @Sendable (Int, ProviderReport) -> Void
    ) {
        guard let rendering = rendering as? APNsRendering else {
            for index in requests.indices {
                answer(
                    index, ProviderReport(outcome: .configurationFault, reason: "not rendered for APNs", attempts: 0))
            }
            return
        }
        let notifications = requests.map { rendering.notification(to: $0.token, expiration: $0.expiration) }
        pool.send(notifications) { position, result in
            answer(position, Self.report(result))
        }
    }

    func status() async -> ProviderPoolStatus? {
        guard let snapshot = try? await pool.snapshot() else { return nil }
        return ProviderPoolStatus(snapshot)
    }

    func shutdown(gracePeriod: TimeAmount) async {
        await pool.shutdown(gracePeriod: gracePeriod)
    }

    /// The report of an engine answer: its outcome, `apns-id`, reason and Apple's timestamp, and the hold when
    /// APNs could not take the notification (the engine's retries spent) or refuses the tenant's configuration.
    /// An error instead of a report is the pool's (an outage) or a notification the engine refuses as invalid.
    static func report(_ result: Result<APNsDeliveryReport, any Error>) -> ProviderReport {
        switch result {
        case .success(let report):
            return ProviderReport(
                outcome: DeliveryOutcome(report.outcome), messageID: report.response?.apnsID,
                reason: report.response?.reason?.rawValue ?? report.failure.map { "\($0)" },
                timestamp: report.response?.timestampMilliseconds.map(Date.init(unixMilliseconds:)),
                retryAfter: nil, attempts: report.attempts, hold: hold(of: report))
        case .failure(let error as APNsPoolError):
            return ProviderReport(
                outcome: .retryLater, reason: "\(error)", attempts: 0, hold: .outage(reason: error.code.description))
        case .failure(let error):
            return ProviderReport(outcome: .configurationFault, reason: "\(error)", attempts: 0)
        }
    }

    /// The hold of an engine report, or `nil` when the report is final.
    private static func hold(of report: APNsDeliveryReport) -> HoldCause? {
        switch report.outcome {
        case .retryLater:
            let reason =
                report.response?.reason?.rawValue ?? report.failure?.code ?? report.response.map { "HTTP_\($0.status)" }
            return .outage(reason: reason ?? "unknown")
        case .configurationFault:
            guard let response = report.response, response.refusesConfiguration, let reason = response.reason else {
                return nil
            }
            return .configuration(reason: reason.rawValue)
        case .delivered, .tokenDead:
            return nil
        }
    }
}

extension ProviderPoolStatus {
    /// The status of an engine pool (APNs', or FCM's, which runs on the same engine) from its snapshot.
    init(_ snapshot: APNsPoolSnapshot) {
        self.init(
            connections: snapshot.connections.count, readyConnections: snapshot.connections.count(where: \.isReady),
            inFlight: snapshot.streamsInFlight, queued: snapshot.queued + snapshot.waiting)
    }
}

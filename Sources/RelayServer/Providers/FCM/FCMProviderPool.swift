import FCM
import Foundation
import NIOCore
import RelayStore

/// An ``FCM/FCMPool`` behind the provider seam: each batch becomes one `messages:send` body per token (the
/// rendering's, encoded once per job), and each engine report a ``ProviderReport``.
final class FCMProviderPool: ProviderPool {
    let pool: FCMPool

    init(_ pool: FCMPool) {
        self.pool = pool
    }

    func send(
        _ requests: [ProviderRequest], rendering: any ProviderRendering,
        answer: @escaping @Sendable (Int, ProviderReport) -> Void
    ) {
        guard let rendering = rendering as? FCMRendering else {
            for index in requests.indices {
                answer(
                    index, ProviderReport(outcome: .configurationFault, reason: "not rendered for FCM", attempts: 0))
            }
            return
        }
        let now = Date()
        let bodies = requests.map { rendering.body(to: $0.token, expiration: $0.expiration, now: now) }
        pool.send(bodies) { position, report in
            answer(position, Self.report(report))
        }
    }

    func status() async -> ProviderPoolStatus? {
        guard let snapshot = try? await pool.snapshot() else { return nil }
        return ProviderPoolStatus(snapshot)
    }

    func shutdown(gracePeriod: TimeAmount) async {
        await pool.shutdown(gracePeriod: gracePeriod)
    }

    /// The report of an engine report, by Google's error table: a delivered message's name is its id; a dead
    /// token is recorded and deactivated; 429 and 5xx still failing after the engine's retries, or no answer,
    /// hold the device as an outage (not before `Retry-After`); an account FCM or its token endpoint refuses
    /// (`PERMISSION_DENIED`, a token refused, 401 again after a new token) holds it as a configuration fault of the
    /// destination. `SENDER_ID_MISMATCH` and `THIRD_PARTY_AUTH_ERROR` concern the token (another project's, an iOS
    /// app's APNs credential at Firebase) and a message FCM refuses for its content fails again: they are
    /// recorded as configuration faults of that device, never retried.
    static func report(_ report: FCMDeliveryReport) -> ProviderReport {
        let attempts = report.attempts
        switch report.outcome {
        case .answered(.delivered(let name)):
            return ProviderReport(outcome: .delivered, messageID: name, attempts: attempts)
        case .answered(.tokenDead(let code)):
            return ProviderReport(outcome: .tokenDead, reason: code, timestamp: Date(), attempts: attempts)
        case .answered(.retryLater(let code, let retryAfter)):
            return ProviderReport(
                outcome: .retryLater, reason: code, retryAfter: retryAfter, attempts: attempts,
                hold: .outage(reason: code))
        case .answered(.configurationFault(let code)) where code == "PERMISSION_DENIED":
            return ProviderReport(
                outcome: .configurationFault, reason: code, attempts: attempts, hold: .configuration(reason: code))
        case .answered(.configurationFault(let code)):
            return ProviderReport(outcome: .configurationFault, reason: code, attempts: attempts)
        case .answered(.unauthenticated):
            return ProviderReport(
                outcome: .configurationFault, reason: "UNAUTHENTICATED", attempts: attempts,
                hold: .configuration(reason: "UNAUTHENTICATED"))
        case .answered(.rejected(let code, let message)):
            return ProviderReport(outcome: .configurationFault, reason: "\(code): \(message)", attempts: attempts)
        case .notSent(let reason, isConfiguration: true):
            return ProviderReport(
                outcome: .configurationFault, reason: reason, attempts: attempts,
                hold: .configuration(reason: "token_refused"))
        case .notSent(let reason, isConfiguration: false):
            return ProviderReport(
                outcome: .retryLater, reason: reason, attempts: attempts, hold: .outage(reason: "unreachable"))
        case .invalid(let reason):
            return ProviderReport(outcome: .configurationFault, reason: reason, attempts: attempts)
        }
    }
}

import Foundation
import Logging
import NIOCore
import PushRelayProtocol
import RelayStore
import Synchronization

@testable import RelayServer

/// A second push service that lives in the tests: it proves the provider seam by reaching its devices through the
/// same fan-out, policy, holds and records as APNs, with a rendering of its own. Its pool records every request and
/// answers by token: a token starting `dead:` is declared dead (with a timestamp a day ahead, so registrations
/// made during the test are older), `down:` is held as an outage, anything else is delivered.
struct RecordingService: PushService {
    /// The provider the tests register devices under.
    static let provider = PushProvider(rawValue: "recording")

    /// What the pool was asked to send, in order.
    let pool = RecordingPool()

    var provider: PushProvider { Self.provider }

    func destinations(
        of type: TenantConfiguration.NotificationType, tenant: TenantConfiguration
    ) -> Set<Destination> {
        [Destination(provider: Self.provider)]
    }

    func render(
        _ request: Pushrelay_V1_Send, plan: SendPlan, type: TenantConfiguration.NotificationType
    ) throws(ProtocolError) -> (any ProviderRendering)? {
        RecordingRendering(
            notificationType: plan.notificationType, title: request.alert.title, body: request.alert.body,
            threadID: plan.threadID, data: request.templateValues)
    }

    func credentialID(tenant: String, destination: Destination) async throws(PoolUnavailable) -> String {
        "recording-credential"
    }

    func makePool(
        tenant: String, destination: Destination, logger: Logger
    ) async throws -> (pool: any ProviderPool, credentialID: String) {
        (pool, "recording-credential")
    }
}

/// The recording provider's rendering: the neutral parts of the notification, as a data message would carry them.
struct RecordingRendering: ProviderRendering, Hashable {
    var notificationType: String
    var title: String
    var body: String
    var threadID: String?
    var data: [String: String]
}

/// One request the recording pool received.
struct RecordedRequest: Sendable, Hashable {
    var token: String
    var rendering: RecordingRendering
    var expiration: Int64?
}

/// The recording provider's pool: it records each request and answers it at once, from another thread.
final class RecordingPool: ProviderPool {
    private let recorded = Mutex<[RecordedRequest]>([])
    private let sent = Atomic<Int>(0)

    /// Every request so far.
    var requests: [RecordedRequest] { recorded.withLock { $0 } }

    func send(
        _ requests: [ProviderRequest], rendering: any ProviderRendering,
        answer: @escaping @Sendable (Int, ProviderReport) -> Void
    ) {
        guard let rendering = rendering as? RecordingRendering else {
            for index in requests.indices {
                answer(index, ProviderReport(outcome: .configurationFault, reason: "not rendered", attempts: 0))
            }
            return
        }
        recorded.withLock { recorded in
            recorded += requests.map {
                RecordedRequest(token: $0.token, rendering: rendering, expiration: $0.expiration)
            }
        }
        let reports = requests.map { request -> ProviderReport in
            let number = sent.add(1, ordering: .relaxed).newValue
            let id = "recording/messages/\(number)"
            if request.token.hasPrefix("dead:") {
                return ProviderReport(
                    outcome: .tokenDead, messageID: id, reason: "UNREGISTERED",
                    timestamp: Date().addingTimeInterval(86_400), attempts: 1)
            }
            if request.token.hasPrefix("down:") {
                return ProviderReport(
                    outcome: .retryLater, reason: "UNAVAILABLE", attempts: 1, hold: .outage(reason: "UNAVAILABLE"))
            }
            return ProviderReport(outcome: .delivered, messageID: id, attempts: 1)
        }
        // Answered from another thread, as an engine's event loop answers.
        Thread.detachNewThread {
            for (index, report) in reports.enumerated() { answer(index, report) }
        }
    }

    func status() async -> ProviderPoolStatus? {
        ProviderPoolStatus(connections: 1, readyConnections: 1, inFlight: 0, queued: 0)
    }

    func shutdown(gracePeriod: TimeAmount) async {}
}

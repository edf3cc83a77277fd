import APNs
import FCM
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import _CryptoExtras

@testable import FCMSimulator

/// The FCM engine (``FCMPool``) against the simulator: one access token per account, Google's answers read by its
/// error table, a refused token fetched again once, retries within the deadline.
@Suite("FCM engine against the simulator")
struct FCMPoolTests {
    /// A pool of `account` sending to `simulator`, started, shut down after `body`.
    static func withPool(
        _ simulator: FCMSimulator, account json: Data,
        configure: (inout FCMPoolConfiguration) -> Void = { _ in },
        _ body: (FCMPool) async throws -> Void
    ) async throws {
        var configuration = FCMPoolConfiguration(
            account: try FCMServiceAccount(json: json), endpoint: APNsEndpoint(host: "127.0.0.1", port: simulator.port),
            caFile: simulator.caFile)
        configuration.messages.connections = 1
        configure(&configuration)
        let pool = try FCMPool(configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next())
        do {
            try await pool.start()
            try await body(pool)
        } catch {
            await pool.shutdown(gracePeriod: .zero)
            throw error
        }
        await pool.shutdown(gracePeriod: .seconds(1))
    }

    /// The reports of `bodies`, in their order.
    static func send(_ pool: FCMPool, _ bodies: [HTTP2Request.Body]) async -> [FCMDeliveryReport] {
        let reports = Mutex([Int: FCMDeliveryReport]())
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            pool.send(bodies) { position, report in
                let count = reports.withLock {
                    $0[position] = report
                    return $0.count
                }
                if count == bodies.count { done.resume() }
            }
        }
        return reports.withLock { all in bodies.indices.map { all[$0]! } }
    }

    /// The body to `token` as the relay sends it: a template's bytes, the token inserted by the engine.
    static func body(_ token: String) -> HTTP2Request.Body {
        FCMMessage(notification: .init(title: "New event", body: "Picnic"), data: ["type": "event_created"])
            .bodyTemplate().body(to: token)
    }

    @Test func manyMessagesGoWithOneAccessTokenAndAreNamed() async throws {
        try await withSimulator { simulator in
            let json = try simulator.makeServiceAccount(projectID: "dispo-app")
            try await Self.withPool(simulator, account: json) { pool in
                let reports = await Self.send(pool, (0..<60).map { Self.body("token-\($0):APA91b") })
                for report in reports {
                    guard case .answered(.delivered(let name)) = report.outcome else {
                        Issue.record("not delivered: \(report)")
                        continue
                    }
                    #expect(name.hasPrefix("projects/dispo-app/messages/") && report.attempts == 1)
                }
                let email = try FCMServiceAccount(json: json).clientEmail
                #expect(simulator.statistics().accessTokens(issuedTo: email) == 1)
                let fetched = try await pool.accessTokensFetched()
                #expect(fetched == 1)
                let received = simulator.receivedMessages()
                #expect(Set(received.compactMap(\.token)) == Set((0..<60).map { "token-\($0):APA91b" }))
                #expect(
                    received.allSatisfy { $0.data["type"] == "event_created" && $0.notification?.title == "New event" })
            }
        }
    }

    @Test func aRefusedAccessTokenIsFetchedAgainOnceAndTheMessageGoesAgain() async throws {
        try await withSimulator { simulator in
            let json = try simulator.makeServiceAccount(projectID: "dispo-app")
            try await Self.withPool(simulator, account: json) { pool in
                simulator.revokeAccessTokens()
                let reports = await Self.send(pool, [Self.body("after-revoke:APA91b")])
                guard case .answered(.delivered) = reports[0].outcome else {
                    Issue.record("not delivered after a new token: \(reports[0])")
                    return
                }
                #expect(reports[0].attempts == 2)
                let fetched = try await pool.accessTokensFetched()
                #expect(fetched == 2)
                #expect(simulator.statistics().responses(errorCode: "UNAUTHENTICATED") == 1)
            }
        }
    }

    @Test func googlesAnswersAreReadByItsErrorTable() async throws {
        try await withSimulator { simulator in
            simulator.updateFaults {
                $0.unregisteredTokens = ["gone:APA91b"]
                $0.invalidTokens = ["bad:APA91b"]
                $0.senderIDMismatchTokens = ["other:APA91b"]
                $0.thirdPartyAuthErrorTokens = ["ios:APA91b"]
            }
            let json = try simulator.makeServiceAccount(projectID: "dispo-app")
            try await Self.withPool(simulator, account: json) { pool in
                let reports = await Self.send(
                    pool, ["gone:APA91b", "bad:APA91b", "other:APA91b", "ios:APA91b"].map(Self.body))
                #expect(reports[0].outcome == .answered(.tokenDead(errorCode: "UNREGISTERED")))
                #expect(reports[1].outcome == .answered(.tokenDead(errorCode: "INVALID_ARGUMENT")))
                #expect(reports[2].outcome == .answered(.configurationFault(errorCode: "SENDER_ID_MISMATCH")))
                #expect(reports[3].outcome == .answered(.configurationFault(errorCode: "THIRD_PARTY_AUTH_ERROR")))
                #expect(reports.allSatisfy { $0.attempts == 1 })
            }
        }
    }

    @Test func unavailableIsRetriedWithinTheDeadlineNotBeforeRetryAfter() async throws {
        try await withSimulator { simulator in
            let json = try simulator.makeServiceAccount(projectID: "dispo-app")
            try await Self.withPool(
                simulator, account: json,
                configure: {
                    // Three attempts a second apart fit well within it, on a machine as loaded as the test
                    // command makes it.
                    $0.messages.requestTimeout = .seconds(30)
                    $0.messages.maximumAttempts = 3
                }
            ) { pool in
                simulator.updateFaults {
                    $0.rate503 = 1
                    $0.retryAfter503 = 1
                }
                let started = ContinuousClock.now
                let reports = await Self.send(pool, [Self.body("busy:APA91b")])
                let waited = ContinuousClock.now - started
                #expect(reports[0].outcome == .answered(.retryLater(errorCode: "UNAVAILABLE", retryAfter: .seconds(1))))
                // Three attempts, a second apart at least: Retry-After, not the 100 ms backoff.
                #expect(reports[0].attempts == 3 && waited >= .seconds(2))
                simulator.updateFaults { $0.rate503 = 0 }
                let after = await Self.send(pool, [Self.body("busy:APA91b")])
                guard case .answered(.delivered) = after[0].outcome else {
                    Issue.record("not delivered once FCM was back: \(after[0])")
                    return
                }
            }
        }
    }

    @Test func anAccountTheTokenEndpointRefusesFailsTheStartAsAConfigurationFault() async throws {
        try await withSimulator { simulator in
            // Google's file for an account the simulator does not know (a deleted key).
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let fields: [String: String] = [
                "type": "service_account", "project_id": "dispo-app", "private_key_id": "deadbeef",
                "private_key": key.pemRepresentation, "client_email": "gone@dispo-app.iam.gserviceaccount.com",
                "token_uri": simulator.tokenURI,
            ]
            let json = try JSONSerialization.data(withJSONObject: fields)
            let error = await #expect(throws: FCMCredentialError.self) {
                try await Self.withPool(simulator, account: json) { _ in }
            }
            #expect(error?.code == .tokenRefused)
            #expect(error?.description.contains("invalid_grant") == true)
            #expect(error?.description.contains(key.pemRepresentation) == false)
        }
    }
}

import FCM
import FCMSimulator
import Foundation
import Logging
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// A tenant's FCM service account as the relay uses it: stored sealed (RelayStoreTests' credential kinds show the
    /// rows), used by the running relay, replaced by a rotation without a restart, and never in a log.
    @Suite struct FCMCredentialTests {
        /// The account of `json` as `pushrelay admin key add --fcm-service-account` stores it.
        static func credential(_ json: Data) throws -> CheckedCredential {
            let account = try FCMServiceAccount(json: json)
            return CheckedCredential(
                kind: .fcmServiceAccount, keyID: account.privateKeyID, teamID: account.projectID,
                fingerprint: RelayStore.fingerprint(publicKeyDER: account.publicKeyDER), material: json)
        }

        @Test func aStoredAccountIsSealedUsedAndRotatedWhileTheRelayRunsAndNeverLogged() async throws {
            let lines = CapturedLines()
            var logger = Logger(label: "pushrelay") { _ in CapturingLogHandler(lines: lines) }
            logger.logLevel = .trace
            let keys = CapturedLines()
            try await RelayHarness.with(fcm: true, backgroundParts: true, logger: logger) { relay in
                let fcm = try #require(relay.fcm)
                let first = try fcm.makeServiceAccount(projectID: "dispo-app", clientEmail: "first@dispo-app.iam")
                let second = try fcm.makeServiceAccount(projectID: "dispo-app", clientEmail: "second@dispo-app.iam")
                for json in [first, second] {
                    let object = try JSONSerialization.jsonObject(with: json) as? [String: Any]
                    keys.append(try #require(object?["private_key"] as? String))
                }
                let stored = try await relay.store.addSigningKey(
                    tenant: "dispo", credential: Self.credential(first), masterKey: relay.masterKey)
                #expect(stored.kind == .fcmServiceAccount && stored.teamID == "dispo-app")

                let client = relay.client("dispo")
                _ = try await client.registerDevice(FCMEndToEndTests.android(user: "bob", token: "bob:APA91bBob"))
                let sent = try await client.send(FCMEndToEndTests.event("event_created", to: ["bob"]))
                #expect(sent.outcomes.map(\.outcome) == ["delivered"])
                #expect(fcm.statistics().accessTokens(issuedTo: "first@dispo-app.iam") == 1)

                // A rotation reaches the running relay: its pool is rebuilt with the new account.
                _ = try await relay.store.rotateSigningKey(
                    tenant: "dispo", oldKeyID: stored.keyID, credential: Self.credential(second),
                    masterKey: relay.masterKey)
                let rotated = await eventually {
                    guard let again = try? await client.send(FCMEndToEndTests.event("event_created", to: ["bob"]))
                    else { return false }
                    return again.outcomes.map(\.outcome) == ["delivered"]
                        && fcm.statistics().accessTokens(issuedTo: "second@dispo-app.iam") == 1
                }
                #expect(rotated)
                let old = try await relay.store.listSigningKeys(tenant: "dispo").first { $0.keyID == stored.keyID }
                #expect(await eventually { old?.status != .active })
                await client.close()
            }
            let captured = lines.all
            #expect(captured.count > 10)
            let forbidden = keys.all.flatMap(pemBodyLines) + ["BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY"]
            for line in captured {
                for secret in forbidden where line.contains(secret) {
                    Issue.record("a log line holds a service account's private key: \(line.prefix(120))")
                }
            }
        }
    }
}

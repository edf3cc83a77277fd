import APNs
import Crypto
import Foundation
import PostgresNIO
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

extension RelayServerSuites {
    /// A running relay picks up `admin key` changes through LISTEN/NOTIFY: only the changed tenant's pool is
    /// rebuilt, new sends are signed with the new key, and the rotated key is retired after its in-flight work.
    @Suite struct KeyChangeTests {
        @Test func rotatingAKeyRebuildsOnlyThatTenantsPoolAndRetiresTheOldKey() async throws {
            let old = P256.Signing.PrivateKey()
            let new = P256.Signing.PrivateKey()
            let oldKey = try APNsSigningKey(privateKey: old, keyID: "ROTATEOLD1", teamID: "CIRCLTEAM1")
            let newKey = try APNsSigningKey(privateKey: new, keyID: "ROTATENEW1", teamID: "CIRCLTEAM1")
            let (oldPEM, newPEM) = (old.pemRepresentation, new.pemRepresentation)
            try await RelayHarness.with(simulatorKeys: [oldKey, newKey]) { relay in
                try await relay.store.addSigningKey(
                    tenant: "circl", p8PEM: oldPEM, keyID: "ROTATEOLD1", teamID: "CIRCLTEAM1",
                    masterKey: relay.masterKey
                )
                let client = relay.client("circl")
                let family = relay.client("familyportal")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                _ = try await family.registerDevice(registration(user: "mum", token: randomToken(), topics: ["chat"]))
                var chat = Pushrelay_V1_Send()
                chat.notificationType = "chat_message"
                chat.userIds = ["mum"]
                chat.alert.body = "hi"
                chat.wait = true
                #expect(try await family.send(chat).job.delivered == 1)
                #expect(try await client.send(circlMessage(to: ["ada"])).job.delivered == 1)
                #expect(relay.simulator.receivedRequests().last?.keyID == "ROTATEOLD1")

                let listener = Task { await relay.pools.followKeyChanges() }
                defer { listener.cancel() }
                // A notification sent before the listener's LISTEN is not seen: wait until its session has run it.
                _ = try await eventually { try await listenerSessions(relay) >= 1 }
                try #require(try await listenerSessions(relay) == 1)
                try await relay.store.rotateSigningKey(
                    tenant: "circl", oldKeyID: "ROTATEOLD1", p8PEM: newPEM, keyID: "ROTATENEW1",
                    teamID: "CIRCLTEAM1", masterKey: relay.masterKey
                )
                #expect(await eventually { await relay.pools.rebuildCount(tenant: "circl") > 0 })
                #expect(try await client.send(circlMessage(to: ["ada"])).job.delivered == 1)
                #expect(relay.simulator.receivedRequests().last?.keyID == "ROTATENEW1")
                #expect(await relay.pools.rebuildCount(tenant: "familyportal") == 0)
                #expect(try await family.send(chat).job.delivered == 1)

                func statuses() async throws -> [String: SigningKeyStatus] {
                    Dictionary(
                        uniqueKeysWithValues: try await relay.store.listSigningKeys(tenant: "circl").map {
                            ($0.keyID, $0.status)
                        }
                    )
                }
                _ = try await eventually { try await statuses()["ROTATEOLD1"] == .retired }
                #expect(try await statuses() == ["ROTATEOLD1": .retired, "ROTATENEW1": .active])
                // Retiring the old key changed nothing the pool signs with: no second rebuild.
                #expect(await relay.pools.rebuildCount(tenant: "circl") == 1)
                await client.close()
                await family.close()
            }
        }

        /// Database sessions whose last statement was a LISTEN, done (it takes effect at its commit): the relay's key
        /// change listener, once it listens.
        private func listenerSessions(_ relay: RelayHarness) async throws -> Int {
            var sessions = 0
            for try await count in try await relay.store.client.query(
                "SELECT count(*)::int8 FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND state = 'idle'"
            ).decode(Int.self) {
                sessions = count
            }
            return sessions
        }
    }
}

import APNs
import APNsSimulator
import Crypto
import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

extension RelayServerSuites {
    /// Outages and configuration faults hold notifications durably instead of failing them, and say so: an APNs
    /// that is away, a notification that expires while held, a tenant without a key, a master key that does not
    /// open the stored keys, a key APNs refuses, a disabled tenant.
    @Suite struct OutageTests {
        @Test func anOutageHoldsTheNotificationAndItIsDeliveredOnceAPNsIsBack() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let token = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: token))
                #expect(try await client.send(circlMessage(to: ["ada"])).job.delivered == 1)

                let events = try await client.subscribeResults(receipts: false)
                try await relay.simulator.shutdown()
                let answer = try await client.send(circlMessage(to: ["ada"]))
                // The results stream says the job's device waits, why, and when it is tried next.
                var held: Pushrelay_V1_HeldDevices?
                for await event in events {
                    if case .held(let devices) = event.event {
                        held = devices
                        break
                    }
                }
                #expect(held?.jobID == answer.jobID && held?.devices == 1)
                #expect(["connect_failed", "connection_lost"].contains(held?.reason ?? ""))
                #expect((held?.nextAttemptMs ?? 0) > Int64(Date().timeIntervalSince1970 * 1000) - 1_000)
                let outcome = try #require(answer.outcomes.first)
                #expect(outcome.outcome == "waiting")
                #expect(["connect_failed", "connection_lost"].contains(outcome.reason))
                let waiting = try await client.jobStatus(jobID: answer.jobID)
                #expect(waiting.state == .running)
                #expect(waiting.waiting == 1)
                #expect(["connect_failed", "connection_lost"].contains(waiting.waitingReason))
                let stored = try await relay.store.heldDeliveries()
                #expect(stored.map(\.devices) == [1])
                #expect(stored.first?.tenantID == "circl")

                let back = try await relay.startSimulatorAgain()
                let delivered = await eventually(within: 90) {
                    (try? await client.jobStatus(jobID: answer.jobID).state) == .completed
                }
                try await back.shutdown()
                #expect(delivered)
                let done = try await client.jobStatus(jobID: answer.jobID)
                #expect(done.delivered == 1 && done.failed == 0 && done.waiting == 0)
                #expect(back.receivedRequests().filter { $0.deviceToken == token }.count == 1)
                #expect(try await relay.store.heldDeliveries().isEmpty)
                await client.close()
            }
        }

        @Test func aNotificationHeldPastItsExpirationIsRecordedExpired() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                #expect(try await client.send(circlMessage(to: ["ada"])).job.delivered == 1)
                try await relay.simulator.shutdown()
                var send = circlMessage(to: ["ada"])
                send.expiration = Int64(Date().timeIntervalSince1970) + 3
                let answer = try await client.send(send)
                #expect(answer.outcomes.first?.outcome == "waiting")
                let finished = await eventually(within: 30) {
                    (try? await client.jobStatus(jobID: answer.jobID).state) == .completed
                }
                #expect(finished)
                let job = try await client.jobStatus(jobID: answer.jobID)
                #expect(job.failed == 1 && job.delivered == 0 && job.waiting == 0)
                var query = Pushrelay_V1_QueryDeliveries()
                query.jobID = answer.jobID
                let rows = try await client.queryDeliveries(query)
                #expect(rows.deliveries.map(\.outcome) == ["expired"])
                #expect(["connect_failed", "connection_lost"].contains(rows.deliveries.first?.reason ?? ""))
                await client.close()
            }
        }

        @Test func aTenantWithoutASigningKeyIsRefusedAtSendNamingTheFix() async throws {
            try await RelayHarness.with(configureRelay: { $0.target.fallbackKeys["anky"] = nil }) { relay in
                let client = relay.client("anky")
                _ = try await client.registerDevice(registration(user: "sam", token: randomToken()))
                var send = Pushrelay_V1_Send()
                send.notificationType = "daily_prompt"
                send.userIds = ["sam"]
                send.alert.body = "Write"
                do {
                    _ = try await client.send(send)
                    Issue.record("a send no key can serve was accepted")
                } catch let error as PushRelayClientError {
                    guard let refusal = error.relayError else { throw error }
                    #expect(refusal.code == .noProviderKey)
                    #expect(refusal.message.contains("anky") && refusal.message.contains("admin key add"))
                }
                let status = await relay.readiness.status()
                let anky = try #require(status.tenants.first { $0.tenant == "anky" })
                #expect(anky.environments.allSatisfy { $0.keyProblem?.contains("no APNs signing key") == true })
                #expect(status.ready)
                // Other tenants are untouched.
                let circl = relay.client("circl")
                _ = try await circl.registerDevice(registration(user: "ada", token: randomToken()))
                #expect(try await circl.send(circlMessage(to: ["ada"])).job.delivered == 1)
                await client.close()
                await circl.close()
            }
        }

        @Test func aWrongMasterKeyMakesTheRelayNotReadyAndItsSendsAreRefused() async throws {
            let signingPEM = P256.Signing.PrivateKey().pemRepresentation
            let sealing = MasterKey.generate()
            try await RelayHarness.with(configureRelay: { $0.masterKey = MasterKey.generate() }) { relay in
                try await relay.store.addSigningKey(
                    tenant: "circl", p8PEM: signingPEM, keyID: "SEALEDKEY1", teamID: "CIRCLTEAM1",
                    masterKey: sealing)
                let reason = try #require(await relay.readiness.notReadyReason())
                #expect(reason.contains("does not open") && reason.contains("circl"))
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                let code = await errorCode { try await client.send(circlMessage(to: ["ada"])) }
                #expect(code == .providerKeyUnreadable)
                await client.close()
            }
        }

        @Test func aKeyAPNsRefusesHoldsTheTenantsNotificationsUntilARotationResumesThem() async throws {
            let good = P256.Signing.PrivateKey()
            let goodKey = try APNsSigningKey(privateKey: good, keyID: "GOODKEY001", teamID: "CIRCLTEAM1")
            let wrongPEM = P256.Signing.PrivateKey().pemRepresentation
            let goodPEM = good.pemRepresentation
            try await RelayHarness.with(simulatorKeys: [goodKey]) { relay in
                // A key the simulator does not know: APNs answers InvalidProviderToken.
                try await relay.store.addSigningKey(
                    tenant: "circl", p8PEM: wrongPEM, keyID: "WRONGKEY01", teamID: "CIRCLTEAM1",
                    masterKey: relay.masterKey)
                let listener = Task { await relay.pools.followKeyChanges() }
                defer { listener.cancel() }
                let client = relay.client("circl")
                let token = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: token))
                let answer = try await client.send(circlMessage(to: ["ada"]))
                #expect(answer.outcomes.map(\.outcome) == ["waiting"])
                #expect(answer.outcomes.first?.reason == "InvalidProviderToken")
                let faults = try await relay.store.providerFaults()
                #expect(faults.map(\.reason) == ["InvalidProviderToken"])
                let status = await relay.readiness.status()
                let production = status.tenants.first { $0.tenant == "circl" }?.environments
                    .first { $0.environment == "production" }
                #expect(production?.state == "faulted")
                #expect(production?.fault?.fix.contains("key id") == true)
                // Further sends are held without reaching APNs.
                let sentBefore = relay.requests(to: token).count
                let second = try await client.send(circlMessage(to: ["ada"]))
                #expect(second.outcomes.first?.outcome == "waiting")
                #expect(relay.requests(to: token).count == sentBefore)

                try await relay.store.rotateSigningKey(
                    tenant: "circl", oldKeyID: "WRONGKEY01", p8PEM: goodPEM, keyID: "GOODKEY001",
                    teamID: "CIRCLTEAM1", masterKey: relay.masterKey)
                let resumed = await eventually(within: 60) {
                    let first = try? await client.jobStatus(jobID: answer.jobID)
                    let next = try? await client.jobStatus(jobID: second.jobID)
                    return first?.delivered == 1 && next?.delivered == 1
                }
                #expect(resumed)
                #expect(try await relay.store.providerFaults().isEmpty)
                #expect(relay.requests(to: token).last?.keyID == "GOODKEY001")
                await client.close()
            }
        }

        @Test func aDisabledTenantsScheduledJobWaitsAndIsDeliveredOnlyOnceEnabled() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let token = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: token))
                var send = circlMessage(to: ["ada"], wait: false)
                send.sendAtMs = Int64(Date().timeIntervalSince1970 * 1000) + 1_000
                let answer = try await client.send(send)
                await client.close()
                try await relay.store.setTenantEnabled(id: "circl", enabled: false)
                try await Task.sleep(for: .seconds(3))
                #expect(relay.requests(to: token).isEmpty)
                #expect(try await relay.store.job(tenant: "circl", id: answer.jobID)?.state == .scheduled)
                try await relay.store.setTenantEnabled(id: "circl", enabled: true)
                let delivered = await eventually(within: 30) { !relay.requests(to: token).isEmpty }
                #expect(delivered)
                #expect(relay.requests(to: token).count == 1)
            }
        }
    }
}

import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayServer
import Testing

extension RelayServerSuites {
    /// A circl credential cannot register, send to, read, mute or subscribe to anything of familyportal, and
    /// the other way round.
    @Suite struct TenantIsolationTests {
        @Test func oneTenantsCredentialReachesOnlyItsOwnData() async throws {
            try await RelayHarness.with { relay in
                let circl = relay.client("circl")
                let family = relay.client("familyportal")
                let circlEvents = try await circl.subscribeResults(receipts: true)
                let familyEvents = try await family.subscribeResults(receipts: true)
                let token = randomToken()
                _ = try await family.registerDevice(registration(user: "mum", token: token, topics: ["chat"]))
                var mute = Pushrelay_V1_SetMute()
                mute.userID = "mum"
                mute.scope = "family-1"
                _ = try await family.setMute(mute)
                var chat = Pushrelay_V1_Send()
                chat.notificationType = "chat_message"
                chat.userIds = ["mum"]
                chat.alert.body = "hi"
                chat.wait = true
                let familyJob = try await family.send(chat)
                #expect(familyJob.job.delivered == 1)

                // Reading: familyportal's user, devices, job, deliveries and mutes are not found by circl.
                #expect(try await circl.listDevices(userID: "mum").devices.isEmpty)
                #expect(await errorCode { try await circl.jobStatus(jobID: familyJob.jobID) } == .notFound)
                var byJob = Pushrelay_V1_QueryDeliveries()
                byJob.jobID = familyJob.jobID
                #expect(try await circl.queryDeliveries(byJob).deliveries.isEmpty)
                var byToken = Pushrelay_V1_QueryDeliveries()
                byToken.token = token
                #expect(try await circl.queryDeliveries(byToken).deliveries.isEmpty)
                #expect(try await circl.mutes(userID: "mum").mutes.isEmpty)

                // Sending: circl cannot reach familyportal's user or token, nor use its topic or type.
                let toUser = try await circl.send(circlMessage(to: ["mum"]))
                #expect(toUser.outcomes.map(\.reason) == ["no_device"])
                var toToken = circlMessage(to: [])
                toToken.tokens = [Pushrelay_V1_TokenTarget.with { $0.token = token }]
                // Another tenant's token is no device of circl's: skipped as such, nothing sent.
                #expect(try await circl.send(toToken).outcomes.map(\.reason) == ["no_device"])
                var toTopic = circlMessage(to: [])
                toTopic.topic = "chat"
                #expect(await errorCode { try await circl.send(toTopic) } == .invalidArgument)
                #expect(await errorCode { try await circl.send(chat) } == .invalidArgument)
                #expect(relay.simulator.statistics().requestsReceived == 1)

                // Changing: circl's register, unregister, mute and preferences touch circl's rows only.
                _ = try await circl.registerDevice(registration(user: "intruder", token: token))
                var unregister = Pushrelay_V1_UnregisterDevice()
                unregister.userID = "mum"
                unregister.platform = "ios"
                #expect(try await circl.unregisterDevice(unregister).removed == 0)
                var clear = Pushrelay_V1_ClearMute()
                clear.userID = "mum"
                clear.scope = "family-1"
                #expect(try await circl.clearMute(clear).removed == 0)
                let familyDevices = try await family.listDevices(userID: "mum").devices
                #expect(familyDevices.map(\.token) == [token])
                #expect(familyDevices.allSatisfy { $0.active })
                #expect(try await family.mutes(userID: "mum").mutes.map(\.scope) == ["family-1"])
                #expect(try await family.listDevices(userID: "intruder").devices.isEmpty)

                // Subscribing: circl's stream saw none of familyportal's receipts; familyportal's saw its own.
                var familyIterator = familyEvents.makeAsyncIterator()
                let familyReceipt = await familyIterator.next()
                if case .receipt(let receipt) = familyReceipt?.event {
                    #expect(receipt.jobID == familyJob.jobID)
                } else {
                    Issue.record("familyportal's stream did not get its receipt")
                }
                await circl.close()
                var circlIterator = circlEvents.makeAsyncIterator()
                #expect(await circlIterator.next() == nil)
                await family.close()
            }
        }
    }
}

import FCM
import FCMSimulator
import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// dispo through FCM, end to end against the in-tree FCM simulator (Tenants/dispo.yaml maps its types to FCM
    /// messages): its group fan-out and comments, a refreshed token, a dead token, and each of Google's answers.
    @Suite struct FCMEndToEndTests {
        static func android(user: String, token: String) -> Pushrelay_V1_RegisterDevice {
            var request = Pushrelay_V1_RegisterDevice()
            request.userID = user
            request.token = token
            request.platform = "android"
            request.provider = "fcm"
            request.timeZone = "Europe/Berlin"
            return request
        }

        /// A dispo send of `type` about event `eventID` to `users` but `excluding`, waiting for the outcomes.
        static func event(
            _ type: String, to users: [String], excluding: [String] = [], eventID: String = "e42"
        ) -> Pushrelay_V1_Send {
            var send = Pushrelay_V1_Send()
            send.notificationType = type
            send.userIds = users
            send.excludeUserIds = excluding
            send.templateValues = ["event_id": eventID]
            send.alert = .with {
                $0.title = type == "event_created" ? "New event: Picnic" : "Ada commented"
                $0.body = type == "event_created" ? "Saturday 12:00 at the lake" : "I'll bring the cake"
            }
            send.wait = true
            return send
        }

        @Test func aNewEventReachesTheGroupButItsCreatorAndACommentItsCreatorOnly() async throws {
            try await RelayHarness.with(fcm: true) { relay in
                let fcm = try #require(relay.fcm)
                let client = relay.client("dispo")
                let iPhone = randomToken()
                _ = try await client.registerDevice(Self.android(user: "ada", token: "ada:APA91bAda"))
                _ = try await client.registerDevice(Self.android(user: "bob", token: "bob:APA91bBob"))
                _ = try await client.registerDevice(registration(user: "cleo", token: iPhone))

                let created = try await client.send(
                    Self.event("event_created", to: ["ada", "bob", "cleo"], excluding: ["ada"]))
                let byUser = Dictionary(grouping: created.outcomes, by: \.userID)
                #expect(byUser["bob"]?.map(\.outcome) == ["delivered"])
                #expect(byUser["cleo"]?.map(\.outcome) == ["delivered"])
                #expect(byUser["ada"] == nil)
                let bob = try #require(byUser["bob"]?.first)
                #expect(bob.token == "bob:APA91bBob" && bob.providerMessageID.hasPrefix("projects/dispo-app/messages/"))
                #expect(bob.apnsID.isEmpty && bob.environment == .unspecified)
                #expect(byUser["cleo"]?.first?.apnsID.isEmpty == false)

                // FCM got the Android device's message as dispo's backend sent it; APNs the iPhone's.
                let messages = fcm.receivedMessages()
                #expect(messages.map(\.token) == ["bob:APA91bBob"] && messages.map(\.projectID) == ["dispo-app"])
                let message = try #require(messages.first)
                #expect(message.data == ["type": "event_created", "event_id": "e42"])
                #expect(message.notification?.title == "New event: Picnic")
                #expect(message.notification?.body == "Saturday 12:00 at the lake")
                #expect(message.android?.priority == "HIGH" && message.android?.channelID == "events")
                #expect(message.apnsHeaders["apns-push-type"] == "alert")
                #expect(relay.simulator.receivedRequests().compactMap(\.deviceToken) == [iPhone])

                let comment = try await client.send(Self.event("event_comment", to: ["ada"]))
                #expect(comment.outcomes.map(\.outcome) == ["delivered"])
                let last = try #require(fcm.receivedMessages().last)
                #expect(last.token == "ada:APA91bAda" && last.data == ["type": "event_comment", "event_id": "e42"])

                // The records read back with FCM's message name, one access token for both sends.
                var query = Pushrelay_V1_QueryDeliveries()
                query.jobID = created.jobID
                let rows = try await client.queryDeliveries(query).deliveries
                #expect(rows.first { $0.token == "bob:APA91bBob" }?.providerMessageID == bob.providerMessageID)
                #expect(fcm.statistics().accessTokensIssuedInAll == 1)
                await client.close()
            }
        }

        @Test func aRefreshedTokenReplacesTheOldOneAndADeadTokenIsCleanedUp() async throws {
            try await RelayHarness.with(fcm: true) { relay in
                let fcm = try #require(relay.fcm)
                fcm.updateFaults { $0.unregisteredTokens = ["dan:APA91bUninstalled"] }
                let client = relay.client("dispo")
                _ = try await client.registerDevice(Self.android(user: "bob", token: "bob:APA91bOld"))
                // The app's onNewToken: the same user and platform, a new token.
                let refreshed = try await client.registerDevice(Self.android(user: "bob", token: "bob:APA91bNew"))
                #expect(refreshed.device.token == "bob:APA91bNew")
                let devices = try await client.listDevices(userID: "bob").devices
                #expect(devices.filter(\.active).map(\.token) == ["bob:APA91bNew"])
                _ = try await client.registerDevice(Self.android(user: "dan", token: "dan:APA91bUninstalled"))

                let sent = try await client.send(Self.event("event_created", to: ["bob", "dan"]))
                let byUser = Dictionary(uniqueKeysWithValues: sent.outcomes.map { ($0.userID, $0) })
                #expect(byUser["bob"]?.outcome == "delivered" && byUser["bob"]?.token == "bob:APA91bNew")
                #expect(byUser["dan"]?.outcome == "dead_token" && byUser["dan"]?.reason == "UNREGISTERED")
                #expect(
                    fcm.receivedMessages().compactMap(\.token).sorted() == ["bob:APA91bNew", "dan:APA91bUninstalled"])
                let dan = try await client.listDevices(userID: "dan").devices
                #expect(dan.map(\.token) == ["dan:APA91bUninstalled"] && dan.first?.active == false)

                // The dead token is not sent again.
                let again = try await client.send(Self.event("event_created", to: ["dan"]))
                #expect(again.outcomes.map(\.outcome) == ["skipped"])
                #expect(fcm.receivedMessages().count == 2)
                await client.close()
            }
        }

        @Test func itsDevicesArePacedAtTheTenantsRate() async throws {
            try await RelayHarness.with(fcm: true) { relay in
                let fcm = try #require(relay.fcm)
                let client = relay.client("dispo")
                // dispo sends at most 100 notifications a second (Tenants/dispo.yaml): 150 take more than a second.
                let users = (0..<150).map { "user\($0)" }
                for user in users {
                    _ = try await client.registerDevice(Self.android(user: user, token: "\(user):APA91bPaced"))
                }
                let sent = try await client.send(Self.event("event_created", to: users))
                #expect(sent.outcomes.count == 150 && sent.outcomes.allSatisfy { $0.outcome == "delivered" })
                let times = fcm.receivedMessages().filter { $0.token?.hasSuffix(":APA91bPaced") == true }
                    .map(\.receivedAt)
                #expect(times.count == 150)
                let span = (times.max() ?? .distantPast).timeIntervalSince(times.min() ?? .distantPast)
                #expect(span >= 1.0, "150 messages within \(span) s at 100 a second")
                await client.close()
            }
        }

        @Test func googlesAnswersAreRecordedAsItsErrorTableSays() async throws {
            try await RelayHarness.with(fcm: true) { relay in
                let fcm = try #require(relay.fcm)
                fcm.updateFaults {
                    $0.invalidTokens = ["eve:APA91bInvalid"]
                    $0.senderIDMismatchTokens = ["fay:APA91bOtherProject"]
                    $0.thirdPartyAuthErrorTokens = ["gus:APA91bIOS"]
                }
                let client = relay.client("dispo")
                let users = ["eve": "eve:APA91bInvalid", "fay": "fay:APA91bOtherProject", "gus": "gus:APA91bIOS"]
                for (user, token) in users {
                    _ = try await client.registerDevice(Self.android(user: user, token: token))
                }
                let sent = try await client.send(Self.event("event_created", to: users.keys.sorted()))
                let byUser = Dictionary(uniqueKeysWithValues: sent.outcomes.map { ($0.userID, $0) })
                // A token FCM names invalid is dead; another project's token and a refused APNs credential at
                // Firebase are the configuration's faults: recorded, never retried, the device kept.
                #expect(byUser["eve"]?.outcome == "dead_token" && byUser["eve"]?.reason == "INVALID_ARGUMENT")
                #expect(byUser["fay"]?.outcome == "rejected" && byUser["fay"]?.reason == "SENDER_ID_MISMATCH")
                #expect(byUser["gus"]?.outcome == "rejected" && byUser["gus"]?.reason == "THIRD_PARTY_AUTH_ERROR")
                #expect(fcm.receivedMessages().count == 3)
                #expect(try await client.listDevices(userID: "fay").devices.first?.active == true)
                #expect(try await client.listDevices(userID: "eve").devices.first?.active == false)
                #expect(try await relay.store.heldDeliveries().isEmpty)
                // Not a fault of the destination, nor of the relay: named in the status view and readiness's
                // warnings, with what to fix, while both stay as they were.
                #expect(await relay.readiness.notReadyReason() == nil)
                let status = await relay.readiness.status()
                let destination = try #require(
                    status.tenants.first { $0.tenant == "dispo" }?.environments.first { $0.provider == "fcm" })
                #expect(destination.fault == nil)
                #expect(destination.rejected.map(\.reason) == ["SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR"])
                #expect(destination.rejected.map(\.count) == [1, 1])
                let warnings = await relay.readiness.warnings()
                #expect(warnings.count == 2)
                #expect(
                    warnings.allSatisfy { $0.hasPrefix("tenant dispo fcm: ") && $0.contains(" for 1 notification ") })
                #expect(warnings.contains { $0.contains("SENDER_ID_MISMATCH") && $0.contains("fcm.project_id") })
                #expect(warnings.contains { $0.contains("THIRD_PARTY_AUTH_ERROR") && $0.contains("Firebase console") })
                await client.close()
            }
        }

        @Test func quotaAndUnavailableAreRetriedThenHeldAndDeliveredOnceFCMTakesThem() async throws {
            try await RelayHarness.with(fcm: true) { relay in
                let fcm = try #require(relay.fcm)
                fcm.updateFaults {
                    $0.rate429 = 1
                    $0.retryAfter429 = 1
                }
                let client = relay.client("dispo")
                _ = try await client.registerDevice(Self.android(user: "bob", token: "bob:APA91bBob"))
                let sent = try await client.send(Self.event("event_created", to: ["bob"]))
                #expect(sent.outcomes.map(\.outcome) == ["waiting"])
                #expect(sent.outcomes.first?.reason == "QUOTA_EXCEEDED")
                // The engine tried more than once, a second apart, before the relay held the device.
                #expect(fcm.statistics().responses(errorCode: "QUOTA_EXCEEDED") > 1)
                let held = try await relay.store.heldDeliveries()
                #expect(held.map(\.environment) == ["fcm"] && held.map(\.devices) == [1])

                fcm.updateFaults { $0.rate429 = 0 }
                try await relay.store.retryHeldPagesNow(tenant: "dispo", environment: "fcm")
                let delivered = await eventually {
                    fcm.receivedMessages().contains { $0.token == "bob:APA91bBob" && $0.status == 200 }
                }
                #expect(delivered)
                await client.close()
            }
        }
    }
}

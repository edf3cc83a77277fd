import APNs
import APNsSimulator
import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

extension RelayServerSuites {
    /// Swift client → relay → simulator, with delivery rows in PostgreSQL, for every method of the protocol.
    @Suite struct EndToEndTests {
        @Test func devicesAreRegisteredListedAndUnregistered() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let token = randomToken()
                let registered = try await client.registerDevice(registration(user: "u1", token: token))
                #expect(registered.status == .created)
                #expect(registered.device.token == token)
                // circl's policy: the token moves to whoever registers it last.
                let moved = try await client.registerDevice(registration(user: "u2", token: token))
                #expect(moved.status == .moved)
                #expect(moved.previousUserID == "u1")
                #expect(try await client.listDevices(userID: "u1").devices.isEmpty)
                #expect(try await client.listDevices(userID: "u2").devices.map(\.token) == [token])
                var unregister = Pushrelay_V1_UnregisterDevice()
                unregister.token = token
                #expect(try await client.unregisterDevice(unregister).removed == 1)
                #expect(try await client.listDevices(userID: "u2").devices.isEmpty)
                #expect(try await client.ping(nonce: 42) == 42)
                await client.close()
            }
        }

        @Test func sendReachesTheSimulatorWithTheTypesHeadersAndIsRecorded() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let tokens = [randomToken(), randomToken()]
                _ = try await client.registerDevice(registration(user: "ada", token: tokens[0]))
                _ = try await client.registerDevice(registration(user: "bob", token: tokens[1], environment: .sandbox))
                _ = try await client.registerDevice(registration(user: "sender", token: randomToken()))
                let result = try await client.send(
                    circlMessage(to: ["ada", "bob", "sender", "nobody"], excluding: ["sender"]))
                #expect(result.outcomes.count == 3)
                #expect(result.outcomes.filter { $0.outcome == "delivered" }.map(\.userID).sorted() == ["ada", "bob"])
                #expect(result.outcomes.first { $0.userID == "nobody" }?.reason == "no_device")
                #expect(result.job.state == .completed)
                #expect(result.job.delivered == 2 && result.job.skipped == 1)

                let requests = relay.simulator.receivedRequests()
                #expect(Set(requests.compactMap(\.deviceToken)) == Set(tokens))
                for request in requests {
                    #expect(request.header("apns-topic") == "com.fragne.circl")
                    #expect(request.header("apns-push-type") == "alert")
                    #expect(request.header("apns-priority") == "10")
                    #expect(Int64(request.header("apns-expiration") ?? "") ?? 0 > Int64(Date().timeIntervalSince1970))
                    let payload = try JSONSerialization.jsonObject(with: Data(request.payload)) as? [String: Any]
                    let aps = payload?["aps"] as? [String: Any]
                    #expect(aps?["thread-id"] as? String == "circle-7-channel-3")
                    #expect((aps?["alert"] as? [String: Any])?["title"] as? String == "Ada")
                    #expect(payload?["type"] as? String == "message")
                }

                var query = Pushrelay_V1_QueryDeliveries()
                query.jobID = result.jobID
                let rows = try await client.queryDeliveries(query).deliveries
                // Every recipient has its row: two deliveries and the user without a device.
                #expect(rows.count == 3)
                #expect(rows.filter { $0.outcome == "delivered" && !$0.apnsID.isEmpty }.count == 2)
                #expect(rows.filter { $0.outcome == "skipped" }.map(\.reason) == ["no_device"])
                #expect(try await relay.store.deliveries(tenant: "circl", job: result.jobID).count == 3)
                #expect(try await client.jobStatus(jobID: result.jobID).state == .completed)
                await client.close()
            }
        }

        @Test func sendWithoutWaitAnswersAJobAtOnceAndIdempotencyKeysReturnIt() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: randomToken()))
                var send = circlMessage(to: ["ada"], wait: false)
                send.idempotencyKey = "message-991"
                let first = try await client.send(send)
                #expect(!first.duplicate)
                #expect(first.outcomes.isEmpty)
                var job = try await client.jobStatus(jobID: first.jobID)
                let end = ContinuousClock.now + .seconds(30)
                while job.state != .completed, ContinuousClock.now < end {
                    try await Task.sleep(for: .milliseconds(20))
                    job = try await client.jobStatus(jobID: first.jobID)
                }
                #expect(job.state == .completed)
                #expect(job.delivered == 1)
                let again = try await client.send(send)
                #expect(again.duplicate)
                #expect(again.jobID == first.jobID)
                // Retried with `wait` (as after UNAVAILABLE): the first job's outcomes, nothing sent again.
                send.wait = true
                let waited = try await client.send(send)
                #expect(waited.duplicate && waited.jobID == first.jobID)
                #expect(waited.outcomes.map(\.outcome) == ["delivered"])
                #expect(relay.simulator.statistics().requestsReceived == 1)
                // Another request (other type and audience) with the used key is refused, naming the key.
                var other = circlMessage(to: ["bob"], wait: false)
                other.idempotencyKey = send.idempotencyKey
                other.templateValues["channel_id"] = "4"
                #expect(await fieldError { try await client.send(other) } == "send.idempotency_key")
                #expect(relay.simulator.statistics().requestsReceived == 1)
                await client.close()
            }
        }

        @Test func deadTokensAreDeactivatedAndStreamedWithApplesTimestamp() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let events = try await client.subscribeResults(receipts: true)
                _ = try await client.registerDevice(registration(user: "gone", token: RelayHarness.deadToken))
                _ = try await client.registerDevice(registration(user: "here", token: randomToken()))
                let result = try await client.send(circlMessage(to: ["gone", "here"]))
                let dead = try #require(result.outcomes.first { $0.userID == "gone" })
                #expect(dead.outcome == "dead_token")
                #expect(dead.reason == "Unregistered")
                #expect(dead.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                var seen: [Pushrelay_V1_ResultEvent] = []
                for await event in events {
                    seen.append(event)
                    if seen.count == 2 { break }
                }
                let deadEvent = try #require(
                    seen.compactMap { event -> Pushrelay_V1_DeadToken? in
                        if case .deadToken(let dead) = event.event { return dead }
                        return nil
                    }.first)
                #expect(deadEvent.token == RelayHarness.deadToken)
                #expect(deadEvent.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                #expect(deadEvent.jobID == result.jobID)
                #expect(
                    seen.contains {
                        if case .receipt(let receipt) = $0.event { receipt.userID == "here" } else { false }
                    })
                let device = try #require(try await client.listDevices(userID: "gone").devices.first)
                #expect(!device.active)
                #expect(device.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                await client.close()
            }
        }

        @Test func topicSendsReachSubscribedDevicesButTheSender() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("familyportal")
                let tokens = [randomToken(), randomToken(), randomToken()]
                _ = try await client.registerDevice(registration(user: "mum", token: tokens[0], topics: ["chat"]))
                _ = try await client.registerDevice(
                    registration(user: "kid", token: tokens[1], environment: .sandbox, topics: ["chat"]))
                _ = try await client.registerDevice(registration(user: "dad", token: tokens[2], topics: ["photos"]))
                var send = familyChat()
                send.excludeUserIds = ["mum"]
                send.wait = true
                let result = try await client.send(send)
                #expect(result.outcomes.map(\.userID) == ["kid"])
                #expect(result.outcomes.first?.environment == .sandbox)
                #expect(relay.simulator.receivedRequests().compactMap(\.deviceToken) == [tokens[1]])
                await client.close()
            }
        }

        @Test func aTopicPageTakenOverSendsToItsRangeAsRegisteredNowButNotToRecordedDevices() async throws {
            try await RelayHarness.with(fanOut: false) { relay in
                let client = relay.client("familyportal")
                // Tokens in order: a < b < c < late < d.
                let tokens = ["a1", "b2", "c3", "c8", "d4"].map { String(repeating: $0, count: 32) }
                for (user, token) in zip(["ann", "bob", "cat", "dan"], [tokens[0], tokens[1], tokens[2], tokens[4]]) {
                    _ = try await client.registerDevice(registration(user: user, token: token, topics: ["chat"]))
                }
                let jobID = try await client.send(familyChat()).jobID
                // A process plans the job as one range page, leases the page, records ann's delivery and dies
                // (its lease ran out at once).
                let store = relay.store
                let job = try #require(try await store.claimJobForPlanning(owner: "dead", lease: .seconds(30)))
                #expect(job.id == jobID)
                let written = try #require(
                    try await store.addTopicJobPage(
                        jobID: jobID, tenant: "familyportal", page: 1, dueAt: Date(), topic: "chat", after: nil,
                        limit: 1_000, excludedUsers: []))
                #expect(written.lastToken == tokens[4] && written.pageDevices == 4)
                try await store.finishPlanning(jobID: jobID, owner: "dead")
                let leased = try #require(try await store.claimJobPage(owner: "dead", lease: .zero))
                #expect(leased.topicRange == TopicRange(topic: "chat", after: "", last: tokens[4]))
                #expect(leased.tokens.isEmpty && leased.users.isEmpty)
                try await store.recordDeliveries(
                    [
                        DeliveryRecord(
                            tenantID: "familyportal", jobID: jobID, userID: "ann", token: tokens[0],
                            outcome: .delivered,
                            sentAt: Date(), answeredAt: Date(), notificationType: "chat_message")
                    ], batchSize: 10)
                // Before the page is taken over, cat's device goes and eve's comes, inside the range.
                var unregister = Pushrelay_V1_UnregisterDevice()
                unregister.token = tokens[2]
                #expect(try await client.unregisterDevice(unregister).removed == 1)
                _ = try await client.registerDevice(registration(user: "eve", token: tokens[3], topics: ["chat"]))

                let status = try await relay.runFanOut(until: jobID, client: client)
                #expect(status.state == .completed)
                #expect(status.devices == 4 && status.delivered == 4 && status.failed == 0 && status.skipped == 0)
                let received = relay.simulator.receivedRequests().compactMap(\.deviceToken).sorted()
                #expect(received == [tokens[1], tokens[3], tokens[4]])
                await client.close()
            }
        }

        @Test func aPlannerTakingOverGoesOnAfterThePagesWrittenBefore() async throws {
            try await RelayHarness.with(fanOut: false) { relay in
                let client = relay.client("familyportal")
                let tokens = ["a1", "b2", "c3", "d4"].map { String(repeating: $0, count: 32) }
                for (user, token) in zip(["ann", "bob", "cat", "dan"], tokens) {
                    _ = try await client.registerDevice(registration(user: user, token: token, topics: ["chat"]))
                }
                let jobID = try await client.send(familyChat()).jobID
                // A planner writes a first page of two devices and dies; its planning lease runs out at once.
                let store = relay.store
                let job = try #require(try await store.claimJobForPlanning(owner: "dead", lease: .zero))
                #expect(job.id == jobID)
                let written = try #require(
                    try await store.addTopicJobPage(
                        jobID: jobID, tenant: "familyportal", page: 1, dueAt: Date(), topic: "chat", after: nil,
                        limit: 2, excludedUsers: []))
                #expect(written.lastToken == tokens[1] && written.pageDevices == 2 && !written.stood)
                // The planner that takes over reads fewer devices than its first page holds; page 1 stands, and the
                // devices after its range still get a page.
                let status = try await relay.runFanOut(until: jobID, client: client)
                #expect(status.state == .completed)
                #expect(status.devices == 4 && status.delivered == 4)
                #expect(relay.simulator.receivedRequests().compactMap(\.deviceToken).sorted() == tokens)
                await client.close()
            }
        }

        @Test func aPlannerTakingOverAListedJobSendsToTheDevicesItsPagesDoNotHold() async throws {
            try await RelayHarness.with(fanOut: false) { relay in
                let client = relay.client("familyportal")
                let tokens = ["a1", "b2", "c3"].map { String(repeating: $0, count: 32) }
                for (user, token) in zip(["ann", "bob", "cat"], tokens) {
                    // chat_message reaches the devices subscribed to chat.
                    _ = try await client.registerDevice(registration(user: user, token: token, topics: ["chat"]))
                }
                var send = Pushrelay_V1_Send()
                send.notificationType = "chat_message"
                send.userIds = ["ann", "bob", "cat"]
                send.alert.body = "Dinner?"
                let jobID = try await client.send(send).jobID
                // A planner wrote page 1 when only ann had a device in it (bob's and cat's came later, say, or the
                // slices were cut otherwise), sent it, and died; its planning lease runs out at once.
                let store = relay.store
                let job = try #require(try await store.claimJobForPlanning(owner: "dead", lease: .zero))
                #expect(job.id == jobID)
                let first = try await store.addListedJobPage(
                    jobID: jobID, tenant: "familyportal", page: 1, dueAt: Date(), recipients: .users(["ann"]),
                    excludedUsers: [])
                #expect(first.devices.map(\.userID) == ["ann"])
                let written = try #require(try await store.listedPagesWritten(jobID: jobID))
                #expect(written.lastPage == 1 && written.tokens == [tokens[0]])

                // The planner that takes over writes bob's and cat's devices as page 2; page 1 stands, so ann's
                // device gets the notification once.
                let status = try await relay.runFanOut(until: jobID, client: client)
                #expect(status.state == .completed)
                #expect(status.devices == 3 && status.delivered == 3)
                #expect(relay.simulator.receivedRequests().compactMap(\.deviceToken).sorted() == tokens)
                #expect(try await store.listedPagesWritten(jobID: jobID)?.lastPage == 2)
                await client.close()
            }
        }

        @Test func preferencesMutesAndPresenceAreStoredPerUser() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                var set = Pushrelay_V1_SetPreferences()
                set.userID = "ada"
                var off = Pushrelay_V1_TypePreference()
                off.notificationType = "announcement"
                off.enabled = false
                set.preferences = [off]
                let preferences = try await client.setPreferences(set)
                #expect(preferences.preferences.first { $0.notificationType == "announcement" }?.enabled == false)
                #expect(
                    try await client.preferences(userID: "ada").preferences.first {
                        $0.notificationType == "announcement"
                    }?
                    .enabled == false)
                #expect(
                    try await client.preferences(userID: "bob").preferences.first {
                        $0.notificationType == "announcement"
                    }?
                    .enabled == true)
                // A mandatory type cannot be turned off.
                off.notificationType = "silent_refresh"
                set.preferences = [off]
                #expect(await errorCode { try await client.setPreferences(set) } == .invalidArgument)
                off.notificationType = "no_such_type"
                set.preferences = [off]
                #expect(await errorCode { try await client.setPreferences(set) } == .invalidArgument)

                var mute = Pushrelay_V1_SetMute()
                mute.userID = "ada"
                mute.threadID = "circle-7-channel-3"
                _ = try await client.setMute(mute)
                mute.threadID = ""
                mute.scope = "circle-7"
                mute.untilMs = Int64(Date().addingTimeInterval(3_600).timeIntervalSince1970 * 1000)
                _ = try await client.setMute(mute)
                #expect(try await client.mutes(userID: "ada").mutes.count == 2)
                var clear = Pushrelay_V1_ClearMute()
                clear.userID = "ada"
                clear.threadID = "circle-7-channel-3"
                #expect(try await client.clearMute(clear).removed == 1)
                #expect(try await client.mutes(userID: "ada").mutes.map(\.scope) == ["circle-7"])
                mute.scope = "circle-7"
                mute.threadID = "both-given"
                #expect(await errorCode { try await client.setMute(mute) } == .invalidArgument)

                let presence = try await client.setPresence(userID: "ada", threadID: "circle-7-channel-3", seconds: 30)
                #expect(presence.untilMs > Int64(Date().timeIntervalSince1970 * 1000))
                await client.close()
            }
        }

        @Test func invalidSendsAreRefusedWithTheirField() async throws {
            try await RelayHarness.with(configure: { $0.limits.maxRecipients = 3 }) { relay in
                let client = relay.client("circl")
                var send = circlMessage(to: ["ada"])
                send.templateValues = [:]
                #expect(await errorCode { try await client.send(send) } == .invalidArgument)
                send = circlMessage(to: ["a", "b", "c", "d"])
                #expect(await errorCode { try await client.send(send) } == .tooManyRecipients)
                send = circlMessage(to: ["ada"])
                send.notificationType = "nope"
                #expect(await errorCode { try await client.send(send) } == .invalidArgument)
                send = circlMessage(to: ["ada"])
                send.topic = "chat"
                #expect(await errorCode { try await client.send(send) } == .invalidArgument)
                send = circlMessage(to: ["ada"])
                send.sendAtMs = 1
                send.sendAtLocal = "2026-11-22T00:00"
                #expect(await errorCode { try await client.send(send) } == .invalidArgument)
                send.sendAtMs = 0
                send.sendAtLocal = "tomorrow at noon"
                #expect(await errorCode { try await client.send(send) } == .invalidArgument)
                #expect(relay.simulator.statistics().requestsReceived == 0)
                await client.close()
            }
        }
    }
}

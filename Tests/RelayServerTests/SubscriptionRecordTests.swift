import PushRelayProtocol
import Testing

extension RelayServerSuites {
    /// Subscriptions as the tenant files and the seeds mean them, and a record for every listed recipient: a
    /// device that lists no topics takes every type, one that lists topics only those; a recipient skipped for its
    /// topics is `not_subscribed`; a listed token without a device is `no_device`, with a row.
    @Suite struct SubscriptionRecordTests {
        @Test("a device listing no topics gets the chat; a photos-only device does not; the records say why")
        func subscriptionsAndTheirRecords() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("familyportal")
                let (plain, photos, chat) = (randomToken(), randomToken(), randomToken())
                _ = try await client.registerDevice(registration(user: "mum", token: plain))
                _ = try await client.registerDevice(registration(user: "dad", token: photos, topics: ["photos"]))
                _ = try await client.registerDevice(registration(user: "kid", token: chat, topics: ["chat"]))

                // The chat topic: the device that lists no topics and the chat device; not the photos-only one.
                var topicSend = familyChat()
                topicSend.wait = true
                let toTopic = try await client.send(topicSend)
                #expect(Set(toTopic.outcomes.filter { $0.outcome == "delivered" }.map(\.token)) == [plain, chat])

                // To users: the photos-only user is skipped not_subscribed, a user without devices no_device.
                var toUsers = familyChat()
                toUsers.topic = ""
                toUsers.userIds = ["mum", "dad", "nobody"]
                toUsers.wait = true
                let byUser = Dictionary(
                    try await client.send(toUsers).outcomes.map { ($0.userID, $0) }, uniquingKeysWith: { a, _ in a })
                #expect(byUser["mum"]?.outcome == "delivered")
                #expect(byUser["dad"]?.outcome == "skipped" && byUser["dad"]?.reason == "not_subscribed")
                #expect(byUser["nobody"]?.outcome == "skipped" && byUser["nobody"]?.reason == "no_device")

                // To tokens: an unregistered token has its outcome and its delivery row.
                let unknown = randomToken()
                var toTokens = familyChat()
                toTokens.topic = ""
                toTokens.tokens = [chat, unknown, photos].map { token in
                    var target = Pushrelay_V1_TokenTarget()
                    target.token = token
                    return target
                }
                toTokens.wait = true
                let sent = try await client.send(toTokens)
                let byToken = Dictionary(sent.outcomes.map { ($0.token, $0) }, uniquingKeysWith: { a, _ in a })
                #expect(byToken[chat]?.outcome == "delivered")
                #expect(byToken[unknown]?.outcome == "skipped" && byToken[unknown]?.reason == "no_device")
                #expect(byToken[photos]?.outcome == "skipped" && byToken[photos]?.reason == "not_subscribed")
                let rows = try await relay.store.deliveries(tenant: "familyportal", job: sent.jobID)
                #expect(rows.contains { $0.token == unknown && $0.reason == "no_device" })
                #expect(relay.requests(to: photos).isEmpty && relay.requests(to: unknown).isEmpty)
                await client.close()
            }
        }
    }
}

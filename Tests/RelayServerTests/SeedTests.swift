import APNs
import APNsSimulator
import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Testing

extension RelayServerSuites {
    /// The needs of the seed documents (`/work/shared/seeds`), end to end: the backend's request through the wire
    /// protocol (PushRelayClient), the relay's policy and scheduling, and exactly what the APNs simulator received
    /// (headers and the whole payload).
    @Suite struct SeedTests {
        // MARK: circl (seed 000)

        @Test func circlMessageReachesTheCircleButTheSenderWithItsThreadID() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let ada = randomToken()
                let bob = randomToken()
                let cleo = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: ada))
                _ = try await client.registerDevice(registration(user: "bob", token: bob, environment: .sandbox))
                _ = try await client.registerDevice(registration(user: "cleo", token: cleo))
                let custom: [String: JSONValue] = [
                    "type": "message",
                    "payload": [
                        "message_id": 991, "channel_id": 3, "circle_id": 7, "sender_id": 12, "sender_name": "Cleo",
                        "excerpt": "See you at 8",
                    ],
                ]
                var send = Pushrelay_V1_Send()
                send.notificationType = "message"
                send.userIds = ["ada", "bob", "cleo"]
                send.excludeUserIds = ["cleo"]
                send.templateValues = ["circle_id": "7", "channel_id": "3"]
                send.alert.title = "Cleo"
                send.alert.body = "See you at 8"
                send.sound = "default"
                send.collapseID = "message-991"
                send.customJson = try jsonText(custom)
                send.wait = true
                let before = Date()
                let result = try await client.send(send)

                #expect(result.job.state == .completed)
                #expect(result.outcomes.map(\.userID) == ["ada", "bob"])
                #expect(result.outcomes.allSatisfy { $0.outcome == "delivered" })
                #expect(result.outcomes.map(\.environment) == [.production, .sandbox])
                #expect(relay.requests(to: cleo).isEmpty, "the sender's device receives nothing")
                #expect(Set(relay.simulator.receivedRequests().compactMap(\.deviceToken)) == [ada, bob])
                var expected = custom
                expected["aps"] = [
                    "alert": ["title": "Cleo", "body": "See you at 8"], "sound": "default",
                    "thread-id": "circle-7-channel-3",
                ]
                for token in [ada, bob] {
                    let request = try #require(relay.requests(to: token).only)
                    #expect(try payload(of: request) == expected)
                    expectHeaders(
                        request, .init(topic: "com.fragne.circl", pushType: "alert", priority: 10, expiration: 86_400),
                        collapseID: "message-991", sentAfter: before
                    )
                }
                try await expectApnsIDs(of: result.jobID, client: client, relay: relay)
                await client.close()
            }
        }

        @Test func circlEventRemindersAreScheduledSentAtTheirTimeAndCancelled() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let ada = randomToken()
                let bob = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: ada))
                _ = try await client.registerDevice(registration(user: "bob", token: bob, environment: .sandbox))
                func reminder(_ body: String, at sendAt: Int64) throws -> Pushrelay_V1_Send {
                    var send = Pushrelay_V1_Send()
                    send.notificationType = "event_reminder"
                    send.userIds = ["ada", "bob"]
                    send.alert.title = "Board games"
                    send.alert.body = body
                    send.sound = "default"
                    send.customJson = try jsonText(reminderData)
                    send.sendAtMs = sendAt
                    send.wait = true
                    return send
                }

                // The event starts in 62 minutes: reminders 60 and 30 minutes before it wait as scheduled jobs.
                let event = unixMilliseconds(Date()) + 62 * 60_000
                var hourAhead: [String] = []
                for minutes in [60, 30] {
                    let sendAt = event - Int64(minutes) * 60_000
                    let answer = try await client.send(try reminder("Starts in \(minutes) minutes", at: sendAt))
                    #expect(answer.job.state == .scheduled)
                    #expect(answer.outcomes.isEmpty)
                    #expect(try await client.jobStatus(jobID: answer.jobID).state == .scheduled)
                    let stored = try #require(try await relay.store.job(tenant: "circl", id: answer.jobID))
                    #expect(stored.sendAt.map(unixMilliseconds) == sendAt)
                    hourAhead.append(answer.jobID)
                }

                // The same reminders due in a few seconds are sent once their time has come, not before; a third
                // one, cancelled while scheduled, never arrives. The seconds leave room for the three jobs and the
                // cancellation to be written before the first is due, on a loaded machine too.
                let now = unixMilliseconds(Date())
                let soon = ["Starts in 60 minutes": now + 6_000, "Starts in 30 minutes": now + 7_000]
                var soonJobs: [String] = []
                for (body, sendAt) in soon.sorted(by: { $0.value < $1.value }) {
                    let answer = try await client.send(try reminder(body, at: sendAt))
                    #expect(answer.job.state == .scheduled)
                    soonJobs.append(answer.jobID)
                }
                let cancelledAt = now + 6_500
                let doomed = try await client.send(try reminder("Cancelled", at: cancelledAt))
                #expect(doomed.job.state == .scheduled)
                #expect(try await client.cancelJob(jobID: doomed.jobID).state == .cancelled)
                #expect(try await client.cancelJob(jobID: hourAhead[1]).state == .cancelled)

                for token in [ada, bob] {
                    let requests = await relay.awaitRequests(to: token, count: 2)
                    #expect(requests.count == 2)
                    for request in requests {
                        let body = try #require(alertBody(of: request))
                        let sendAt = try #require(soon[body], "unexpected reminder '\(body)'")
                        #expect(
                            unixMilliseconds(request.receivedAt) >= sendAt,
                            "'\(body)' arrived \(sendAt - unixMilliseconds(request.receivedAt)) ms early")
                        var expected = reminderData
                        expected["aps"] = [
                            "alert": ["title": "Board games", "body": .string(body)], "sound": "default",
                            "interruption-level": "time-sensitive",
                        ]
                        #expect(try payload(of: request) == expected)
                        expectHeaders(
                            request,
                            .init(topic: "com.fragne.circl", pushType: "alert", priority: 10, expiration: 1_800),
                            sentAfter: Date(timeIntervalSince1970: Double(sendAt) / 1000)
                        )
                    }
                }
                for job in soonJobs {
                    let status = try await waitForJob(job, client: client) { $0.state == .completed }
                    #expect(status.state == .completed && status.delivered == 2)
                    try await expectApnsIDs(of: job, client: client, relay: relay)
                }
                // Past the cancelled reminder's time (and a few polls of the worker): it never arrived.
                let sinceCancelled = Date(timeIntervalSince1970: Double(cancelledAt) / 1000).timeIntervalSinceNow
                try await Task.sleep(for: .milliseconds(1_000 + max(0, Int(sinceCancelled * 1000))))
                #expect(relay.simulator.receivedRequests().count == 4)
                #expect(relay.simulator.receivedRequests().allSatisfy { alertBody(of: $0) != "Cancelled" })
                #expect(try await client.jobStatus(jobID: doomed.jobID).state == .cancelled)
                #expect(try await deliveries(of: doomed.jobID, client: client).isEmpty)
                #expect(try await client.jobStatus(jobID: hourAhead[0]).state == .scheduled)
                #expect(try await client.jobStatus(jobID: hourAhead[1]).state == .cancelled)
                await client.close()
            }
        }

        @Test func circlMidnightSummaryGoesOutAtEachUsersLocalTime() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let zurich = randomToken()
                let newYork = randomToken()
                _ = try await client.registerDevice(registration(user: "zoe", token: zurich))
                var ned = registration(user: "ned", token: newYork)
                ned.timeZone = "America/New_York"
                _ = try await client.registerDevice(ned)

                // A wall-clock time one to two seconds ahead in Zurich: due then for zoe, at the same wall-clock
                // time in New York (hours later) for ned.
                let zurichDue = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.down))
                let local = localTime(zurichDue, in: "Europe/Zurich")
                let newYorkDue = try #require(instant(of: local, in: "America/New_York"))
                #expect(newYorkDue > zurichDue.addingTimeInterval(3_600))
                let custom: [String: JSONValue] = [
                    "type": "events_tomorrow_summary",
                    "payload": ["events": [["id": 41, "title": "Board games", "time_local": "19:00"]]],
                ]
                var send = Pushrelay_V1_Send()
                send.notificationType = "events_tomorrow_summary"
                send.userIds = ["zoe", "ned"]
                send.alert.title = "Tomorrow"
                send.alert.body = "Board games at 19:00"
                send.customJson = try jsonText(custom)
                send.sendAtLocal = local
                send.wait = true
                let result = try await client.send(send)

                // The answer comes once only later pages are left: ned's device is deferred to his local time.
                #expect(result.outcomes.map(\.userID) == ["ned", "zoe"])
                let nedOutcome = try #require(result.outcomes.first { $0.userID == "ned" })
                #expect(nedOutcome.outcome == "deferred")
                #expect(nedOutcome.token == newYork)
                #expect(nedOutcome.reason == "scheduled for \(unixMilliseconds(newYorkDue))")
                let zoeOutcome = try #require(result.outcomes.first { $0.userID == "zoe" })
                #expect(
                    zoeOutcome.outcome == "delivered"
                        || (zoeOutcome.outcome == "deferred"
                            && zoeOutcome.reason == "scheduled for \(unixMilliseconds(zurichDue))"),
                    "zoe: \(zoeOutcome.outcome) \(zoeOutcome.reason)")

                let request = try #require(await relay.awaitRequests(to: zurich).only)
                #expect(request.receivedAt >= zurichDue)
                // At Zurich's time, not New York's (hours later); a minute leaves room for a loaded machine.
                #expect(request.receivedAt < zurichDue.addingTimeInterval(60))
                var expected = custom
                expected["aps"] = [
                    "alert": ["title": "Tomorrow", "body": "Board games at 19:00"], "interruption-level": "passive",
                ]
                #expect(try payload(of: request) == expected)
                expectHeaders(
                    request, .init(topic: "com.fragne.circl", pushType: "alert", priority: 5, expiration: 21_600),
                    sentAfter: zurichDue
                )
                let zoeRows = try await waitForDeliveries(of: result.jobID, client: client) { !$0.isEmpty }
                #expect(zoeRows.map(\.userID) == ["zoe"])
                #expect(zoeRows.first?.outcome == "delivered")
                #expect(zoeRows.first?.apnsID == request.apnsID)
                // A few polls of the worker later, still nothing for New York, and the job waits for it.
                try await Task.sleep(for: .seconds(1))
                #expect(relay.requests(to: newYork).isEmpty)
                #expect(try await deliveries(of: result.jobID, client: client).map(\.userID) == ["zoe"])
                #expect(try await client.jobStatus(jobID: result.jobID).state == .running)
                await client.close()
            }
        }

        @Test func circlSilentRefreshIsABackgroundPushWithContentAvailableOnly() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                let ada = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: ada))
                var send = Pushrelay_V1_Send()
                send.notificationType = "silent_refresh"
                send.userIds = ["ada"]
                send.contentAvailable = true
                send.wait = true
                let before = Date()
                let result = try await client.send(send)
                #expect(result.outcomes.map(\.outcome) == ["delivered"])
                let request = try #require(relay.requests(to: ada).only)
                #expect(try payload(of: request) == ["aps": ["content-available": 1]])
                expectHeaders(
                    request, .init(topic: "com.fragne.circl", pushType: "background", priority: 5, expiration: 3_600),
                    sentAfter: before
                )
                try await expectApnsIDs(of: result.jobID, client: client, relay: relay)
                await client.close()
            }
        }

        // MARK: familyportal (seed 001)

        @Test func familyportalChatSkipsTheSenderActiveAndMutedUsersAndUsesEachTokensEnvironment() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("familyportal")
                let thread = "family-9-chat-42"
                let tokens = [
                    "mum": randomToken(), "dad-phone": randomToken(), "dad-ipad": randomToken(), "kid": randomToken(),
                    "gran": randomToken(), "uncle": randomToken(), "aunt": randomToken(),
                ]
                let devices: [(user: String, device: String, environment: Pushrelay_V1_Environment)] = [
                    ("mum", "mum", .production), ("dad", "dad-phone", .production), ("dad", "dad-ipad", .sandbox),
                    ("kid", "kid", .sandbox), ("gran", "gran", .production), ("uncle", "uncle", .production),
                    ("aunt", "aunt", .sandbox),
                ]
                for (user, device, environment) in devices {
                    let token = try #require(tokens[device])
                    let registered = try await client.registerDevice(
                        registration(user: user, token: token, environment: environment, topics: ["chat"]))
                    #expect(registered.status == .created)
                }
                // gran has the chat open; uncle muted the chat's thread, aunt the whole family for an hour.
                _ = try await client.setPresence(userID: "gran", threadID: thread, seconds: 60)
                var mute = Pushrelay_V1_SetMute()
                mute.userID = "uncle"
                mute.threadID = thread
                _ = try await client.setMute(mute)
                mute = Pushrelay_V1_SetMute()
                mute.userID = "aunt"
                mute.scope = "family-9"
                mute.untilMs = unixMilliseconds(Date().addingTimeInterval(3_600))
                _ = try await client.setMute(mute)

                let custom: [String: JSONValue] = [
                    "data": [
                        "type": "chat_message", "message_id": 123, "sender_id": 456, "sender_name": "Pat",
                        "thread_id": .string(thread),
                    ]
                ]
                var send = Pushrelay_V1_Send()
                send.notificationType = "chat_message"
                send.topic = "chat"
                send.excludeUserIds = ["mum"]
                send.threadID = thread
                send.scope = "family-9"
                send.alert.title = "New message"
                send.alert.body = "Pat: Dinner at 7?"
                send.sound = "default"
                send.badge = 1
                send.customJson = try jsonText(custom)
                send.wait = true
                let before = Date()
                let result = try await client.send(send)

                let outcomes = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.token, $0) })
                #expect(outcomes[tokens["mum"]!] == nil, "the sender is not in the audience")
                #expect(result.outcomes.count == 6)
                let environments: [String: Pushrelay_V1_Environment] = [
                    "dad-phone": .production, "dad-ipad": .sandbox, "kid": .sandbox,
                ]
                for (device, environment) in environments {
                    let outcome = try #require(outcomes[tokens[device]!])
                    #expect(outcome.outcome == "delivered", "\(device)")
                    #expect(outcome.environment == environment, "\(device)")
                }
                for (device, reason) in [("gran", "active"), ("uncle", "muted"), ("aunt", "muted")] {
                    let outcome = try #require(outcomes[tokens[device]!])
                    #expect(outcome.outcome == "skipped" && outcome.reason == reason, "\(device)")
                }
                #expect(result.job.delivered == 3 && result.job.skipped == 3)

                // Both environments' tokens reached the simulator (one endpoint for both), nobody else's.
                let delivered = ["dad-phone", "dad-ipad", "kid"].map { tokens[$0]! }
                #expect(Set(relay.simulator.receivedRequests().compactMap(\.deviceToken)) == Set(delivered))
                var expected = custom
                expected["aps"] = [
                    "alert": ["title": "New message", "body": "Pat: Dinner at 7?"], "sound": "default", "badge": 1,
                    "thread-id": .string(thread), "category": "chat_message",
                ]
                for token in delivered {
                    let request = try #require(relay.requests(to: token).only)
                    #expect(try payload(of: request) == expected)
                    expectHeaders(
                        request,
                        .init(topic: "com.familyportal.app", pushType: "alert", priority: 10, expiration: 86_400),
                        sentAfter: before
                    )
                }

                // The skipped users have their rows, with the reason.
                let rows = try await deliveries(of: result.jobID, client: client)
                let skipped = rows.filter { $0.outcome == "skipped" }.map { "\($0.userID):\($0.reason)" }.sorted()
                #expect(skipped == ["aunt:muted", "gran:active", "uncle:muted"])
                #expect(rows.first { $0.userID == "gran" }?.token == tokens["gran"])
                #expect(!rows.contains { $0.userID == "mum" })
                try await expectApnsIDs(of: result.jobID, client: client, relay: relay)
                await client.close()
            }
        }

        // MARK: dispo (seed 002)

        @Test func dispoGroupEventReachesAllButTheCreatorAndACommentOnlyTheCreator() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("dispo")
                let sam = randomToken()
                let ada = randomToken()
                let benOld = randomToken()
                let ben = randomToken()
                _ = try await client.registerDevice(registration(user: "sam", token: sam))
                _ = try await client.registerDevice(registration(user: "ada", token: ada))
                _ = try await client.registerDevice(registration(user: "ben", token: benOld, environment: .sandbox))
                // Tokens rotate: ben's app registers its new token, which replaces the old one.
                let rotated = try await client.registerDevice(
                    registration(user: "ben", token: ben, environment: .sandbox))
                #expect(rotated.status == .replaced)
                #expect(rotated.replacedToken == benOld)
                #expect(try await client.listDevices(userID: "ben").devices.map(\.token) == [ben])

                // sam creates an event in the group {sam, ada, ben}.
                let created: [String: JSONValue] = ["type": "event_created", "event_id": "evt-17"]
                var send = Pushrelay_V1_Send()
                send.notificationType = "event_created"
                send.userIds = ["sam", "ada", "ben"]
                send.excludeUserIds = ["sam"]
                send.alert.title = "New Event"
                send.alert.body = "Board games in Climbing crew"
                send.sound = "default"
                send.customJson = try jsonText(created)
                // What dispo's FCM data templates fill (Tenants/dispo.yaml); APNs devices get custom_json.
                send.templateValues = ["event_id": "evt-17"]
                send.wait = true
                var before = Date()
                let event = try await client.send(send)
                #expect(event.outcomes.map(\.userID) == ["ada", "ben"])
                #expect(event.outcomes.map(\.outcome) == ["delivered", "delivered"])
                #expect(event.outcomes.map(\.environment) == [.production, .sandbox])
                #expect(relay.requests(to: sam).isEmpty && relay.requests(to: benOld).isEmpty)
                var expected = created
                expected["aps"] = [
                    "alert": ["title": "New Event", "body": "Board games in Climbing crew"], "sound": "default",
                ]
                for token in [ada, ben] {
                    let request = try #require(relay.requests(to: token).only)
                    #expect(try payload(of: request) == expected)
                    expectHeaders(
                        request, .init(topic: "com.dispo.app", pushType: "alert", priority: 10, expiration: 86_400),
                        sentAfter: before
                    )
                }
                try await expectApnsIDs(of: event.jobID, client: client, relay: relay)

                // ada comments: only the event's creator hears of it.
                let comment: [String: JSONValue] = ["type": "event_comment", "event_id": "evt-17"]
                send = Pushrelay_V1_Send()
                send.notificationType = "event_comment"
                send.userIds = ["sam"]
                send.alert.title = "New Comment"
                send.alert.body = "Someone commented on Board games"
                send.sound = "default"
                send.customJson = try jsonText(comment)
                send.templateValues = ["event_id": "evt-17"]
                send.wait = true
                before = Date()
                let commented = try await client.send(send)
                #expect(commented.outcomes.map(\.userID) == ["sam"])
                #expect(commented.outcomes.map(\.outcome) == ["delivered"])
                #expect(relay.simulator.receivedRequests().count == 3)
                #expect(relay.requests(to: ada).count == 1 && relay.requests(to: ben).count == 1)
                let request = try #require(relay.requests(to: sam).only)
                expected = comment
                expected["aps"] = [
                    "alert": ["title": "New Comment", "body": "Someone commented on Board games"], "sound": "default",
                ]
                #expect(try payload(of: request) == expected)
                expectHeaders(
                    request, .init(topic: "com.dispo.app", pushType: "alert", priority: 10, expiration: 86_400),
                    sentAfter: before
                )
                try await expectApnsIDs(of: commented.jobID, client: client, relay: relay)
                await client.close()
            }
        }

        // MARK: argus (seed 003)

        @Test func argusSecurityAlertCarriesTheFullApsAndCustomKeys() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("argus")
                let phone = randomToken()
                _ = try await client.registerDevice(registration(user: "owner", token: phone))
                let custom: [String: JSONValue] = [
                    "event_id": "evt-123456", "camera_id": "cam-789", "camera_name": "Front Door",
                    "smart_detection_type": "person",
                    "thumbnail_url": "https://argusai.local/api/v1/events/evt-123456/thumbnail",
                ]
                var send = Pushrelay_V1_Send()
                send.notificationType = "person"
                send.userIds = ["owner"]
                send.templateValues = ["camera_id": "789"]
                send.alert.title = "Front Door: Person Detected"
                send.alert.subtitle = "Front Door Camera"
                send.alert.body = "A person was detected at the front door at 10:30 AM"
                send.badge = 1
                send.sound = "default"
                send.mutableContent = true
                send.customJson = try jsonText(custom)
                send.wait = true
                let before = Date()
                let result = try await client.send(send)
                #expect(result.outcomes.map(\.outcome) == ["delivered"])
                #expect(result.outcomes.map(\.environment) == [.production])
                let request = try #require(relay.requests(to: phone).only)
                var expected = custom
                expected["aps"] = [
                    "alert": [
                        "title": "Front Door: Person Detected", "subtitle": "Front Door Camera",
                        "body": "A person was detected at the front door at 10:30 AM",
                    ],
                    "badge": 1, "sound": "default", "mutable-content": 1, "category": "SECURITY_ALERT",
                    "thread-id": "cam-789", "interruption-level": "time-sensitive",
                ]
                #expect(try payload(of: request) == expected)
                expectHeaders(
                    request, .init(topic: "com.argusai.app", pushType: "alert", priority: 10, expiration: 3_600),
                    sentAfter: before
                )
                try await expectApnsIDs(of: result.jobID, client: client, relay: relay)
                await client.close()
            }
        }

        @Test func argusUnregisteredTokenIsDeactivatedAndReportedAsDead() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("argus")
                let events = try await client.subscribeResults(receipts: false)
                _ = try await client.registerDevice(registration(user: "owner", token: RelayHarness.deadToken))
                var send = Pushrelay_V1_Send()
                send.notificationType = "doorbell"
                send.userIds = ["owner"]
                send.templateValues = ["camera_id": "12"]
                send.alert.title = "Doorbell"
                send.alert.body = "Someone is at the door"
                send.wait = true
                let result = try await client.send(send)
                let outcome = try #require(result.outcomes.only)
                #expect(outcome.outcome == "dead_token")
                #expect(outcome.reason == "Unregistered")
                #expect(outcome.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                let request = try #require(relay.requests(to: RelayHarness.deadToken).only)
                #expect(request.status == 410)

                let dead = try #require(await firstDeadToken(in: events, within: .seconds(10)))
                #expect(dead.token == RelayHarness.deadToken)
                #expect(dead.userID == "owner")
                #expect(dead.reason == "Unregistered")
                #expect(dead.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                #expect(dead.jobID == result.jobID)
                let device = try #require(try await client.listDevices(userID: "owner").devices.only)
                #expect(!device.active)
                #expect(device.invalidatedAtMs == RelayHarness.deadTokenTimestamp)
                let rows = try await deliveries(of: result.jobID, client: client)
                #expect(rows.map(\.outcome) == ["dead_token"])

                // The next alert does not try the dead token again.
                let again = try await client.send(send)
                #expect(again.outcomes.map(\.reason) == ["no_device"])
                #expect(relay.requests(to: RelayHarness.deadToken).count == 1)
                await client.close()
            }
        }

        // MARK: anky (seed 004)

        @Test func ankyTokensAreReplacedOnLaunchAndRemovedOnLogout() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("anky")
                let first = randomToken()
                let second = randomToken()
                let created = try await client.registerDevice(registration(user: "ada", token: first))
                #expect(created.status == .created)
                let replaced = try await client.registerDevice(registration(user: "ada", token: second))
                #expect(replaced.status == .replaced)
                #expect(replaced.replacedToken == first)
                #expect(try await client.listDevices(userID: "ada").devices.map(\.token) == [second])

                var logout = Pushrelay_V1_UnregisterDevice()
                logout.userID = "ada"
                logout.platform = "ios"
                #expect(try await client.unregisterDevice(logout).removed == 1)
                #expect(try await client.listDevices(userID: "ada").devices.isEmpty)
                await client.close()
            }
        }

        @Test func ankyDailyPushGivesEachUserTheirOwnMessageAtItsTime() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("anky")
                let stale = randomToken()
                let tokens = ["ada": randomToken(), "bob": randomToken(), "cy": randomToken(), "dee": randomToken()]
                _ = try await client.registerDevice(registration(user: "ada", token: stale))
                for (user, token) in tokens.sorted(by: { $0.key < $1.key }) {
                    let environment: Pushrelay_V1_Environment = user == "bob" ? .sandbox : .production
                    _ = try await client.registerDevice(
                        registration(user: user, token: token, environment: environment))
                }
                // dee logged out before the cron ran.
                var logout = Pushrelay_V1_UnregisterDevice()
                logout.userID = "dee"
                logout.platform = "ios"
                #expect(try await client.unregisterDevice(logout).removed == 1)

                let messages = [
                    "ada": "you haven't written in 3 days. the page doesn't judge. 8 minutes.",
                    "bob": "yesterday you wrote about your daughters. what came after that?",
                    "cy": "what did the morning feel like?",
                    "dee": "the page is waiting.",
                ]
                // Far enough ahead that the four jobs are written while it is still to come, on a loaded machine too.
                let sendAt = unixMilliseconds(Date()) + 6_000
                let day = localTime(Date(), in: "UTC").prefix(10)
                var jobs: [String: String] = [:]
                for (user, message) in messages.sorted(by: { $0.key < $1.key }) {
                    var send = Pushrelay_V1_Send()
                    send.notificationType = "daily_prompt"
                    send.userIds = [user]
                    send.alert.title = "anky"
                    send.alert.body = message
                    send.sound = "default"
                    send.badge = 1
                    send.sendAtMs = sendAt
                    send.idempotencyKey = "daily-\(day)-\(user)"
                    let answer = try await client.send(send)
                    #expect(answer.job.state == .scheduled)
                    jobs[user] = answer.jobID
                }

                for user in ["ada", "bob", "cy"] {
                    let token = try #require(tokens[user])
                    let request = try #require(await relay.awaitRequests(to: token).only, "\(user)")
                    #expect(unixMilliseconds(request.receivedAt) >= sendAt)
                    let expected: [String: JSONValue] = [
                        "aps": [
                            "alert": ["title": "anky", "body": .string(messages[user]!)], "sound": "default",
                            "badge": 1,
                        ]
                    ]
                    #expect(try payload(of: request) == expected, "\(user)")
                    expectHeaders(
                        request, .init(topic: "com.anky.app", pushType: "alert", priority: 10, expiration: 43_200),
                        sentAfter: Date(timeIntervalSince1970: Double(sendAt) / 1000)
                    )
                }
                let dee = try await waitForJob(jobs["dee"]!, client: client) { $0.state.isFinished }
                #expect(dee.state == .completed && dee.skipped == 1 && dee.delivered == 0)
                #expect(try await deliveries(of: jobs["dee"]!, client: client).map(\.reason) == ["no_device"])
                for user in ["ada", "bob", "cy"] {
                    let job = try await waitForJob(jobs[user]!, client: client) { $0.state.isFinished }
                    #expect(job.state == .completed && job.delivered == 1, "\(user)")
                    try await expectApnsIDs(of: jobs[user]!, client: client, relay: relay)
                }
                #expect(relay.simulator.receivedRequests().count == 3)
                #expect(relay.requests(to: stale).isEmpty && relay.requests(to: tokens["dee"]!).isEmpty)
                await client.close()
            }
        }
    }
}

// MARK: - Helpers

/// The `apns-*` headers a notification type gives.
private struct TypeHeaders {
    var topic: String
    var pushType: String
    var priority: Int
    /// Seconds after sending; `nil`: no `apns-expiration` header.
    var expiration: Int64?
}

/// Checks the request line and every `apns-*` header of `request`: topic, push type, priority, an expiration
/// between `sentAfter` and the request's arrival plus the type's seconds (absent without one), the collapse id
/// only when set, and an `apns-id` (when the relay sends one) that the simulator answered with.
private func expectHeaders(
    _ request: APNsSimulatorRequest,
    _ type: TypeHeaders,
    collapseID: String? = nil,
    sentAfter: Date,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(request.method == "POST", sourceLocation: sourceLocation)
    #expect(request.path == "/3/device/\(request.deviceToken ?? "")", sourceLocation: sourceLocation)
    #expect(request.status == 200, sourceLocation: sourceLocation)
    #expect(request.header("apns-topic") == type.topic, sourceLocation: sourceLocation)
    #expect(request.header("apns-push-type") == type.pushType, sourceLocation: sourceLocation)
    #expect(request.header("apns-priority") == String(type.priority), sourceLocation: sourceLocation)
    if let seconds = type.expiration {
        let earliest = Int64(sentAfter.timeIntervalSince1970.rounded(.down)) + seconds
        let latest = Int64(request.receivedAt.timeIntervalSince1970.rounded(.down)) + seconds
        let expiration = request.header("apns-expiration").flatMap { Int64($0) }
        #expect(
            expiration.map { (earliest...latest).contains($0) } == true,
            "apns-expiration \(expiration.map(String.init) ?? "absent") not in \(earliest)...\(latest)",
            sourceLocation: sourceLocation)
    } else {
        #expect(request.header("apns-expiration") == nil, sourceLocation: sourceLocation)
    }
    #expect(request.header("apns-collapse-id") == collapseID, sourceLocation: sourceLocation)
    if let apnsID = request.header("apns-id") {
        #expect(apnsID.lowercased() == request.apnsID.lowercased(), sourceLocation: sourceLocation)
    }
    var wanted: Set<String> = ["apns-topic", "apns-push-type", "apns-priority"]
    if type.expiration != nil { wanted.insert("apns-expiration") }
    if collapseID != nil { wanted.insert("apns-collapse-id") }
    let sent = Set(request.headers.map(\.name).filter { $0.hasPrefix("apns-") && $0 != "apns-id" })
    #expect(sent == wanted, sourceLocation: sourceLocation)
    let apnsHeaders = request.headers.map(\.name).filter { $0.hasPrefix("apns-") }
    #expect(apnsHeaders.count == Set(apnsHeaders).count, "an apns-* header is repeated", sourceLocation: sourceLocation)
}

/// Every delivered row of the job carries the `apns-id` the simulator answered for its token.
private func expectApnsIDs(
    of jobID: String,
    client: PushRelayClient,
    relay: RelayHarness,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let delivered = try await deliveries(of: jobID, client: client).filter { $0.outcome == "delivered" }
    #expect(!delivered.isEmpty, sourceLocation: sourceLocation)
    for row in delivered {
        let answered = relay.requests(to: row.token).map(\.apnsID)
        #expect(!row.apnsID.isEmpty && answered.contains(row.apnsID), sourceLocation: sourceLocation)
    }
}

/// The payload the simulator received, decoded.
private func payload(of request: APNsSimulatorRequest) throws -> [String: JSONValue] {
    try JSONDecoder().decode([String: JSONValue].self, from: Data(request.payload))
}

/// `aps.alert.body` of a received notification.
private func alertBody(of request: APNsSimulatorRequest) -> String? {
    guard case .object(let aps)? = try? payload(of: request)["aps"], case .object(let alert)? = aps["alert"],
        case .string(let body)? = alert["body"]
    else { return nil }
    return body
}

/// `value` as JSON text, for `Send.custom_json`.
private func jsonText(_ value: [String: JSONValue]) throws -> String {
    String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
}

/// circl's event reminder data (seed 000's payload contract).
private let reminderData: [String: JSONValue] = [
    "type": "event_reminder",
    "payload": ["event_id": 41, "circle_id": 7, "title": "Board games", "start_time": "2026-11-21T18:00:00Z"],
]

/// Milliseconds since 1970.
private func unixMilliseconds(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
}

/// The wall-clock time of `date` in `zone`, as `send_at_local` takes it: `YYYY-MM-DDTHH:MM:SS`.
private func localTime(_ date: Date, in zone: String) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: zone)!
    let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
    return String(
        format: "%04d-%02d-%02dT%02d:%02d:%02d", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!,
        parts.second!)
}

/// The instant at which `zone`'s wall clock shows `local` (`YYYY-MM-DDTHH:MM:SS`).
private func instant(of local: String, in zone: String) -> Date? {
    let numbers = local.split(whereSeparator: { "-T:".contains($0) }).compactMap { Int($0) }
    guard numbers.count == 6 else { return nil }
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: zone)!
    return calendar.date(
        from: DateComponents(
            year: numbers[0], month: numbers[1], day: numbers[2], hour: numbers[3], minute: numbers[4],
            second: numbers[5]))
}

/// The job's delivery rows.
private func deliveries(of jobID: String, client: PushRelayClient) async throws -> [Pushrelay_V1_Delivery] {
    var query = Pushrelay_V1_QueryDeliveries()
    query.jobID = jobID
    return try await client.queryDeliveries(query).deliveries
}

/// The job's delivery rows once `done` holds for them, or after 15 seconds.
private func waitForDeliveries(
    of jobID: String,
    client: PushRelayClient,
    until done: ([Pushrelay_V1_Delivery]) -> Bool
) async throws -> [Pushrelay_V1_Delivery] {
    let end = ContinuousClock.now + .seconds(15)
    var rows = try await deliveries(of: jobID, client: client)
    while !done(rows), ContinuousClock.now < end {
        try await Task.sleep(for: .milliseconds(50))
        rows = try await deliveries(of: jobID, client: client)
    }
    return rows
}

/// The job's status once `done` holds for it, or after 15 seconds.
private func waitForJob(
    _ jobID: String,
    client: PushRelayClient,
    until done: (Pushrelay_V1_Job) -> Bool
) async throws -> Pushrelay_V1_Job {
    let end = ContinuousClock.now + .seconds(30)
    var job = try await client.jobStatus(jobID: jobID)
    while !done(job), ContinuousClock.now < end {
        try await Task.sleep(for: .milliseconds(50))
        job = try await client.jobStatus(jobID: jobID)
    }
    return job
}

/// The first dead token of a results stream, or `nil` when none comes within `limit`.
private func firstDeadToken(
    in events: AsyncStream<Pushrelay_V1_ResultEvent>,
    within limit: Duration
) async -> Pushrelay_V1_DeadToken? {
    await withTaskGroup(of: Pushrelay_V1_DeadToken?.self) { group in
        group.addTask {
            for await event in events {
                if case .deadToken(let dead) = event.event { return dead }
            }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

extension Pushrelay_V1_JobState {
    /// Whether a job in this state is over.
    fileprivate var isFinished: Bool { self == .completed || self == .failed || self == .cancelled }
}

extension Collection {
    /// The only element, or `nil` when there are none or several.
    fileprivate var only: Element? { count == 1 ? first : nil }
}

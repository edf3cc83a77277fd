import Foundation
import PushRelayClient
import PushRelayProtocol
import RelayStore
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// A second provider behind the seam (``RecordingService``, registered beside APNs): its devices go through the
    /// same registration, fan-out, policy, holds and records, each with its provider's rendering.
    @Suite struct ProviderSeamTests {
        /// An FCM-style token: mixed case, colons, no hex.
        static let opaqueToken = "cX9f-Qm2:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_Mixed_Case:tail"

        /// Runs `body` with a relay that serves the recording provider beside APNs (without its fan-out when
        /// `fanOut` is false: the test runs it).
        static func withRecordingRelay(
            fanOut: Bool = true, _ body: @Sendable (RelayHarness, RecordingService) async throws -> Void
        ) async throws {
            let service = RecordingService()
            try await RelayHarness.with(configureRelay: { $0.additionalServices = [service] }, fanOut: fanOut) {
                relay in
                try await body(relay, service)
            }
        }

        static func recordingDevice(user: String, token: String) -> Pushrelay_V1_RegisterDevice {
            var request = Pushrelay_V1_RegisterDevice()
            request.userID = user
            request.token = token
            request.platform = "android"
            request.provider = RecordingService.provider.rawValue
            request.timeZone = "Europe/Zurich"
            return request
        }

        @Test func aTokenOfAnotherProviderIsKeptByteForByteAndRefusedForAPNs() async throws {
            try await Self.withRecordingRelay { relay, service in
                let client = relay.client("circl")
                let token = Self.opaqueToken
                let registered = try await client.registerDevice(Self.recordingDevice(user: "ada", token: token))
                #expect(registered.status == .created)
                #expect(registered.device.token == token && registered.device.provider == "recording")
                #expect(registered.device.environment == .unspecified)

                // The same token for APNs (the default provider) is no APNs token.
                var apns = registration(user: "ada", token: token)
                apns.provider = ""
                let refused = await relayError { try await client.registerDevice(apns) }
                #expect(refused?.code == .invalidArgument && refused?.field == "register_device.token")
                // A provider the relay does not serve is refused, naming the field.
                var unknown = Self.recordingDevice(user: "ada", token: token)
                unknown.provider = "webpush"
                let unserved = await relayError { try await client.registerDevice(unknown) }
                #expect(unserved?.code == .invalidArgument && unserved?.field == "register_device.provider")

                let result = try await client.send(circlMessage(to: ["ada"]))
                #expect(result.outcomes.map(\.outcome) == ["delivered"])
                let outcome = try #require(result.outcomes.first)
                #expect(outcome.token == token && outcome.providerMessageID.hasPrefix("recording/messages/"))
                #expect(outcome.apnsID.isEmpty)
                #expect(service.pool.requests.map(\.token) == [token])

                var byToken = Pushrelay_V1_QueryDeliveries()
                byToken.token = token
                let rows = try await client.queryDeliveries(byToken).deliveries
                #expect(rows.map(\.token) == [token])
                #expect(rows.first?.providerMessageID == outcome.providerMessageID && rows.first?.apnsID == "")
                // Byte for byte: the lower-cased token is another token.
                byToken.token = token.lowercased()
                #expect(try await client.queryDeliveries(byToken).deliveries.isEmpty)
                #expect(try await client.listDevices(userID: "ada").devices.map(\.token) == [token])
                // A SEND to tokens finds it byte for byte too; its lower-cased form is no device.
                var byTokens = circlMessage(to: [])
                byTokens.userIds = []
                byTokens.tokens = [token, token.lowercased()].map { value in
                    Pushrelay_V1_TokenTarget.with { $0.token = value }
                }
                let sent = try await client.send(byTokens).outcomes
                #expect(sent.first { $0.token == token }?.outcome == "delivered")
                #expect(sent.first { $0.token == token.lowercased() }?.reason == "no_device")
                await client.close()
            }
        }

        @Test func aMixedAudienceGetsEachDeviceItsProvidersRendering() async throws {
            try await Self.withRecordingRelay { relay, service in
                let client = relay.client("circl")
                let apnsToken = randomToken()
                _ = try await client.registerDevice(registration(user: "ada", token: apnsToken))
                _ = try await client.registerDevice(Self.recordingDevice(user: "ada", token: "ada:pixel"))
                _ = try await client.registerDevice(Self.recordingDevice(user: "bob", token: "bob:pixel"))
                let result = try await client.send(circlMessage(to: ["ada", "bob"]))
                #expect(result.outcomes.count == 3 && result.outcomes.allSatisfy { $0.outcome == "delivered" })
                let apnsOutcome = try #require(result.outcomes.first { $0.token == apnsToken })
                #expect(apnsOutcome.environment == .production && !apnsOutcome.apnsID.isEmpty)
                #expect(apnsOutcome.providerMessageID == apnsOutcome.apnsID)

                // APNs got its headers and payload for ada's iPhone only.
                let apnsRequests = relay.simulator.receivedRequests()
                #expect(apnsRequests.compactMap(\.deviceToken) == [apnsToken])
                let payload = try JSONSerialization.jsonObject(with: Data(try #require(apnsRequests.first).payload))
                let aps = (payload as? [String: Any])?["aps"] as? [String: Any]
                #expect(aps?["thread-id"] as? String == "circle-7-channel-3")
                // The recording provider got its own rendering, made once for the job, for the two others.
                let recorded = service.pool.requests
                #expect(Set(recorded.map(\.token)) == ["ada:pixel", "bob:pixel"])
                #expect(
                    Set(recorded.map(\.rendering)) == [
                        RecordingRendering(
                            notificationType: "message", title: "Ada", body: "See you at 8",
                            threadID: "circle-7-channel-3", data: ["circle_id": "7", "channel_id": "3"])
                    ])
                #expect(recorded.allSatisfy { ($0.expiration ?? 0) > Int64(Date().timeIntervalSince1970) })
                await client.close()
            }
        }

        @Test func theSameUserPolicyHoldsForItsDevices() async throws {
            try await Self.withRecordingRelay { relay, service in
                let client = relay.client("circl")
                _ = try await client.registerDevice(Self.recordingDevice(user: "ada", token: "ada:pixel"))
                _ = try await client.registerDevice(Self.recordingDevice(user: "bob", token: "bob:pixel"))
                _ = try await client.registerDevice(Self.recordingDevice(user: "cat", token: "cat:pixel"))
                var mute = Pushrelay_V1_SetMute()
                mute.userID = "ada"
                mute.threadID = "circle-7-channel-3"
                _ = try await client.setMute(mute)
                _ = try await client.setPresence(userID: "bob", threadID: "circle-7-channel-3", seconds: 60)
                var send = circlMessage(to: ["ada", "bob", "cat"])
                send.idempotencyKey = "provider-seam-1"
                let result = try await client.send(send)
                let byUser = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.userID, $0) })
                #expect(byUser["ada"]?.outcome == "skipped" && byUser["ada"]?.reason == "muted")
                #expect(byUser["bob"]?.outcome == "skipped" && byUser["bob"]?.reason == "active")
                #expect(byUser["cat"]?.outcome == "delivered")
                // The same idempotency key sends nothing again.
                let again = try await client.send(send)
                #expect(again.duplicate && again.jobID == result.jobID)
                #expect(service.pool.requests.map(\.token) == ["cat:pixel"])
                await client.close()
            }
        }

        @Test func preferencesQuietHoursCapsAndSchedulesApplyToItsDevices() async throws {
            try await Self.withRecordingRelay { relay, service in
                let client = relay.client("circl")
                // circl defers announcements in its quiet hours (23:00-07:00): it is 03:00 for night, noon for
                // the others.
                for (user, hour) in [("night", 3), ("optout", 12), ("awake", 12)] {
                    var device = Self.recordingDevice(user: user, token: "\(user):pixel")
                    device.timeZone = PolicyEndToEndTests.zone(atLocalHour: hour)
                    _ = try await client.registerDevice(device)
                }
                _ = try await client.setPreferences(PolicyEndToEndTests.optOut("optout", of: "announcement"))
                let announcement = PolicyEndToEndTests.announcement(to: ["night", "optout", "awake"])
                let result = try await client.send(announcement)
                let byUser = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.userID, $0) })
                #expect(byUser["optout"]?.outcome == "skipped" && byUser["optout"]?.reason == "opted_out")
                #expect(byUser["night"]?.outcome == "deferred" && byUser["night"]?.reason == "quiet_hours")
                #expect(byUser["awake"]?.outcome == "delivered")

                // A scheduled send goes out when due, not before.
                var later = announcement
                later.userIds = ["awake"]
                later.wait = false
                let due = Date().addingTimeInterval(1.5)
                later.sendAtMs = Int64(due.timeIntervalSince1970 * 1000)
                let scheduled = try await client.send(later)
                #expect(try await client.jobStatus(jobID: scheduled.jobID).state == .scheduled)
                var state = Pushrelay_V1_JobState.scheduled
                for _ in 0..<100 where state != .completed {
                    try await Task.sleep(for: .milliseconds(100))
                    state = try await client.jobStatus(jobID: scheduled.jobID).state
                }
                #expect(state == .completed && Date() >= due)
                #expect(service.pool.requests.map(\.token) == ["awake:pixel", "awake:pixel"])
                await client.close()

                // anky caps daily_prompt at one per user and day.
                let anky = relay.client("anky")
                _ = try await anky.registerDevice(Self.recordingDevice(user: "writer", token: "writer:pixel"))
                var prompt = Pushrelay_V1_Send()
                prompt.notificationType = "daily_prompt"
                prompt.userIds = ["writer"]
                prompt.alert.body = "What did you notice today?"
                prompt.wait = true
                #expect(try await anky.send(prompt).outcomes.map(\.outcome) == ["delivered"])
                let capped = try await anky.send(prompt).outcomes
                #expect(capped.map(\.outcome) == ["skipped"] && capped.map(\.reason) == ["capped"])
                await anky.close()
            }
        }

        @Test func itsReceiptsAndDeadTokensComeOnTheResultsStream() async throws {
            try await Self.withRecordingRelay { relay, _ in
                let client = relay.client("circl")
                let events = try await client.subscribeResults(receipts: true)
                _ = try await client.registerDevice(Self.recordingDevice(user: "gone", token: "dead:Gone-Pixel"))
                _ = try await client.registerDevice(Self.recordingDevice(user: "here", token: "here:Pixel"))
                _ = try await client.send(circlMessage(to: ["gone", "here"]))
                var seen: [Pushrelay_V1_ResultEvent] = []
                for await event in events {
                    seen.append(event)
                    if seen.count == 2 { break }
                }
                var dead: [String] = []
                var receipts: [Pushrelay_V1_Delivery] = []
                for event in seen {
                    switch event.event {
                    case .deadToken(let token): dead.append(token.token)
                    case .receipt(let receipt): receipts.append(receipt)
                    default: break
                    }
                }
                #expect(dead == ["dead:Gone-Pixel"])
                #expect(receipts.map(\.token) == ["here:Pixel"])
                #expect(receipts.first?.providerMessageID.hasPrefix("recording/messages/") == true)
                await client.close()
            }
        }

        @Test func aPageOfItsDevicesTakenOverFromADeadRelaySendsOnlyWhatWasNotRecorded() async throws {
            try await Self.withRecordingRelay(fanOut: false) { relay, service in
                let client = relay.client("circl")
                for user in ["ann", "bob", "cat"] {
                    _ = try await client.registerDevice(Self.recordingDevice(user: user, token: "\(user):Pixel"))
                }
                let jobID = try await client.send(circlMessage(to: ["ann", "bob", "cat"], wait: false)).jobID
                // Another relay plans the job as one page, leases it, records ann's delivery and dies (its lease
                // ran out at once).
                let store = relay.store
                let job = try #require(try await store.claimJobForPlanning(owner: "dead", lease: .seconds(30)))
                #expect(job.id == jobID)
                let written = try await store.addListedJobPage(
                    jobID: jobID, tenant: "circl", page: 1, dueAt: Date(), recipients: .users(["ann", "bob", "cat"]),
                    excludedUsers: [])
                #expect(
                    written.devices.map(\.destination)
                        == Array(repeating: Destination(provider: RecordingService.provider), count: 3))
                try await store.finishPlanning(jobID: jobID, owner: "dead")
                _ = try #require(try await store.claimJobPage(owner: "dead", lease: .zero))
                try await store.recordDeliveries(
                    [
                        DeliveryRecord(
                            tenantID: "circl", jobID: jobID, userID: "ann", token: "ann:Pixel", outcome: .delivered,
                            sentAt: Date(), answeredAt: Date(), notificationType: "message")
                    ], batchSize: 10)

                let status = try await relay.runFanOut(until: jobID, client: client)
                #expect(status.state == .completed && status.delivered == 3 && status.failed == 0)
                #expect(service.pool.requests.map(\.token).sorted() == ["bob:Pixel", "cat:Pixel"])
                await client.close()
            }
        }

        @Test func itsDeadTokenAnswerDeactivatesTheDeviceAndItsOutageHoldsIt() async throws {
            try await Self.withRecordingRelay { relay, service in
                let client = relay.client("circl")
                _ = try await client.registerDevice(Self.recordingDevice(user: "ada", token: "dead:Ada-Pixel"))
                _ = try await client.registerDevice(Self.recordingDevice(user: "bob", token: "down:Bob-Pixel"))
                let result = try await client.send(circlMessage(to: ["ada", "bob"]))
                let byUser = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.userID, $0) })
                #expect(byUser["ada"]?.outcome == "dead_token" && byUser["ada"]?.reason == "UNREGISTERED")
                #expect(byUser["ada"]?.invalidatedAtMs ?? 0 > 0)
                #expect(byUser["bob"]?.outcome == "waiting" && byUser["bob"]?.reason == "UNAVAILABLE")
                let ada = try await client.listDevices(userID: "ada").devices
                #expect(ada.map(\.token) == ["dead:Ada-Pixel"] && ada.first?.active == false)
                let held = try await relay.store.heldDeliveries()
                #expect(held.map(\.environment) == ["recording"] && held.map(\.devices) == [1])
                #expect(service.pool.requests.map(\.token).sorted() == ["dead:Ada-Pixel", "down:Bob-Pixel"])
                await client.close()
            }
        }
    }
}

/// The relay's error a call failed with, or `nil` when it succeeded or failed otherwise.
func relayError(_ call: () async throws -> some Any) async -> ProtocolError? {
    do {
        _ = try await call()
        return nil
    } catch let error as PushRelayClientError {
        return error.relayError
    } catch {
        return nil
    }
}

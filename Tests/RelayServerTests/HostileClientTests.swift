import Foundation
import NIOCore
import NIOPosix
import PushRelayClient
import PushRelayProtocol
import RelayServer
import RelayStore
import Synchronization
import Testing

extension RelayServerSuites {
    /// What one tenant's backend can send the relay that it must survive: times beyond the calendar, NUL bytes,
    /// extremes in every integer field. Each is answered with a typed error (or a valid answer), nothing reaches
    /// PostgreSQL that it would refuse, and the relay goes on serving.
    @Suite struct HostileInputTests {
        @Test func timesBeyondTheCalendarAreRefusedAndAnAllTimeQueryIsAnswered() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                for until in [Int64.max, Int64.min, 9_300_000_000_000_000, -1] {
                    var mute = Pushrelay_V1_SetMute()
                    mute.userID = "ada"
                    mute.threadID = "t"
                    mute.untilMs = until
                    #expect(await fieldError { try await client.setMute(mute) } == "set_mute.until_ms")
                }
                for sendAt in [Int64.max, Int64.min, -1, 1] {
                    var send = circlMessage(to: ["ada"], wait: false)
                    send.sendAtMs = sendAt
                    #expect(await fieldError { try await client.send(send) } == "send.send_at_ms")
                }
                var allTime = Pushrelay_V1_QueryDeliveries()
                allTime.fromMs = 0
                allTime.toMs = .max
                let everything = try await client.queryDeliveries(allTime)
                #expect(everything.deliveries.isEmpty)
                allTime.fromMs = .min
                #expect(await fieldError { try await client.queryDeliveries(allTime) } == "query_deliveries.from_ms")
                let pong = try await client.ping(nonce: .max)
                #expect(pong == .max)
                await client.close()
            }
        }

        @Test func extremesOfEveryIntegerFieldAreAnsweredWithTheFieldAtFault() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                var send = circlMessage(to: ["ada"], wait: false)
                send.expiration = .max
                #expect(await fieldError { try await client.send(send) } == "send.expiration")
                send.expiration = .min
                #expect(await fieldError { try await client.send(send) } == "send.expiration")
                send = circlMessage(to: ["ada"], wait: false)
                send.priority = .max
                #expect(await fieldError { try await client.send(send) } == "send.priority")
                send = circlMessage(to: ["ada"], wait: false)
                send.relevanceScore = .nan
                #expect(await fieldError { try await client.send(send) } == "send.relevance_score")
                send = circlMessage(to: ["ada"], wait: false)
                send.badge = .max
                let accepted = try await client.send(send)
                #expect(!accepted.jobID.isEmpty)
                #expect(
                    await fieldError { try await client.setPresence(userID: "ada", threadID: "t", seconds: .max) }
                        == "set_presence.seconds")
                var query = Pushrelay_V1_QueryDeliveries()
                query.userID = "ada"
                query.limit = .max
                #expect(await fieldError { try await client.queryDeliveries(query) } == "query_deliveries.limit")
                let pong = try await client.ping(nonce: 1)
                #expect(pong == 1)
                await client.close()
            }
        }

        @Test func aNulInAUserIDIsRefusedAsTheClientsFaultAndNothingIsAccepted() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ok-user", token: randomToken()))
                #expect(
                    await fieldError { try await client.send(circlMessage(to: ["nul\u{0}x", "ok-user"])) }
                        == "send.user_ids")
                #expect(
                    await fieldError {
                        try await client.registerDevice(registration(user: "a\u{0}b", token: randomToken()))
                    }
                        == "register_device.user_id")
                #expect(
                    await fieldError {
                        try await client.registerDevice(registration(user: "a\nb", token: randomToken()))
                    }
                        == "register_device.user_id")
                // No job was accepted for the refused send: the valid user's send goes through on its own.
                let result = try await client.send(circlMessage(to: ["ok-user"]))
                #expect(result.outcomes.map(\.outcome) == ["delivered"])
                await client.close()
            }
        }

        @Test func tokensTimeZonesAndEnvironmentsAreCheckedAtRegistration() async throws {
            try await RelayHarness.with { relay in
                let circl = relay.client("circl")
                for token in ["ab", String(repeating: "a", count: 400), String(repeating: "z", count: 64)] {
                    #expect(
                        await fieldError { try await circl.registerDevice(registration(user: "ada", token: token)) }
                            == "register_device.token")
                }
                var mars = registration(user: "ada", token: randomToken())
                mars.timeZone = "Mars/Olympus"
                #expect(await fieldError { try await circl.registerDevice(mars) } == "register_device.time_zone")
                await circl.close()
                // argus sends only to its production app: a sandbox token would never be delivered.
                let argus = relay.client("argus")
                let sandbox = registration(user: "owner", token: randomToken(), environment: .sandbox)
                #expect(await fieldError { try await argus.registerDevice(sandbox) } == "register_device.environment")
                await argus.close()
            }
        }

        @Test func aTypeWithASubscriptionReachesOnlyTheDevicesSubscribedToIt() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("familyportal")
                let chatDevice = randomToken()
                let photosDevice = randomToken()
                _ = try await client.registerDevice(registration(user: "mum", token: chatDevice, topics: ["chat"]))
                _ = try await client.registerDevice(registration(user: "mum", token: photosDevice, topics: ["photos"]))
                var send = familyChat()
                send.topic = ""
                send.userIds = ["mum"]
                send.wait = true
                let result = try await client.send(send)
                #expect(result.outcomes.map(\.token) == [chatDevice])
                #expect(await fieldError { try await client.send(familyChat(topic: "photos")) } == "send.topic")
                await client.close()
            }
        }

        @Test func aClientLearnsItsTenantsNotificationTypesFromARequest() async throws {
            try await RelayHarness.with { relay in
                let family = relay.client("familyportal")
                let types = try await family.notificationTypes().types
                let chat = try #require(types.first { $0.name == "chat_message" })
                #expect(chat.subscription == "chat" && chat.pushType == "alert" && chat.priority == 10)
                await family.close()
                let circl = relay.client("circl")
                let circlList = try await circl.notificationTypes()
                let circlTypes = circlList.types
                #expect(circlTypes.map(\.name) == circlTypes.map(\.name).sorted())
                let message = try #require(circlTypes.first { $0.name == "message" })
                #expect(message.templateValues == ["channel_id", "circle_id"])
                // What a backend needs of its tenant's configuration, as circl.yaml says it.
                let announcement = try #require(circlTypes.first { $0.name == "announcement" })
                #expect(announcement.maxPerDay == 20 && announcement.maxPerHour == 0)
                #expect(announcement.quietHoursAction == "defer" && message.quietHoursAction == "pass")
                #expect(message.environments.contains(.production) && message.expirationSeconds > 0)
                #expect(circlList.tokenPolicy == "token_moves_to_last_user" && circlList.notificationsPerSecond == 500)
                #expect(circlList.quietHoursStart == "23:00" && circlList.quietHoursEnd == "07:00")
                #expect(!circlTypes.contains { $0.name == "chat_message" })
                await circl.close()
            }
        }

        @Test func aConnectionHoldsABoundedNumberOfSubscriptions() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                let hello = try #require(
                    await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(hello.kind == FrameKind.hello.answer)
                #expect(try hello.decode(Pushrelay_V1_HelloOk.self).server == "pushrelay/\(RelayVersion.current)")
                var subscribe = Pushrelay_V1_SubscribeResults()
                subscribe.receipts = true
                for id in 1...ConnectionBounds.maximumSubscriptions {
                    try await connection.send(kind: .subscribeResults, requestID: UInt32(10 + id), message: subscribe)
                    #expect(await connection.next()?.kind == FrameKind.subscribeResults.answer)
                }
                try await connection.send(kind: .subscribeResults, requestID: 999, message: subscribe)
                #expect(await connection.nextError() == .invalidArgument)
                #expect(try await connection.pingWorks())
                await connection.close()
            }
        }

        @Test func aRequestIDInFlightAgainIsRefusedOnRequestIDZero() async throws {
            let registry = testMetricsRegistry
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                var send = circlMessage(to: ["ada"])
                send.wait = true
                _ = try await relay.client("circl").registerDevice(registration(user: "ada", token: randomToken()))
                try await connection.send(kind: .send, requestID: 5, message: send)
                try await connection.send(kind: .send, requestID: 5, message: send)
                var answers: [Frame] = []
                for _ in 0..<2 {
                    if let frame = await connection.next() { answers.append(frame) }
                }
                let refusal = try #require(answers.first { $0.kind == .error })
                #expect(refusal.requestID == 0)
                let error = try refusal.decode(Pushrelay_V1_Error.self)
                // On request id 0, naming the reused id as a field and as a number.
                #expect(error.code == .duplicateRequestID && error.field == "request_id" && error.requestID == 5)
                #expect(answers.contains { $0.kind == FrameKind.send.answer && $0.requestID == 5 })
                await connection.close()
            }
            // Counted under the code's name as the spec spells it.
            #expect(registry.emitToString().contains(#"outcome="DUPLICATE_REQUEST_ID""#))
        }
    }

    /// A backend that sends and never reads, before HELLO or after it: the relay stops reading its socket once
    /// its answers wait (so the answers it holds for that peer stay under the bound), goes on serving the others,
    /// and closes the connection after the write-stall timeout.
    @Suite struct PeerThatDoesNotReadTests {
        @Test(arguments: [false, true])
        func aFloodingPeerThatDoesNotReadIsNotReadAndIsClosed(authenticated: Bool) async throws {
            try await RelayHarness.with(configure: { $0.writeStallTimeout = .seconds(5) }) { relay in
                let flooder = try await NonReadingConnection.connect(port: relay.listener.port, group: relay.group)
                if authenticated {
                    var hello = Pushrelay_V1_Hello()
                    (hello.minVersion, hello.maxVersion) = (1, 1)
                    hello.tenant = "circl"
                    hello.credential = relay.credentials["circl"]!
                    flooder.write(FrameEncoder().frame(kind: .hello, requestID: 1, message: hello))
                }
                // Requests of 12 bytes whose answers are larger (the tenant's notification types, RATE_LIMITED, or
                // HELLO_REQUIRED before HELLO): a relay that read on would hold megabytes of answers.
                var chunk = ByteBuffer()
                for id in 0..<8_192 {
                    chunk.writeImmutableBuffer(
                        FrameEncoder().frame(
                            kind: .listNotificationTypes, requestID: UInt32(2 + id),
                            message: Pushrelay_V1_ListNotificationTypes()))
                }
                let sampler = Task {
                    var largest = 0
                    while !Task.isCancelled {
                        largest = max(largest, await relay.listener.largestAnswerBacklog())
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                    return largest
                }
                _ = try await flooder.flood(chunk, totalBytes: 64 << 20, stalledFor: .seconds(3))
                sampler.cancel()
                let backlog = await sampler.value
                // The high-water mark, plus the answers of the frames handled in the turn that crossed it (a relay
                // that read on holds megabytes).
                #expect(backlog <= 1 << 20, "the relay held \(backlog) bytes of answers for a peer that does not read")
                // Others are served meanwhile (another tenant: the flooder's credential may be out of tokens).
                let other = relay.client("familyportal")
                #expect(try await other.ping(nonce: 3) == 3)
                // The flooder's connection is closed after the write-stall timeout.
                #expect(await eventually(within: 30) { relay.listener.connectionCount == 1 })
                await other.close()
                flooder.close()
            }
        }
    }

    /// Rights lost while a connection is open end it within ``RelayService/rightsLifetime`` and one check
    /// interval: a revoked credential, a disabled tenant.
    @Suite struct RightsOnOpenConnectionTests {
        @Test func aCredentialRevokedWhileItsConnectionIsOpenIsRefusedAndTheConnectionClosed() async throws {
            try await RelayHarness.with { relay in
                let connection = try await RawConnection.connect(port: relay.listener.port, group: relay.group)
                _ = try #require(await connection.hello(tenant: "circl", credential: relay.credentials["circl"]!))
                #expect(try await connection.pingWorks())
                let credential = try #require(try await relay.store.listCredentials(tenant: "circl").first)
                try await relay.store.revokeCredential(tenant: "circl", id: credential.id)
                let refusal = try #require(await connection.next())
                #expect(refusal.kind == .error && refusal.requestID == 0)
                #expect(try refusal.decode(Pushrelay_V1_Error.self).code == .authenticationFailed)
                #expect(await connection.isClosedByRelay())
                await connection.close()
            }
        }

        @Test func aTenantDisabledWhileItsConnectionIsOpenIsRefused() async throws {
            try await RelayHarness.with { relay in
                let client = relay.client("circl")
                #expect(try await client.ping(nonce: 1) == 1)
                try await relay.store.setTenantEnabled(id: "circl", enabled: false)
                #expect(
                    await eventually(within: 10) {
                        await errorCode { try await client.listDevices(userID: "ada") } == .authenticationFailed
                    })
                await client.close()
            }
        }
    }
}

extension RelayServerSuites {
    /// Apple's rule for a 410: its timestamp says when the token stopped being valid, and a registration after
    /// that time stands. The outcome, the registry and the results stream agree on it.
    @Suite struct DeadTokenTimestampTests {
        @Test func a410OlderThanTheRegistrationKeepsTheDeviceAndIsNotADeadToken() async throws {
            try await RelayHarness.with { relay in
                let token = randomToken()
                let client = relay.client("circl")
                _ = try await client.registerDevice(registration(user: "ada", token: token))
                let anHourAgo = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
                relay.simulator.updateFaults { $0.unregisteredTokens[token] = anHourAgo }
                let result = try await client.send(circlMessage(to: ["ada"]))
                let outcome = try #require(result.outcomes.first)
                #expect(outcome.outcome == "failed")
                #expect(outcome.reason.contains("kept"))
                let devices = try await client.listDevices(userID: "ada")
                #expect(devices.devices.map(\.active) == [true])
                await client.close()
            }
        }
    }
}

extension RelayServerSuites {
    /// Nothing accepted stays unfinished: a page that cannot be sent for a reason retrying cannot fix is given up,
    /// its devices recorded failed, and its job finishes.
    @Suite struct PagesThatCannotBeSentTests {
        @Test func aPageWhoseSendPlanCannotBeBuiltIsGivenUpAndItsJobFinishes() async throws {
            try await RelayHarness.with(fanOut: false) { relay in
                let store = relay.store
                // A stored request whose notification type the tenant no longer has: no send plan can be built.
                var send = circlMessage(to: ["ada"], wait: false)
                send.notificationType = "gone"
                let accepted = try await store.createJob(
                    tenant: "circl", notificationType: "gone", idempotencyKey: nil, request: try send.serializedBytes())
                let jobID = accepted.job.id
                // Planned by a process that died after writing its page.
                _ = try #require(try await store.claimJobForPlanning(owner: "dead", lease: .seconds(60)))
                let tokens = [randomToken(), randomToken()]
                _ = try await store.addJobPage(
                    jobID: jobID, tenant: "circl", page: 1, dueAt: Date(), tokens: tokens, users: ["ada", "bob"])
                #expect(try await store.finishPlanning(jobID: jobID, owner: "dead"))
                let client = relay.client("circl")
                let status = try await relay.runFanOut(until: jobID, client: client)
                #expect(status.state == .completed)
                #expect(status.failed == 2 && status.delivered == 0)
                var query = Pushrelay_V1_QueryDeliveries()
                query.jobID = jobID
                let rows = try await client.queryDeliveries(query).deliveries
                #expect(rows.map(\.reason) == ["relay_error", "relay_error"])
                #expect(relay.simulator.receivedRequests().isEmpty)
                await client.close()
            }
        }
    }
}

/// The field an `INVALID_ARGUMENT` names, `nil` when the call succeeded or failed otherwise.
func fieldError(_ call: () async throws -> some Any) async -> String? {
    do {
        _ = try await call()
        return nil
    } catch let error as PushRelayClientError {
        guard let refusal = error.relayError, refusal.code == .invalidArgument else { return nil }
        return refusal.field
    } catch {
        return nil
    }
}

/// A connection that writes and never reads (its channel does not read the socket), counting the bytes the
/// kernel took.
private final class NonReadingConnection: Sendable {
    private let channel: any Channel
    private let flushed = Atomic<Int>(0)

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func connect(port: Int, group: any EventLoopGroup) async throws -> NonReadingConnection {
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.autoRead, value: false)
            .connect(host: "127.0.0.1", port: port)
            .get()
        return NonReadingConnection(channel: channel)
    }

    /// Bytes written to the socket so far.
    var flushedBytes: Int { flushed.load(ordering: .relaxed) }

    /// Writes `bytes` without waiting.
    func write(_ bytes: ByteBuffer) {
        let count = bytes.readableBytes
        channel.writeAndFlush(bytes).whenSuccess { [self] in
            flushed.wrappingAdd(count, ordering: .relaxed)
        }
    }

    /// Offers `chunk` again and again until `totalBytes` are offered or the socket has taken nothing for `stall`
    /// (a peer that stopped reading), at most 2 minutes; returns the bytes offered. ``flushedBytes`` then says
    /// how many the peer took.
    func flood(_ chunk: ByteBuffer, totalBytes: Int, stalledFor stall: Duration) async throws -> Int {
        let end = ContinuousClock.now + .seconds(120)
        var offered = 0
        var lastProgress = (bytes: flushedBytes, at: ContinuousClock.now)
        while ContinuousClock.now < end {
            if flushedBytes != lastProgress.bytes {
                lastProgress = (flushedBytes, ContinuousClock.now)
            } else if ContinuousClock.now - lastProgress.at >= stall {
                break
            }
            if offered < totalBytes, channel.isWritable {
                write(chunk)
                offered += chunk.readableBytes
                await Task.yield()
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        return offered
    }

    func close() {
        channel.close(promise: nil)
    }
}

import APNs
import APNsSimulator
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Testing

@Suite("APNs engine against the simulator")
struct EngineTests {
    @Test func poolIsWarmBeforeTheFirstSend() async throws {
        try await Harness.run { h in
            let pool = try await h.pool {
                $0.connections = 3
                $0.maximumConnections = 3
            }
            let snapshot = try await pool.snapshot()
            #expect(snapshot.connections.count == 3)
            #expect(snapshot.connections.allSatisfy { $0.isReady })
            #expect(h.simulator.statistics().connectionsAccepted == 3)
            #expect(h.simulator.statistics().requestsReceived == 0)
            // Three at once: each connection takes one, as each allows one stream until its first success.
            let first = try await Harness.sendAll(pool, count: 3)
            #expect(first.allSatisfy { $0.outcome == .delivered })
            #expect(try await pool.snapshot().connections.map(\.streamsOpened) == [1, 1, 1])
            // Then 300 at once, over the three connections.
            let reports = try await Harness.sendAll(pool, count: 300)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            let after = try await pool.snapshot()
            #expect(after.connections.map { $0.streamsOpened }.reduce(0, +) == 303)
            #expect(after.connectionsOpened == 3)
            await pool.shutdown()
        }
    }

    @Test func sendsApplesHeadersAndPayload() async throws {
        try await Harness.run(configure: { $0.recordRequests = true }) { h in
            let pool = try await h.pool()
            let apnsID = UUID()
            let token = Harness.randomToken(bytes: 54)
            let notification = try APNsNotification(
                deviceToken: token, bundleID: Harness.topic, pushType: .voip, priority: .powerAware,
                expiration: 1_900_000_000, collapseID: "thread-7", apnsID: apnsID,
                payload: APNsPayload(aps: .init(alert: .text("ring")), custom: ["call": "42"])
            )
            let report = try await pool.send(notification)
            #expect(report.outcome == .delivered)
            #expect(report.response?.apnsID?.lowercased() == apnsID.uuidString.lowercased())
            let request = try #require(h.simulator.receivedRequests().first)
            #expect(request.method == "POST")
            #expect(request.path == "/3/device/\(token)")
            #expect(request.header("apns-topic") == "com.example.app.voip")
            #expect(request.header("apns-push-type") == "voip")
            #expect(request.header("apns-priority") == "5")
            #expect(request.header("apns-expiration") == "1900000000")
            #expect(request.header("apns-collapse-id") == "thread-7")
            #expect(request.header("apns-id")?.lowercased() == apnsID.uuidString.lowercased())
            #expect(request.header("authorization")?.hasPrefix("bearer ") == true)
            #expect(request.keyID == "KEY1234567")
            #expect(request.issuer == "TEAM123456")
            #expect(String(decoding: request.payload, as: UTF8.self) == #"{"aps":{"alert":"ring"},"call":"42"}"#)
            await pool.shutdown()
        }
    }

    @Test func invalidNotificationsAreRefusedAndNothingIsSent() async throws {
        try await Harness.run { h in
            let pool = try await h.pool()
            await #expect(throws: APNsValidationError.deviceTokenOddLength(3)) {
                try await pool.send(Harness.notification(token: "abc"))
            }
            await #expect(throws: APNsValidationError.priorityNotAllowed(pushType: .background, priority: .immediate)) {
                var n = Harness.notification(pushType: .background)
                n.priority = .immediate
                return try await pool.send(n)
            }
            #expect(h.simulator.statistics().requestsReceived == 0)
            await pool.shutdown()
        }
    }

    @Test func aBatchOfSendsIsDeliveredAndAnInvalidOneRefusedAlone() async throws {
        try await Harness.run(configure: { $0.recordRequests = true }) { h in
            let pool = try await h.pool()
            let tokens = (0..<5).map { _ in Harness.randomToken() }
            var notifications = tokens.map { Harness.notification(token: $0) }
            notifications.insert(Harness.notification(token: "abc"), at: 2)
            let futures = pool.sendFutures(notifications)
            #expect(futures.count == 6)
            await #expect(throws: APNsValidationError.deviceTokenOddLength(3)) { try await futures[2].get() }
            for (index, future) in futures.enumerated() where index != 2 {
                #expect(try await future.get().outcome == .delivered)
            }
            #expect(h.simulator.statistics().responses(status: 200) == 5)
            #expect(Set(h.simulator.receivedRequests().compactMap(\.deviceToken)) == Set(tokens))
            await pool.shutdown()
        }
    }

    @Test func aBatchSentWithAnAnswerHandlerGetsEachReportOnceByPosition() async throws {
        try await Harness.run(configure: { $0.recordRequests = true }) { h in
            let pool = try await h.pool()
            let tokens = (0..<7).map { _ in Harness.randomToken() }
            var notifications = tokens.map { Harness.notification(token: $0) }
            notifications.insert(Harness.notification(token: "abc"), at: 2)
            let (answers, continuation) = AsyncStream.makeStream(of: (Int, Result<APNsDeliveryReport, any Error>).self)
            pool.send(notifications) { position, result in continuation.yield((position, result)) }
            var byPosition: [Int: Result<APNsDeliveryReport, any Error>] = [:]
            for await (position, result) in answers {
                #expect(byPosition[position] == nil, "position \(position) answered twice")
                byPosition[position] = result
                if byPosition.count == notifications.count { break }
            }
            #expect(Set(byPosition.keys) == Set(notifications.indices))
            #expect(throws: APNsValidationError.deviceTokenOddLength(3)) { try byPosition[2]?.get() }
            for position in notifications.indices where position != 2 {
                #expect(try byPosition[position]?.get().outcome == .delivered)
            }
            #expect(h.simulator.statistics().responses(status: 200) == 7)
            #expect(Set(h.simulator.receivedRequests().compactMap(\.deviceToken)) == Set(tokens))
            await pool.shutdown()
        }
    }

    @Test func theSimulatorsRoundTripIsItsLatencyPlusAJitterDrawnForEachAnswer() async throws {
        try await Harness.run(configure: {
            $0.faults.latency = .milliseconds(40)
            $0.faults.latencyJitter = .milliseconds(80)
        }) { h in
            let pool = try await h.pool()
            let (answers, continuation) = AsyncStream.makeStream(of: (Int, ContinuousClock.Instant).self)
            let start = ContinuousClock.now
            pool.send((0..<30).map { _ in Harness.notification() }) { position, result in
                if case .success(let report) = result, report.outcome == .delivered {
                    continuation.yield((position, ContinuousClock.now))
                }
            }
            var elapsed: [Duration] = []
            for await (_, at) in answers {
                elapsed.append(at - start)
                if elapsed.count == 30 { break }
            }
            #expect(elapsed.count == 30)
            // Never sooner than the latency; the answers spread over the jitter instead of coming together.
            #expect(elapsed.allSatisfy { $0 >= .milliseconds(40) }, "\(elapsed)")
            #expect(elapsed.max()! - elapsed.min()! >= .milliseconds(20), "\(elapsed)")
            await pool.shutdown()
        }
    }

    @Test func anAnswerHandlerHearsThePoolsRefusals() async throws {
        try await Harness.run(configure: { $0.faults.latency = .milliseconds(300) }) { h in
            let pool = try await Self.failFastPool(h)
            let (answers, continuation) = AsyncStream.makeStream(of: (Int, Result<APNsDeliveryReport, any Error>).self)
            pool.send((0..<10).map { _ in Harness.notification() }) { position, result in
                continuation.yield((position, result))
            }
            var positions: Set<Int> = []
            var delivered = 0
            var refused = 0
            for await (position, result) in answers {
                positions.insert(position)
                switch result {
                case .success(let report): if report.outcome == .delivered { delivered += 1 }
                case .failure(let error):
                    #expect((error as? APNsPoolError) == .queueFull(capacity: 3))
                    refused += 1
                }
                if delivered + refused == 10 { break }
            }
            #expect(positions == Set(0..<10))
            #expect(refused > 0)
            #expect(h.simulator.statistics().requestsReceived == delivered)
            await pool.shutdown()
        }
    }

    // MARK: Provider tokens

    @Test func tokenIsReusedBeforeFiftyMinutesAndReplacedAfter() async throws {
        let clock = TestClock()
        try await Harness.run(configure: { $0.clock = clock }) { h in
            let pool = try await h.pool(clock: clock) { $0.connections = 1 }
            for minutes in [0.0, 19, 30] {  // t = 0, 19, 49
                clock.advance(minutes: minutes)
                #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            }
            var sightings = try #require(h.simulator.statistics().tokensByConnection.values.first)
            #expect(sightings.count == 1)
            clock.advance(minutes: 1)  // t = 50
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            clock.advance(minutes: 19)  // t = 69: the second token is 19 minutes old, reused
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            sightings = try #require(h.simulator.statistics().tokensByConnection.values.first)
            #expect(sightings.count == 2)
            #expect(sightings[1].issuedAt - sightings[0].issuedAt == 50 * 60)
            #expect(h.simulator.statistics().responses(reason: .tooManyProviderTokenUpdates) == 0)
            #expect(try await pool.snapshot().connections.first?.tokensMade == 2)
            await pool.shutdown()
        }
    }

    @Test func tooManyProviderTokenUpdatesReplacesTheConnection() async throws {
        // Our clock runs 45 minutes behind APNs's: the first token is 45 minutes old for APNs.
        let apnsClock = TestClock()
        let relayClock = TestClock(apnsClock.now() - 45 * 60)
        try await Harness.run(configure: { $0.clock = apnsClock }) { h in
            let pool = try await h.pool(clock: relayClock) { $0.connections = 1 }
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            // Our clock says 51 minutes passed, APNs's says 10: the new token comes too soon for APNs.
            relayClock.advance(minutes: 51)
            apnsClock.advance(minutes: 10)
            let report = try await pool.send(Harness.notification())
            #expect(report.outcome == .delivered)
            #expect(report.attempts == 2)
            #expect(h.simulator.statistics().responses(reason: .tooManyProviderTokenUpdates) == 1)
            #expect(try await pool.snapshot().connectionsOpened == 2)
            await pool.shutdown()
        }
    }

    @Test func expiredProviderTokenReplacesTheConnection() async throws {
        let relayClock = TestClock()
        let apnsClock = TestClock()
        try await Harness.run(configure: { $0.clock = apnsClock }) { h in
            let pool = try await h.pool(clock: relayClock) { $0.connections = 1 }
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            relayClock.advance(minutes: 30)
            apnsClock.advance(minutes: 61)
            let report = try await pool.send(Harness.notification())
            #expect(report.outcome == .delivered)
            #expect(report.attempts == 2)
            #expect(h.simulator.statistics().responses(reason: .expiredProviderToken) == 1)
            #expect(try await pool.snapshot().connectionsOpened == 2)
            await pool.shutdown()
        }
    }

    // MARK: Outcome classes

    @Test func deadTokenCarriesApplesTimestamp() async throws {
        let dead = Harness.randomToken()
        try await Harness.run(configure: { $0.faults.unregisteredTokens = [dead: 1_799_999_000_000] }) { h in
            let pool = try await h.pool()
            let report = try await pool.send(Harness.notification(token: dead))
            #expect(report.outcome == .tokenDead)
            #expect(report.response?.status == 410)
            #expect(report.response?.reason == .unregistered)
            #expect(report.response?.timestampMilliseconds == 1_799_999_000_000)
            #expect(report.attempts == 1)
            await pool.shutdown()
        }
    }

    @Test(arguments: [(429, APNsReason.tooManyRequests), (500, .internalServerError), (503, .serviceUnavailable)])
    func transientErrorsAreRetriedWithinTheBound(status: Int, reason: APNsReason) async throws {
        try await Harness.run(configure: {
            switch status {
            case 429: $0.faults.rate429 = 1
            case 500: $0.faults.rate500 = 1
            default: $0.faults.rate503 = 1
            }
        }) { h in
            let pool = try await h.pool { $0.maximumAttempts = 3 }
            let report = try await pool.send(Harness.notification())
            #expect(report.outcome == .retryLater)
            #expect(report.response?.status == status)
            #expect(report.response?.reason == reason)
            #expect(report.attempts == 3)
            #expect(h.simulator.statistics().requestsReceived == 3)
            // Once APNs recovers, the same pool delivers.
            h.simulator.updateFaults {
                $0.rate429 = 0
                $0.rate500 = 0
                $0.rate503 = 0
            }
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            await pool.shutdown()
        }
    }

    @Test func transientErrorsAtARateAreAllRetriedToDelivery() async throws {
        try await Harness.run(configure: {
            $0.faults.rate500 = 0.1
            $0.faults.rate503 = 0.1
        }) { h in
            let pool = try await h.pool { $0.maximumAttempts = 10 }
            let reports = try await Harness.sendAll(pool, count: 300)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            #expect(reports.contains { $0.attempts > 1 })
            #expect(h.simulator.statistics().responses(status: 200) == 300)
            await pool.shutdown()
        }
    }

    @Test func shutdownFailsRequestsWaitingForARetry() async throws {
        try await Harness.run(configure: { $0.faults.rate500 = 1 }) { h in
            let pool = try await h.pool {
                $0.retryBackoff = ExponentialBackoff(first: .seconds(10), maximum: .seconds(10))
            }
            let pending = pool.sendFuture(Harness.notification())
            // Answered 500 and back in the pool, waiting for its retry.
            let waiting = try await Harness.eventually {
                let inFlight = try await pool.snapshot().streamsInFlight
                return h.simulator.statistics().requestsReceived == 1 && inFlight == 0
            }
            #expect(waiting)
            await pool.shutdown(gracePeriod: .milliseconds(10))
            await #expect(throws: APNsPoolError.shutdown) { try await pending.get() }
        }
    }

    @Test func configurationFaultsAreNotRetried() async throws {
        try await Harness.run { h in
            let pool = try await h.pool()
            let report = try await pool.send(Harness.notification(topic: "com.not.ours"))
            #expect(report.outcome == .configurationFault)
            #expect(report.response?.reason == .topicDisallowed)
            #expect(report.attempts == 1)

            let strangerKey = try APNsSigningKey(privateKey: .init(), keyID: "OTHER12345", teamID: "TEAM123456")
            let strangerPool = try await h.pool(credential: .token(strangerKey))
            let refused = try await strangerPool.send(Harness.notification())
            #expect(refused.outcome == .configurationFault)
            #expect(refused.response?.status == 403)
            #expect(refused.response?.reason == .invalidProviderToken)
            #expect(refused.attempts == 1)
            await pool.shutdown()
            await strangerPool.shutdown()
        }
    }

    @Test func requestsHaveADeadline() async throws {
        try await Harness.run(configure: { $0.faults.latency = .seconds(3) }) { h in
            let pool = try await h.pool { $0.requestTimeout = .milliseconds(300) }
            let report = try await pool.send(Harness.notification())
            #expect(report.outcome == .retryLater)
            #expect(report.failure == .deadlineExceeded)
            await pool.shutdown()
        }
    }

    @Test func deadlinesRunOnThePoolsClock() async throws {
        let clock = TestClock()
        try await Harness.run(configure: { $0.faults.latency = .seconds(30) }) { h in
            let pool = try await h.pool(clock: clock) { $0.requestTimeout = .seconds(60) }
            let pending = pool.sendFuture(Harness.notification())
            let inFlight = try await Harness.eventually { try await pool.snapshot().streamsInFlight == 1 }
            #expect(inFlight)
            // A minute passes on the pool's clock, not on the system's: the next tick finds the request late.
            clock.advanceUptime(.seconds(61))
            let report = try await pending.get()
            #expect(report.outcome == .retryLater)
            #expect(report.failure == .deadlineExceeded)
            await pool.shutdown(gracePeriod: .zero)
        }
    }

    // MARK: Streams and connections

    @Test func goAwayLosesNothing() async throws {
        try await Harness.run(configure: { $0.faults.goawayAfter = 60 }) { h in
            let pool = try await h.pool { $0.connections = 2 }
            let reports = try await Harness.sendAll(pool, count: 800)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            let statistics = h.simulator.statistics()
            #expect(statistics.goawaysSent >= 5)
            #expect(statistics.responses(status: 200) == 800)
            #expect(try await pool.snapshot().connectionsOpened > 2)
            await pool.shutdown()
        }
    }

    @Test func refusedStreamsAreRetried() async throws {
        try await Harness.run(configure: { $0.faults.refuseStreamEvery = 7 }) { h in
            let pool = try await h.pool()
            let reports = try await Harness.sendAll(pool, count: 300)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            #expect(h.simulator.statistics().streamsRefused > 0)
            #expect(h.simulator.statistics().responses(status: 200) == 300)
            await pool.shutdown()
        }
    }

    @Test func streamLimitStartsAtOneAndFollowsSettings() async throws {
        try await Harness.run(configure: { $0.maxConcurrentStreams = 40 }) { h in
            let pool = try await h.pool {
                $0.connections = 1
                $0.maximumConnections = 1
            }
            #expect(try await pool.snapshot().connections.first?.peerMaxConcurrentStreams == 1)
            let reports = try await Harness.sendAll(pool, count: 200)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            let connection = try #require(try await pool.snapshot().connections.first)
            #expect(connection.peerMaxConcurrentStreams == 40)
            #expect(connection.peakStreamsPerLimit[1] == 1)
            let peak = try #require(connection.peakStreamsPerLimit[40])
            #expect(peak > 1 && peak <= 40)
            #expect(connection.peakStreamsPerLimit.keys.sorted() == [1, 40])
            #expect(h.simulator.statistics().streamsRefused == 0)
            await pool.shutdown()
        }
    }

    @Test func aPoolUnderLoadOpensConnectionsUpToItsCapWithinTheStreamLimitAndClosesThemWhenIdle() async throws {
        try await Harness.run(configure: {
            $0.maxConcurrentStreams = 10
            $0.faults.latency = .milliseconds(20)
        }) { h in
            let pool = try await h.pool {
                $0.connections = 1
                $0.maximumConnections = 3
                // Long enough that a loaded machine still finds the busy connections open when the sends end.
                $0.idleConnectionTimeout = .seconds(1)
            }
            let reports = try await Harness.sendAll(pool, count: 300)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            let busy = try await pool.snapshot()
            #expect(busy.connectionsOpened == 3)
            #expect(busy.connections.count == 3)
            for connection in busy.connections {
                // Within the peer's limit (1 until the first success, then 10), one provider token each.
                #expect(connection.peakStreamsPerLimit.allSatisfy { limit, peak in peak <= limit })
                #expect(connection.tokensMade == 1)
            }
            #expect(h.simulator.statistics().streamsRefused == 0)
            #expect(h.simulator.statistics().responses(reason: .tooManyProviderTokenUpdates) == 0)
            // Idle, the connections above the floor close; the floor's stays.
            var connections = busy.connections.count
            for _ in 0..<200 where connections > 1 {
                try await Task.sleep(for: .milliseconds(50))
                connections = try await pool.snapshot().connections.count
            }
            #expect(connections == 1)
            #expect(try await pool.snapshot().connectionsOpened == 3)
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            await pool.shutdown()
        }
    }

    @Test func droppedConnectionsAreReplacedAndTheirRequestsSentAgain() async throws {
        try await Harness.run(configure: { $0.faults.dropConnectionAfter = 100 }) { h in
            // One attempt each: requests lost with a dropped connection are sent again without using one.
            let pool = try await h.pool { $0.maximumAttempts = 1 }
            let reports = try await Harness.sendAll(pool, count: 1000)
            #expect(reports.allSatisfy { $0.outcome == .delivered })
            // Yet each report counts every request sent, the resends too: at least every one APNs received.
            let sent = reports.map(\.attempts).reduce(0, +)
            #expect(reports.contains { $0.attempts > 1 })
            #expect(sent >= h.simulator.statistics().requestsReceived, "\(sent) sent")
            #expect(h.simulator.statistics().connectionsDropped >= 1)
            #expect(try await pool.snapshot().connectionsOpened > 2)
            await pool.shutdown()
        }
    }

    @Test func unansweredPingClosesTheConnection() async throws {
        try await Harness.run(configure: { $0.faults.stallAfter = 1 }) { h in
            let pool = try await h.pool {
                $0.connections = 1
                $0.idlePingInterval = .milliseconds(100)
                $0.pingTimeout = .milliseconds(200)
                $0.housekeepingInterval = .milliseconds(20)
            }
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            // The connection stalls: its PING goes unanswered, so it is closed and replaced.
            let replaced = try await Harness.eventually { try await pool.snapshot().connectionsOpened >= 2 }
            #expect(replaced)
            #expect(h.simulator.statistics().connectionsStalled >= 1)
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            await pool.shutdown()
        }
    }

    @Test func answeredPingsKeepTheConnection() async throws {
        try await Harness.run { h in
            let pool = try await h.pool {
                $0.connections = 1
                $0.idlePingInterval = .milliseconds(50)
                $0.housekeepingInterval = .milliseconds(10)
            }
            let pinged = try await Harness.eventually {
                (try await pool.snapshot().connections.first?.pingsAcknowledged ?? 0) >= 3
            }
            #expect(pinged)
            // The same connection goes on answering: its count keeps growing and it is never replaced
            // for a missed PING (a replacement would start again at 0 with another id).
            let first = try #require(try await pool.snapshot().connections.first)
            let more = try await Harness.eventually {
                guard let now = try await pool.snapshot().connections.first else { return false }
                return now.id == first.id && now.pingsAcknowledged >= first.pingsAcknowledged + 3
            }
            #expect(more)
            await pool.shutdown()
        }
    }

    // MARK: Back-pressure

    /// A pool of one connection that refuses sends beyond a queue of 3 instead of waiting.
    private static func failFastPool(_ h: Harness) async throws -> APNsPool {
        try await h.pool {
            $0.connections = 1
            $0.waitQueueCapacity = 3
            $0.backPressure = .failFast
        }
    }

    @Test func fullPoolFailsFastWhenAskedTo() async throws {
        try await Harness.run(configure: { $0.faults.latency = .milliseconds(300) }) { h in
            let pool = try await Self.failFastPool(h)
            // All ten reach the pool together (one hop to its event loop), before the first answer.
            let futures = pool.sendFutures((0..<10).map { _ in Harness.notification() })
            var delivered = 0
            var refused = 0
            for future in futures {
                do {
                    if try await future.get().outcome == .delivered { delivered += 1 }
                } catch let error as APNsPoolError where error.code == .queueFull {
                    #expect(error.capacity == 3)
                    refused += 1
                }
            }
            #expect(refused > 0)
            #expect(delivered + refused == 10)
            #expect(h.simulator.statistics().requestsReceived == delivered)
            await pool.shutdown()
        }
    }

    @Test func fullPoolMakesCallersWait() async throws {
        // One stream at a time for the whole test: the queue stays full for three seconds, not only until
        // the first answer raises the stream limit (after the latency, which a loaded CI machine can outlast).
        try await Harness.run(configure: {
            $0.faults.latency = .milliseconds(500)
            $0.maxConcurrentStreams = 1
        }) { h in
            let pool = try await h.pool {
                $0.connections = 1
                $0.waitQueueCapacity = 3
                $0.backPressure = .wait
            }
            let futures = (0..<10).map { _ in pool.sendFuture(Harness.notification()) }
            let snapshot = try await pool.snapshot()
            #expect(snapshot.queued <= 3)
            #expect(snapshot.waiting > 0)
            // This caller chooses to fail fast on the same full pool.
            await #expect(throws: APNsPoolError.queueFull(capacity: 3)) {
                try await pool.send(Harness.notification(), whenFull: .failFast)
            }
            for future in futures { #expect(try await future.get().outcome == .delivered) }
            await pool.shutdown()
        }
    }

    // MARK: Certificates

    @Test func certificateAuthenticationSendsWithoutATokenAndOnlyForItsTopic() async throws {
        try await Harness.run(configure: { $0.recordRequests = true }) { h in
            let issued = try h.simulator.issueClientCertificate(topic: Harness.topic)
            let credential = APNsCredential.certificate(
                chain: [try NIOSSLCertificate(bytes: Array(issued.certificatePEM.utf8), format: .pem)],
                privateKey: try NIOSSLPrivateKey(bytes: Array(issued.privateKeyPEM.utf8), format: .pem)
            )
            let pool = try await h.pool(credential: credential)
            #expect(try await pool.send(Harness.notification()).outcome == .delivered)
            let request = try #require(h.simulator.receivedRequests().first)
            #expect(request.header("authorization") == nil)
            #expect(request.certificateTopic == Harness.topic)
            let other = try await pool.send(Harness.notification(topic: "com.example.other"))
            #expect(other.outcome == .configurationFault)
            #expect(other.attempts == 1)
            await pool.shutdown()
        }
    }

    @Test func untrustedCertificateIsAClearConnectError() async throws {
        try await Harness.run { h in
            var configuration = APNsPoolConfiguration(endpoint: h.endpoint, credential: .token(h.key))
            configuration.connections = 1
            let pool = try APNsPool(
                configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next()
            )
            await #expect {
                try await pool.start()
            } throws: { error in
                guard let error = error as? APNsPoolError, error.code == .connectFailed else { return false }
                return error.reason?.uppercased().contains("CERTIFICATE") == true
            }
            await pool.shutdown()
        }
    }

    @Test func poolThatCannotConnectSaysWhy() async throws {
        var configuration = APNsPoolConfiguration(
            endpoint: APNsEndpoint(host: "127.0.0.1", port: 1),
            credential: .token(try APNsSigningKey(privateKey: .init(), keyID: "KEY1234567", teamID: "TEAM123456"))
        )
        configuration.connections = 1
        let pool = try APNsPool(configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next())
        await #expect {
            try await pool.start()
        } throws: { error in
            (error as? APNsPoolError)?.code == .connectFailed
        }
        await pool.shutdown()
    }
}

@Suite("Backoff")
struct BackoffTests {
    @Test func doublesWithJitterUpToTheCap() {
        let backoff = ExponentialBackoff(first: .seconds(1), maximum: .seconds(60))
        #expect(backoff.ceiling(attempt: 1) == .seconds(1))
        #expect(backoff.ceiling(attempt: 2) == .seconds(2))
        #expect(backoff.ceiling(attempt: 6) == .seconds(32))
        #expect(backoff.ceiling(attempt: 7) == .seconds(60))
        #expect(backoff.ceiling(attempt: 1000) == .seconds(60))
        var generator = SystemRandomNumberGenerator()
        var seen = Set<Int64>()
        for attempt in 1...10 {
            for _ in 0..<50 {
                let delay = backoff.delay(attempt: attempt, using: &generator)
                let ceiling = backoff.ceiling(attempt: attempt)
                #expect(delay.nanoseconds >= ceiling.nanoseconds / 2 && delay <= ceiling)
                seen.insert(delay.nanoseconds)
            }
        }
        #expect(seen.count > 100)
    }
}

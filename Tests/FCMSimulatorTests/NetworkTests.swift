import FCM
import FCMSimulator
import Foundation
import Testing

/// The simulator through a real HTTP/2 client over TLS, trusting the simulator's CA.
@Suite struct NetworkTests {
    static let project = "dispo-4f2a1"

    /// Exchanges `account`'s assertion, made at `now`, for an access token.
    func accessToken(_ client: HTTP2TestClient, _ account: FCMServiceAccount, now: Date) async throws -> String {
        let response = try await client.post(
            "/token", headers: [("content-type", "application/x-www-form-urlencoded")],
            body: Data(grantBody(FCMAccessAssertion.make(for: account, issuedAt: now))))
        #expect(response.status == 200)
        return try #require(response.json["access_token"] as? String)
    }

    /// Sends a message to `token` for `project` with `accessToken`.
    func send(
        _ client: HTTP2TestClient, accessToken: String, token: String, project: String = project
    ) async throws -> TestResponse {
        let message = FCMMessage(notification: .init(title: "Hi", body: "There"), data: ["k": "v"])
        return try await client.post(
            "/v1/projects/\(project)/messages:send",
            headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
            body: message.body(to: token))
    }

    @Test func aTokenIsExchangedOnceAndMessagesAreSentWithIt() async throws {
        let clock = TestClock()
        try await withSimulator(configure: { $0.clock = clock }) { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            #expect(account.tokenURI == "https://127.0.0.1:\(simulator.port)/token")
            let client = try await HTTP2TestClient.connect(to: simulator)
            defer { Task { await client.close() } }
            let token = try await accessToken(client, account, now: clock.now())
            #expect(token.hasPrefix("ya29."))
            for device in ["fKx9:APA91a", "fKx9:APA91b", "fKx9:APA91c"] {
                let response = try await send(client, accessToken: token, token: device)
                #expect(response.status == 200)
                let name = try #require(response.json["name"] as? String)
                #expect(name.hasPrefix("projects/\(Self.project)/messages/0:1800000000000000%"))
                #expect(FCMAnswer(status: response.status, body: response.body) == .delivered(messageName: name))
            }
            let statistics = simulator.statistics()
            #expect(statistics.accessTokens(issuedTo: account.clientEmail) == 1)
            #expect(statistics.messagesSent[Self.project] == 3 && statistics.responses(status: 200) == 4)
            let messages = simulator.receivedMessages()
            #expect(messages.map(\.token) == ["fKx9:APA91a", "fKx9:APA91b", "fKx9:APA91c"])
            #expect(messages.allSatisfy { $0.data == ["k": "v"] && $0.notification?.title == "Hi" })
            #expect(messages.allSatisfy { $0.projectID == Self.project && $0.clientEmail == account.clientEmail })

            // Expired by the simulator's clock: 401, and a new token works.
            clock.advance(seconds: 3_599)
            let expired = try await send(client, accessToken: token, token: "fKx9:APA91a")
            #expect(expired.status == 401 && FCMAnswer(status: 401, body: expired.body) == .unauthenticated)
            let renewed = try await accessToken(client, account, now: clock.now())
            #expect(try await send(client, accessToken: renewed, token: "fKx9:APA91a").status == 200)
            #expect(simulator.statistics().accessTokens(issuedTo: account.clientEmail) == 2)
        }
    }

    @Test func revokedTokensAndOtherProjectsAreRefused() async throws {
        try await withSimulator { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            defer { Task { await client.close() } }
            let token = try await accessToken(client, account, now: Date())
            let otherProject = try await send(client, accessToken: token, token: "fKx9:APA91a", project: "other")
            #expect(otherProject.status == 403)
            #expect(
                FCMAnswer(status: 403, body: otherProject.body) == .configurationFault(errorCode: "PERMISSION_DENIED"))
            #expect(try await send(client, accessToken: "ya29.forged", token: "fKx9:APA91a").status == 401)
            #expect(try await send(client, accessToken: token, token: "fKx9:APA91a").status == 200)

            simulator.revokeAccessTokens()
            let revoked = try await send(client, accessToken: token, token: "fKx9:APA91a")
            #expect(revoked.status == 401 && FCMAnswer(status: 401, body: revoked.body) == .unauthenticated)
            let renewed = try await accessToken(client, account, now: Date())
            #expect(try await send(client, accessToken: renewed, token: "fKx9:APA91a").status == 200)
            #expect(simulator.statistics().responses(errorCode: "UNAUTHENTICATED") == 2)
        }
    }

    @Test func scriptedTokensRatesAndTheQuotaAnswerAsGoogleDoes() async throws {
        try await withSimulator { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            defer { Task { await client.close() } }
            let token = try await accessToken(client, account, now: Date())
            simulator.updateFaults {
                $0.unregisteredTokens = ["gone"]
                $0.invalidTokens = ["bad"]
                $0.senderIDMismatchTokens = ["other"]
                $0.thirdPartyAuthErrorTokens = ["apple"]
            }
            let expected: [(String, FCMAnswer)] = [
                ("gone", .tokenDead(errorCode: "UNREGISTERED")), ("bad", .tokenDead(errorCode: "INVALID_ARGUMENT")),
                ("other", .configurationFault(errorCode: "SENDER_ID_MISMATCH")),
                ("apple", .configurationFault(errorCode: "THIRD_PARTY_AUTH_ERROR")),
            ]
            for (device, meaning) in expected {
                let response = try await send(client, accessToken: token, token: device)
                #expect(FCMAnswer(status: response.status, body: response.body) == meaning)
            }
            simulator.updateFaults {
                $0.rate503 = 1
                $0.retryAfter503 = 9
            }
            let unavailable = try await send(client, accessToken: token, token: "fine")
            #expect(unavailable.status == 503 && unavailable.headers.first(name: "retry-after") == "9")
            simulator.updateFaults {
                $0.rate503 = 0
                $0.messagesPerMinute = 1
            }
            #expect(try await send(client, accessToken: token, token: "fine").status == 200)
            let overQuota = try await send(client, accessToken: token, token: "fine")
            #expect(overQuota.status == 429 && Int(overQuota.headers.first(name: "retry-after") ?? "") != nil)
            let meaning = FCMAnswer(
                status: overQuota.status, body: overQuota.body, retryAfter: overQuota.headers.first(name: "retry-after")
            )
            guard case .retryLater("QUOTA_EXCEEDED", let retryAfter?) = meaning else {
                Issue.record("read as \(meaning)")
                return
            }
            #expect(retryAfter > .zero)
            #expect(simulator.receivedMessages().last?.errorCode == "QUOTA_EXCEEDED")
        }
    }

    @Test func goawayAfterTwoRequestsAnswersThemAndClosesTheConnection() async throws {
        try await withSimulator(configure: { $0.faults.goawayAfter = 2 }) { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            let token = try await accessToken(client, account, now: Date())
            #expect(try await send(client, accessToken: token, token: "fKx9:APA91a").status == 200)
            try await client.closed()
            #expect(try await client.receivedGoAway())
            #expect(simulator.statistics().goawaysSent == 1)
            // A new connection serves again, with the same access token.
            let next = try await HTTP2TestClient.connect(to: simulator)
            defer { Task { await next.close() } }
            #expect(try await send(next, accessToken: token, token: "fKx9:APA91a").status == 200)
        }
    }

    @Test func delayedAnswersComeBeforeTheGoawayClosesAndStreamsAreLimitedAsAtGoogle() async throws {
        try await withSimulator(configure: {
            $0.faults.goawayAfter = 3
            $0.faults.latency = .milliseconds(20)
            $0.faults.latencyJitter = .milliseconds(30)
            $0.faults.maxConcurrentStreams = 7
        }) { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            let token = try await accessToken(client, account, now: Date())
            #expect(try await client.maxConcurrentStreams() == 7)
            async let first = send(client, accessToken: token, token: "fKx9:APA91a")
            async let second = send(client, accessToken: token, token: "fKx9:APA91b")
            #expect(try await [first.status, second.status] == [200, 200])
            try await client.closed()
            #expect(try await client.receivedGoAway())
            #expect(Set(simulator.receivedMessages().compactMap(\.token)) == ["fKx9:APA91a", "fKx9:APA91b"])
        }
    }

    @Test func validateOnlyIsJudgedButNotSent() async throws {
        try await withSimulator(configure: { $0.faults.messagesPerMinute = 1 }) { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            defer { Task { await client.close() } }
            let token = try await accessToken(client, account, now: Date())
            let path = "/v1/projects/\(Self.project)/messages:send"
            let authorization = [("authorization", "Bearer \(token)")]
            for _ in 0..<2 {
                let dryRun = try await client.post(
                    path, headers: authorization,
                    body: Data(#"{"message":{"token":"fKx9:A"},"validate_only":true}"#.utf8))
                #expect(dryRun.json["name"] as? String == "projects/\(Self.project)/messages/fake_message_id")
            }
            let refused = try await client.post(
                path, headers: authorization, body: Data(#"{"message":{"token":"fKx9:A","data":{"n":1}}}"#.utf8))
            #expect(refused.status == 400)
            #expect(try await send(client, accessToken: token, token: "fKx9:A").status == 200)
            #expect(simulator.statistics().messagesSent[Self.project] == 1)
            #expect(simulator.receivedMessages().map(\.validateOnly) == [true, true, false, false])
            #expect(simulator.receivedMessages().map(\.status) == [200, 200, 400, 200])
        }
    }

    @Test func dropAfterOneRequestClosesWithoutGoaway() async throws {
        try await withSimulator(configure: { $0.faults.dropConnectionAfter = 1 }) { simulator in
            let account = try FCMServiceAccount(json: simulator.makeServiceAccount(projectID: Self.project))
            let client = try await HTTP2TestClient.connect(to: simulator)
            #expect(try await accessToken(client, account, now: Date()).hasPrefix("ya29."))
            try await client.closed()
            #expect(try await !client.receivedGoAway())
            #expect(simulator.statistics().connectionsDropped == 1)
        }
    }
}

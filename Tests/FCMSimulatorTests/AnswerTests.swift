import FCM
import Foundation
import Testing

@testable import FCMSimulator

@Suite struct AnswerTests {
    /// Every answer of `messages:send` the simulator gives, read by the relay's `FCMAnswer` as Google's table says.
    @Test func theRelayReadsEveryAnswerAsGooglesTableSays() {
        let name = "projects/p/messages/0:1800000000000000%0123456789abcdef"
        let cases: [(FCMSimulatorAnswer, FCMAnswer)] = [
            (.sent(name: name), .delivered(messageName: name)),
            (.unregistered, .tokenDead(errorCode: "UNREGISTERED")),
            (.invalidRegistrationToken, .tokenDead(errorCode: "INVALID_ARGUMENT")),
            (.senderIDMismatch, .configurationFault(errorCode: "SENDER_ID_MISMATCH")),
            (.thirdPartyAuthError, .configurationFault(errorCode: "THIRD_PARTY_AUTH_ERROR")),
            (.unauthenticated, .unauthenticated),
            (.permissionDenied(project: "p"), .configurationFault(errorCode: "PERMISSION_DENIED")),
            (.quotaExceeded(retryAfter: 17), .retryLater(errorCode: "QUOTA_EXCEEDED", retryAfter: .seconds(17))),
            (.unavailable(retryAfter: 5), .retryLater(errorCode: "UNAVAILABLE", retryAfter: .seconds(5))),
            (.unavailable(retryAfter: nil), .retryLater(errorCode: "UNAVAILABLE", retryAfter: nil)),
            (.internalError, .retryLater(errorCode: "INTERNAL", retryAfter: nil)),
            (
                .invalidArgument("Invalid value at 'message.data[0].value' (TYPE_STRING), 7"),
                .rejected(
                    errorCode: "INVALID_ARGUMENT", message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 7")
            ),
            (
                .notFound(method: "GET", path: "/v1/x"),
                .rejected(errorCode: "NOT_FOUND", message: "No handler for GET /v1/x.")
            ),
        ]
        for (answer, meaning) in cases {
            let read = FCMAnswer(
                status: answer.status, body: answer.body, retryAfter: answer.retryAfter.map(String.init))
            #expect(read == meaning, "\(String(decoding: answer.body, as: UTF8.self))")
        }
    }

    @Test func errorsHaveGooglesShape() throws {
        let answer = FCMSimulatorAnswer.unregistered
        let json = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
        let error = try #require(json["error"] as? [String: Any])
        #expect(error["code"] as? Int == 404 && error["status"] as? String == "NOT_FOUND")
        #expect(error["message"] as? String == "Requested entity was not found.")
        let details = try #require(error["details"] as? [[String: String]])
        #expect(details == [["@type": FCMSimulatorAnswer.fcmErrorType, "errorCode": "UNREGISTERED"]])
        // An UNAUTHENTICATED has no FcmError: that is how it differs from THIRD_PARTY_AUTH_ERROR.
        let unauthenticated = try #require(
            try JSONSerialization.jsonObject(with: FCMSimulatorAnswer.unauthenticated.body) as? [String: Any])
        #expect((unauthenticated["error"] as? [String: Any])?["details"] == nil)
        #expect(FCMSimulatorAnswer.quotaExceeded(retryAfter: 3).errorCode == "QUOTA_EXCEEDED")
        #expect(FCMSimulatorAnswer.unauthenticated.errorCode == "UNAUTHENTICATED")
    }

    @Test func accessTokensExpireByTheClockAndRevocationRefusesThemAll() throws {
        let account = try TestAccount().account
        var ledger = AccessTokenLedger()
        var random = SystemRandomNumberGenerator()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = AccessTokenLedger.makeToken(using: &random)
        #expect(token.hasPrefix("ya29.") && token.count == 125)
        #expect(token != AccessTokenLedger.makeToken(using: &random))
        ledger.record(token, for: account, now: now, lifetime: 3599)
        #expect(ledger.grant(of: token, now: now + 3598)?.account == account)
        #expect(ledger.grant(of: token, now: now + 3599) == nil)
        #expect(ledger.grant(of: "ya29.other", now: now) == nil)
        ledger.revokeAll()
        #expect(ledger.grant(of: token, now: now) == nil)
    }

    @Test func aProjectsMinuteStartsAtItsFirstMessage() {
        var quota = ProjectQuota()
        let start = Date(timeIntervalSince1970: 1_800_000_030.5)
        #expect(quota.admit(project: "a", now: start, limit: 2) == nil)
        #expect(quota.admit(project: "a", now: start + 10, limit: 2) == nil)
        #expect(quota.admit(project: "a", now: start + 20, limit: 2) == 40)
        #expect(quota.admit(project: "b", now: start + 20, limit: 2) == nil)
        #expect(quota.admit(project: "a", now: start + 59.9, limit: 2) == 1)
        #expect(quota.admit(project: "a", now: start + 60, limit: 2) == nil)
    }

    @Test func aNewServiceAccountIsGooglesFileAndTheRelayReadsIt() throws {
        let file = try ServiceAccountFile.make(
            projectID: "dispo-4f2a1", clientEmail: nil, tokenURI: "https://127.0.0.1:8444/token")
        let json = try #require(try JSONSerialization.jsonObject(with: file.json) as? [String: String])
        #expect(
            Set(json.keys) == [
                "type", "project_id", "private_key_id", "private_key", "client_email", "client_id", "auth_uri",
                "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url", "universe_domain",
            ])
        #expect(json["type"] == "service_account" && json["project_id"] == "dispo-4f2a1")
        let keyID = try #require(json["private_key_id"])
        #expect(keyID.count == 40 && keyID.allSatisfy(\.isHexDigit))
        #expect(json["private_key"]?.hasPrefix("-----BEGIN PRIVATE KEY-----\n") == true)
        #expect(json["client_email"]?.hasSuffix("@dispo-4f2a1.iam.gserviceaccount.com") == true)
        #expect(json["token_uri"] == "https://127.0.0.1:8444/token")
        let account = try FCMServiceAccount(json: file.json)
        #expect(account.privateKeyID == keyID && account.tokenURI == "https://127.0.0.1:8444/token")
        #expect(try FCMSimulatorAccount(serviceAccountJSON: file.json) == file.account)
        let named = try ServiceAccountFile.make(
            projectID: "p", clientEmail: "relay@p.iam.gserviceaccount.com", tokenURI: "x")
        #expect(named.account.clientEmail == "relay@p.iam.gserviceaccount.com")
    }
}

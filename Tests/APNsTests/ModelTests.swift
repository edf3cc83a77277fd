import APNs
import Crypto
import Foundation
import NIOCore
import Testing

@Suite("Notification validation")
struct ValidationTests {
    private func notification(
        token: String = String(repeating: "ab", count: 32), pushType: APNsPushType = .alert,
        priority: APNsPriority? = nil, collapseID: String? = nil, payloadSize: Int = 20
    ) -> APNsNotification {
        var json = #"{"aps":{"alert":"x"}}"#
        if payloadSize > json.utf8.count {
            json = #"{"aps":{"alert":""# + String(repeating: "a", count: payloadSize - 20) + #""}}"#
        }
        return APNsNotification(
            deviceToken: token, bundleID: "com.example.app", pushType: pushType, priority: priority,
            collapseID: collapseID, payload: ByteBuffer(string: json)
        )
    }

    @Test func acceptsTokensOfAnyEvenLength() throws {
        for bytes in [32, 54, 80, 100] {
            try notification(token: String(repeating: "0f", count: bytes)).validate()
        }
        try notification(token: "ABCDEF0123456789").validate()
    }

    @Test func rejectsBadTokens() {
        #expect(throws: APNsValidationError.emptyDeviceToken) { try notification(token: "").validate() }
        #expect(throws: APNsValidationError.deviceTokenOddLength(3)) { try notification(token: "abc").validate() }
        #expect(throws: APNsValidationError.deviceTokenNotHex) { try notification(token: "zz").validate() }
        #expect(throws: APNsValidationError.deviceTokenNotHex) { try notification(token: "ab/c").validate() }
        #expect(throws: APNsValidationError.deviceTokenNotHex) { try notification(token: "0é0").validate() }
    }

    @Test func hexDigitsAreExactlyThoseOfEitherCase() {
        let hex = Set("0123456789abcdefABCDEF".unicodeScalars.map { UInt8($0.value) })
        for byte in UInt8(1)...127 {
            let token = "0" + String(UnicodeScalar(byte))
            let valid = (try? APNsNotification.validateDeviceToken(token)) != nil
            #expect(valid == hex.contains(byte), "byte \(byte)")
        }
    }

    @Test func enforcesPayloadLimitsPerPushType() throws {
        let alert4096 = notification(payloadSize: 4096)
        #expect(alert4096.payload.readableBytes == 4096)
        try alert4096.validate()
        #expect(throws: APNsValidationError.payloadTooLarge(size: 4097, limit: 4096)) {
            try notification(payloadSize: 4097).validate()
        }
        try notification(pushType: .voip, payloadSize: 5120).validate()
        #expect(throws: APNsValidationError.payloadTooLarge(size: 5121, limit: 5120)) {
            try notification(pushType: .voip, payloadSize: 5121).validate()
        }
        var empty = notification()
        empty.payload = ByteBuffer()
        #expect(throws: APNsValidationError.emptyPayload) { try empty.validate() }
    }

    @Test func backgroundPushesMustUsePriorityFive() throws {
        #expect(throws: APNsValidationError.priorityNotAllowed(pushType: .background, priority: .immediate)) {
            try notification(pushType: .background, priority: .immediate).validate()
        }
        try notification(pushType: .background).validate()
        #expect(notification(pushType: .background).effectivePriority == .powerAware)
        #expect(notification(pushType: .alert).effectivePriority == .immediate)
    }

    @Test func collapseIDIsAtMost64Bytes() throws {
        try notification(collapseID: String(repeating: "c", count: 64)).validate()
        #expect(throws: APNsValidationError.collapseIDTooLong(bytes: 65)) {
            try notification(collapseID: String(repeating: "c", count: 65)).validate()
        }
        // 22 three-byte characters are 66 bytes though only 22 characters.
        #expect(throws: APNsValidationError.collapseIDTooLong(bytes: 66)) {
            try notification(collapseID: String(repeating: "€", count: 22)).validate()
        }
    }

    @Test func payloadMustBeAJSONObject() throws {
        try APNsNotification.validateJSONPayload(Array(#"{"aps":{}}"#.utf8))
        #expect(throws: APNsValidationError.payloadNotJSONObject) {
            try APNsNotification.validateJSONPayload(Array("[1,2]".utf8))
        }
        #expect(throws: APNsValidationError.payloadNotJSONObject) {
            try APNsNotification.validateJSONPayload(Array("{not json".utf8))
        }
    }

    @Test func topicsCarryThePushTypeSuffix() {
        let expected: [APNsPushType: String] = [
            .alert: "com.a", .background: "com.a", .mdm: "com.a", .voip: "com.a.voip",
            .complication: "com.a.complication", .fileprovider: "com.a.pushkit.fileprovider",
            .liveactivity: "com.a.push-type.liveactivity", .location: "com.a.location-query",
            .pushtotalk: "com.a.voip-ptt", .widgets: "com.a.push-type.widgets",
            .controls: "com.a.push-type.controls",
        ]
        #expect(expected.count == APNsPushType.allCases.count)
        for (type, topic) in expected { #expect(type.topic(forBundleID: "com.a") == topic) }
    }

    @Test func endpoints() {
        #expect(APNsEndpoint.apple(.production).description == "api.push.apple.com:443")
        #expect(APNsEndpoint.apple(.development, alternatePort: true).description == "api.sandbox.push.apple.com:2197")
        #expect(APNsEndpoint(parsing: "127.0.0.1:8443") == APNsEndpoint(host: "127.0.0.1", port: 8443))
        #expect(APNsEndpoint(parsing: "[::1]:2197") == APNsEndpoint(host: "::1", port: 2197))
        #expect(APNsEndpoint(parsing: "nohost") == nil)
        #expect(APNsEndpoint(parsing: "host:99999") == nil)
        #expect(APNsEndpoint(parsing: "::1:2197") == nil)
    }
}

@Suite("Payload encoding")
struct PayloadTests {
    @Test func encodesEveryApsKey() throws {
        var aps = APNsPayload.APS(
            alert: .fields(
                .init(
                    title: "T", subtitle: "S", body: "B", launchImage: "L", titleLocKey: "TK", titleLocArgs: ["1"],
                    subtitleLocKey: "SK", subtitleLocArgs: ["2"], locKey: "K", locArgs: ["3"]
                )
            ),
            badge: 3, sound: .critical(name: "alarm.caf", volume: 0.5), threadID: "circle-1-channel-2",
            category: "MESSAGE", contentAvailable: true, mutableContent: true, targetContentID: "w1",
            interruptionLevel: .timeSensitive, relevanceScore: 0.75, filterCriteria: "work"
        )
        aps.timestamp = 1_700_000_000
        aps.event = .update
        aps.contentState = ["score": 2]
        aps.staleDate = 1_700_000_600
        aps.dismissalDate = 1_700_000_900
        aps.attributesType = "GameAttributes"
        aps.attributes = ["team": "A"]
        aps.contentChanged = true
        let payload = APNsPayload(aps: aps, custom: ["type": "message", "payload": ["id": 7]])
        let json = String(decoding: try payload.jsonBytes(), as: UTF8.self)
        #expect(
            json
                == #"{"aps":{"alert":{"body":"B","launch-image":"L","loc-args":["3"],"loc-key":"K","subtitle":"S","#
                + #""subtitle-loc-args":["2"],"subtitle-loc-key":"SK","title":"T","title-loc-args":["1"],"#
                + #""title-loc-key":"TK"},"attributes":{"team":"A"},"attributes-type":"GameAttributes","badge":3,"#
                + #""category":"MESSAGE","content-available":1,"content-changed":true,"content-state":{"score":2},"#
                + #""dismissal-date":1700000900,"event":"update","filter-criteria":"work","#
                + #""interruption-level":"time-sensitive","mutable-content":1,"relevance-score":0.75,"#
                + #""sound":{"critical":1,"name":"alarm.caf","volume":0.5},"stale-date":1700000600,"#
                + #""target-content-id":"w1","thread-id":"circle-1-channel-2","timestamp":1700000000},"#
                + #""payload":{"id":7},"type":"message"}"#
        )
    }

    @Test func encodesStringAlertAndSound() throws {
        let payload = APNsPayload(aps: .init(alert: .text("hi"), sound: .named("default")))
        #expect(
            String(decoding: try payload.jsonBytes(), as: UTF8.self) == #"{"aps":{"alert":"hi","sound":"default"}}"#)
    }

    @Test func refusesACustomKeyNamedAps() {
        #expect(throws: EncodingError.self) { try APNsPayload(custom: ["aps": 1]).jsonBytes() }
    }
}

@Suite("Response classification")
struct ResponseTests {
    @Test func everyReasonOfApplesTableHasItsClass() {
        let tokenDead: Set<APNsReason> = [.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic]
        let retry: Set<APNsReason> = [
            .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown, .idleTimeout,
            .expiredProviderToken, .tooManyProviderTokenUpdates,
        ]
        #expect(APNsReason.known.count == 32)
        for reason in APNsReason.known {
            #expect(APNsReason(rawValue: reason.rawValue) == reason)
            let response = APNsResponse(status: reason.status!, reason: reason)
            let expected: APNsOutcomeClass =
                tokenDead.contains(reason) ? .tokenDead : retry.contains(reason) ? .retryLater : .configurationFault
            #expect(response.outcomeClass == expected, "\(reason)")
        }
        #expect(APNsResponse(status: 200).outcomeClass == .delivered)
        #expect(APNsResponse(status: 502, reason: .other("BadGateway")).outcomeClass == .retryLater)
        #expect(APNsResponse(status: 403, reason: .other("Whatever")).outcomeClass == .configurationFault)
        #expect(APNsResponse(status: 403, reason: .expiredProviderToken).invalidatesConnection)
        #expect(APNsResponse(status: 429, reason: .tooManyProviderTokenUpdates).invalidatesConnection)
        #expect(!APNsResponse(status: 429, reason: .tooManyRequests).invalidatesConnection)
    }
}

@Suite("Provider tokens")
struct ProviderTokenTests {
    static let keyID = "ABCDE12345"
    static let teamID = "TEAM123456"

    @Test func tokenIsAnES256JWTWithRawSignature() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = try APNsSigningKey(pem: privateKey.pemRepresentation, keyID: Self.keyID, teamID: Self.teamID)
        let token = key.makeToken(issuedAt: Date(timeIntervalSince1970: 1_700_000_000))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
        let header = String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self)
        let claims = String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self)
        #expect(header == #"{"alg":"ES256","kid":"ABCDE12345"}"#)
        #expect(claims == #"{"iss":"TEAM123456","iat":1700000000}"#)
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        #expect(privateKey.publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test func badKeyFilesSayWhatIsWrong() throws {
        #expect(throws: APNsKeyError.notPEM) {
            try APNsSigningKey(pem: "hello", keyID: Self.keyID, teamID: Self.teamID)
        }
        let publicPEM = P256.Signing.PrivateKey().publicKey.pemRepresentation
        #expect(throws: APNsKeyError.wrongPEMLabel("PUBLIC KEY")) {
            try APNsSigningKey(pem: publicPEM, keyID: Self.keyID, teamID: Self.teamID)
        }
        let p384 = P384.Signing.PrivateKey().pemRepresentation
        #expect {
            try APNsSigningKey(pem: p384, keyID: Self.keyID, teamID: Self.teamID)
        } throws: { error in
            guard (error as? APNsKeyError)?.code == .notP256 else { return false }
            return "\(error)".contains("P-256")
        }
        let good = P256.Signing.PrivateKey().pemRepresentation
        #expect(throws: APNsKeyError.invalidIdentifier(field: "key id", value: "short")) {
            try APNsSigningKey(pem: good, keyID: "short", teamID: Self.teamID)
        }
        #expect {
            try APNsSigningKey(p8File: "/nonexistent/AuthKey.p8", keyID: Self.keyID, teamID: Self.teamID)
        } throws: { error in
            guard let error = error as? APNsKeyError, error.code == .unreadable else { return false }
            return error.path == "/nonexistent/AuthKey.p8"
        }
    }

    @Test func rotationReusesBeforeFiftyMinutesAndReplacesAfter() throws {
        let key = try APNsSigningKey(privateKey: .init(), keyID: Self.keyID, teamID: Self.teamID)
        var rotation = ProviderTokenRotation()
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let first = rotation.authorization(at: t0, key: key)
        #expect(first.hasPrefix("bearer "))
        #expect(rotation.authorization(at: t0 + 19 * 60, key: key) == first)
        #expect(rotation.authorization(at: t0 + 49 * 60, key: key) == first)
        let second = rotation.authorization(at: t0 + 50 * 60, key: key)
        #expect(second != first)
        #expect(rotation.current?.issuedAt == t0 + 50 * 60)
        #expect(rotation.authorization(at: t0 + 69 * 60, key: key) == second)
        #expect(rotation.tokensMade == 2)
    }
}

import APNs
import FCM
import Foundation
import NIOCore
import Testing
import _CryptoExtras

@Suite struct AccessTokenGrantTests {
    @Test func theTokenURIGivesTheHostPortAndPathAndOnlyHTTPSIsTaken() {
        let google = AccessTokenGrant.Endpoint(tokenURI: "https://oauth2.googleapis.com/token")
        #expect(google?.endpoint == APNsEndpoint(host: "oauth2.googleapis.com", port: 443) && google?.path == "/token")
        let local = AccessTokenGrant.Endpoint(tokenURI: "https://127.0.0.1:8444/token?x=1")
        #expect(local?.endpoint == APNsEndpoint(host: "127.0.0.1", port: 8444) && local?.path == "/token?x=1")
        #expect(AccessTokenGrant.Endpoint(tokenURI: "http://oauth2.googleapis.com/token") == nil)
        #expect(AccessTokenGrant.Endpoint(tokenURI: "oauth2.googleapis.com/token") == nil)
    }

    @Test func theRequestIsTheJWTBearerGrantFormEncoded() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = try FCMServiceAccount(json: serviceAccountJSON(key: key))
        let endpoint = try #require(AccessTokenGrant.Endpoint(tokenURI: account.tokenURI))
        let request = AccessTokenGrant.request(
            for: account, to: endpoint, now: Date(timeIntervalSince1970: 1_790_000_000))
        #expect(request.path == "/token")
        #expect(request.headers == [.init(name: "content-type", value: "application/x-www-form-urlencoded")])
        let form = String(buffer: request.body.joined)
        let prefix = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
        #expect(form.hasPrefix(prefix))
        let claims = try jwtPart(form.dropFirst(prefix.count).split(separator: ".")[1])
        #expect(claims["iss"] as? String == account.clientEmail && claims["iat"] as? Int == 1_790_000_000)
    }

    @Test func answersAreATokenARefusalOrAPassingFailure() {
        let token = Data(#"{"access_token":"ya29.c.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8)
        #expect(AccessTokenGrant.answer(status: 200, body: token) == .token("ya29.c.abc", expiresIn: .seconds(3599)))
        #expect(
            AccessTokenGrant.answer(status: 200, body: Data("{}".utf8))
                == .unavailable("the token endpoint's answer has no access_token and expires_in"))
        let grant = Data(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8)
        #expect(
            AccessTokenGrant.answer(status: 400, body: grant)
                == .refused("HTTP 400 invalid_grant: Invalid JWT Signature."))
        #expect(AccessTokenGrant.answer(status: 503, body: Data()) == .unavailable("HTTP 503"))
        #expect(AccessTokenGrant.answer(status: 429, body: Data()) == .unavailable("HTTP 429"))
    }
}

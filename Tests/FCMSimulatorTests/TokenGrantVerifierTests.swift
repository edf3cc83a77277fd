import FCM
import Foundation
import Testing
import _CryptoExtras

@testable import FCMSimulator

@Suite struct TokenGrantVerifierTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The OAuth error of a refusal, or nil for a grant.
    func error(of verdict: TokenGrantVerifier.Verdict) -> (error: String, description: String)? {
        guard case .refused(let answer) = verdict else { return nil }
        let body = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: String]
        #expect(answer.status == 400)
        return (body?["error"] ?? "", body?["error_description"] ?? "")
    }

    @Test func theRelaysOwnAssertionIsGranted() throws {
        let file = try ServiceAccountFile.make(projectID: "dispo-4f2a1", clientEmail: nil, tokenURI: "https://x/token")
        let account = try FCMServiceAccount(json: file.json)
        let verifier = TokenGrantVerifier(accounts: [file.account])
        let assertion = FCMAccessAssertion.make(for: account, issuedAt: now)
        #expect(verifier.verify(formBody: grantBody(assertion), now: now) == .granted(file.account))
        // Within the five minutes of skew, and until it expires.
        #expect(verifier.verify(assertion: assertion, now: now - 299) == .granted(file.account))
        #expect(verifier.verify(assertion: assertion, now: now + 3599) == .granted(file.account))
        #expect(error(of: verifier.verify(assertion: assertion, now: now + 3600))?.error == "invalid_grant")
        #expect(error(of: verifier.verify(assertion: assertion, now: now - 301))?.error == "invalid_grant")
    }

    @Test func assertionsGoogleRefusesAreRefusedWithItsErrors() throws {
        let test = try TestAccount()
        let other = try TestAccount(keyID: "otherkey")
        let verifier = TokenGrantVerifier(accounts: [test.account])
        let iat = Int(now.timeIntervalSince1970)
        let cases: [(String, String, String)] = [
            (try test.assertion(at: now, overriding: ["aud": "https://x/token"]), "invalid_grant", "audience"),
            (try test.assertion(at: now, overriding: ["exp": iat + 3601]), "invalid_grant", "iat and exp"),
            (try test.assertion(at: now, overriding: ["exp": iat]), "invalid_grant", "iat and exp"),
            (try test.assertion(at: now, overriding: ["iat": iat + 301, "exp": iat + 900]), "invalid_grant", "iat"),
            (try test.assertion(at: now, overriding: ["iat": nil]), "invalid_grant", "iat"),
            (try test.assertion(at: now, overriding: ["iss": "x@y"]), "invalid_grant", "Invalid email"),
            (try test.assertion(at: now, kid: "unknown"), "invalid_grant", "Signature"),
            (try test.assertion(at: now, overriding: ["scope": nil]), "invalid_scope", "missing scope"),
            (
                try test.assertion(at: now, overriding: ["scope": "https://www.googleapis.com/auth/userinfo.email"]),
                "invalid_scope", "Invalid OAuth scope"
            ),
            (
                try test.jwt(
                    header: ["alg": "RS256", "kid": test.account.keyID],
                    claims: [
                        "iss": test.account.clientEmail, "scope": FCMAccessAssertion.scope,
                        "aud": FCMAccessAssertion.audience, "iat": iat, "exp": iat + 60,
                    ],
                    signer: other.key),
                "invalid_grant", "Signature"
            ),
            (
                try test.jwt(
                    header: ["alg": "HS256", "kid": test.account.keyID], claims: ["iss": test.account.clientEmail]),
                "invalid_grant", "Signature"
            ),
            ("not.a.jwt", "invalid_grant", "Invalid JWT"),
        ]
        for (assertion, expected, words) in cases {
            let refusal = error(of: verifier.verify(formBody: grantBody(assertion), now: now))
            #expect(refusal?.error == expected, "\(words)")
            #expect(refusal?.description.contains(words) == true, "\(refusal?.description ?? "granted")")
        }
        // Both sending scopes are taken, among others.
        let cloud = "https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/cloud-platform"
        #expect(
            verifier.verify(assertion: try test.assertion(at: now, overriding: ["scope": cloud]), now: now)
                == .granted(test.account))
        // Without kid the account is found by its address.
        let noKid = try test.jwt(
            header: ["alg": "RS256"],
            claims: [
                "iss": test.account.clientEmail, "scope": FCMAccessAssertion.scope,
                "aud": FCMAccessAssertion.audience, "iat": iat, "exp": iat + 60,
            ])
        #expect(verifier.verify(assertion: noKid, now: now) == .granted(test.account))
    }

    @Test func theFormMustBeAJWTBearerGrant() throws {
        let test = try TestAccount()
        let verifier = TokenGrantVerifier(accounts: [test.account])
        let assertion = try test.assertion(at: now)
        let wrongType = error(
            of: verifier.verify(formBody: grantBody(assertion, grantType: "client_credentials"), now: now))
        #expect(wrongType?.error == "unsupported_grant_type")
        #expect(error(of: verifier.verify(formBody: Array("assertion=x".utf8), now: now))?.error == "invalid_request")
        let noAssertion = Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer".utf8)
        #expect(error(of: verifier.verify(formBody: noAssertion, now: now))?.description.contains("assertion") == true)
        #expect(TokenGrantVerifier.decodeForm(Array("a=1+2%21&b&a=3".utf8)) == ["a": "1 2!", "b": ""])
    }

    @Test func theTokenEndpointsAnswersHaveGooglesShape() throws {
        let granted = FCMSimulatorAnswer.accessToken("ya29.abc", expiresIn: 3599)
        let json = try #require(try JSONSerialization.jsonObject(with: granted.body) as? [String: Any])
        #expect(json["access_token"] as? String == "ya29.abc" && json["expires_in"] as? Int == 3599)
        #expect(json["token_type"] as? String == "Bearer" && granted.status == 200)
    }
}

import FCM
import Foundation
import Testing
import _CryptoExtras

/// A service-account file as Google's console gives it, with a fresh RSA key.
func serviceAccountJSON(
    key: _RSA.Signing.PrivateKey, project: String = "dispo-4f2a1", overriding: [String: String?] = [:]
) -> Data {
    var fields: [String: String?] = [
        "type": "service_account", "project_id": project, "private_key_id": "3f9c0e1d2b7a",
        "private_key": key.pemRepresentation, "client_email": "relay@\(project).iam.gserviceaccount.com",
        "client_id": "1049", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
    ]
    for (name, value) in overriding { fields[name] = value }
    let present = fields.compactMapValues { $0 }
    return (try? JSONSerialization.data(withJSONObject: present)) ?? Data()
}

/// The fields of a JWT part.
func jwtPart(_ part: Substring) throws -> [String: Any] {
    var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.count % 4 != 0 { text += "=" }
    let data = try #require(Data(base64Encoded: text))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}

@Suite struct ServiceAccountTests {
    @Test func googlesFileIsReadAndItsAssertionVerifiesWithItsPublicKey() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = try FCMServiceAccount(json: serviceAccountJSON(key: key))
        #expect(account.projectID == "dispo-4f2a1" && account.privateKeyID == "3f9c0e1d2b7a")
        #expect(account.clientEmail == "relay@dispo-4f2a1.iam.gserviceaccount.com")
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")

        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let jwt = FCMAccessAssertion.make(for: account, issuedAt: now)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try jwtPart(parts[0])
        #expect(header["alg"] as? String == "RS256" && header["kid"] as? String == "3f9c0e1d2b7a")
        let claims = try jwtPart(parts[1])
        #expect(claims["iss"] as? String == account.clientEmail)
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims["iat"] as? Int == 1_790_000_000 && claims["exp"] as? Int == 1_790_003_600)
        var signature = String(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while signature.count % 4 != 0 { signature += "=" }
        let publicKey = try _RSA.Signing.PublicKey(pemRepresentation: account.publicKeyPEM)
        #expect(publicKey.pemRepresentation == key.publicKey.pemRepresentation)
        let valid = publicKey.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: try #require(Data(base64Encoded: signature))),
            for: Data((parts[0] + "." + parts[1]).utf8), padding: .insecurePKCS1v1_5)
        #expect(valid)
    }

    @Test func filesThatAreNoUsableServiceAccountAreRefusedWithoutRepeatingTheKey() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let cases: [(overriding: [String: String?], code: FCMCredentialError.Code)] = [
            (["type": "authorized_user"], .notServiceAccount),
            (["type": nil], .notServiceAccount),
            (["project_id": nil], .missingField),
            (["private_key_id": ""], .missingField),
            (["client_email": nil], .missingField),
            (["token_uri": nil], .missingField),
            (["token_uri": "not a url"], .missingField),
            (["private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"], .invalidPrivateKey),
        ]
        for (overriding, code) in cases {
            let error = #expect(throws: FCMCredentialError.self) {
                try FCMServiceAccount(json: serviceAccountJSON(key: key, overriding: overriding))
            }
            #expect(error?.code == code, "\(overriding)")
            #expect(!(error?.description.contains("PRIVATE KEY") ?? true))
        }
        #expect(throws: FCMCredentialError.self) { try FCMServiceAccount(json: Data("[1]".utf8)) }
        // An EC key is no RSA key.
        let ec =
            "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
        let refused = #expect(throws: FCMCredentialError.self) {
            try FCMServiceAccount(json: serviceAccountJSON(key: key, overriding: ["private_key": ec]))
        }
        #expect(refused?.code == .invalidPrivateKey)
    }
}

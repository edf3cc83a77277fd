public import Foundation
import _CryptoExtras

/// The JWT a service account signs to ask Google for an access token (the OAuth 2.0 JWT-bearer grant): RS256,
/// `kid` the account's key id, claims `iss` (the account), `scope` (FCM's), `aud` (Google's token endpoint, which
/// Google checks whatever `token_uri` says), `iat` and `exp` (at most an hour later).
public enum FCMAccessAssertion {
    /// The scope FCM HTTP v1 needs.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The audience Google checks.
    public static let audience = "https://oauth2.googleapis.com/token"
    /// How long an assertion is valid: Google's most.
    public static let lifetime: TimeInterval = 3_600

    /// The signed assertion of `account`, issued at `now`.
    public static func make(for account: FCMServiceAccount, issuedAt now: Date) -> String {
        let issued = Int64(now.timeIntervalSince1970)
        let header = #"{"alg":"RS256","typ":"JWT","kid":\#(jsonString(account.privateKeyID))}"#
        let claims =
            #"{"iss":\#(jsonString(account.clientEmail)),"scope":"\#(scope)","aud":"\#(audience)","#
            + #""iat":\#(issued),"exp":\#(issued + Int64(lifetime))}"#
        let signingInput = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        // The key was checked when the account was read: it signs.
        let key = try? _RSA.Signing.PrivateKey(derRepresentation: account.privateKeyDER)
        let signature = try? key?.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + base64URL(signature?.rawRepresentation ?? Data())
    }

    /// `text` as a JSON string literal.
    private static func jsonString(_ text: String) -> String {
        let encoded = try? JSONEncoder().encode(text)
        return encoded.map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }

    /// Base64url without padding, as JWTs are written.
    private static func base64URL(_ data: Data) -> String {
        String(data.base64EncodedString().map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }.filter { $0 != "=" })
    }
}

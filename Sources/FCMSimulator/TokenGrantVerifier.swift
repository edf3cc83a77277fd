import APNs
import FCM
import Foundation
import _CryptoExtras

/// Judges a request to the token endpoint the way Google's OAuth 2.0 server does for a service account's
/// JWT-bearer grant: a value with the accounts it knows and no network, so that each rule is tested on its own.
///
/// The form must be `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`; the JWT is RS256,
/// its `kid` names a known account (without `kid`, its `iss` does) whose `client_email` is the `iss`, and its
/// signature verifies with that account's public key; `aud` is `https://oauth2.googleapis.com/token`; `scope`
/// includes FCM's or `cloud-platform`; `iat` is at most 5 minutes ahead of the clock, `exp` is after it, and
/// `exp - iat` is at most an hour.
struct TokenGrantVerifier: Sendable {
    /// What the verifier decided.
    enum Verdict: Sendable, Hashable {
        /// The grant is good: issue an access token to this account.
        case granted(FCMSimulatorAccount)
        /// The grant is refused with this answer.
        case refused(FCMSimulatorAnswer)
    }

    /// The grant type of the JWT-bearer flow.
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// The scopes that let an account send with FCM.
    static let sendingScopes: Set<String> = [
        FCMAccessAssertion.scope, "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// How far in the future an assertion's `iat` may be (clock skew).
    static let allowedSkew: TimeInterval = 300
    /// The longest an assertion may be valid.
    static let maximumLifetime: Int64 = 3_600

    /// Google's words for a token whose times are out of range.
    private static let badTimes =
        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat "
        + "and exp values in the JWT claim."

    /// The header of an assertion.
    private struct Header: Decodable {
        /// The algorithm: RS256.
        var alg: String?
        /// The account's key id.
        var kid: String?
    }

    /// The claims of an assertion that Google checks.
    private struct Claims: Decodable {
        /// The account's address.
        var iss: String?
        /// The scopes asked for, separated by spaces.
        var scope: String?
        /// Google's token endpoint.
        var aud: String?
        /// When it was issued, in seconds since 1970.
        var iat: Int64?
        /// When it expires, in seconds since 1970.
        var exp: Int64?
    }

    /// The accounts by key id.
    private let accountsByKeyID: [String: FCMSimulatorAccount]

    /// A verifier accepting `accounts` (a later account with the same key id wins).
    init(accounts: [FCMSimulatorAccount]) {
        accountsByKeyID = Dictionary(accounts.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The verdict on a token request's form-encoded `body` at `now`.
    func verify(formBody body: [UInt8], now: Date) -> Verdict {
        let form = Self.decodeForm(body)
        guard let grantType = form["grant_type"] else {
            return .refused(.oauthError("invalid_request", "Missing required parameter: grant_type"))
        }
        guard grantType == Self.grantType else {
            return .refused(.oauthError("unsupported_grant_type", "Invalid grant_type: \(grantType)"))
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return .refused(.oauthError("invalid_request", "Missing required parameter: assertion"))
        }
        return verify(assertion: assertion, now: now)
    }

    /// The verdict on a JWT `assertion` at `now`.
    func verify(assertion: String, now: Date) -> Verdict {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let claimsBytes = Base64URL.decode(parts[1]), let signatureBytes = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsBytes))
        else { return .refused(.oauthError("invalid_grant", "Invalid JWT: the assertion is not a JWS.")) }
        let signature = "Invalid JWT Signature."
        guard header.alg == "RS256" else { return .refused(.oauthError("invalid_grant", signature)) }
        let named =
            header.kid.map { accountsByKeyID[$0] } ?? accountsByKeyID.values.first { $0.clientEmail == claims.iss }
        guard let account = named else {
            let unknownKey = header.kid != nil && accountsByKeyID.values.contains { $0.clientEmail == claims.iss }
            return .refused(.oauthError("invalid_grant", unknownKey ? signature : "Invalid email or User ID"))
        }
        guard claims.iss == account.clientEmail else {
            return .refused(.oauthError("invalid_grant", "Invalid email or User ID"))
        }
        let signingInput = Data(assertion.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let key = try? _RSA.Signing.PublicKey(pemRepresentation: account.publicKeyPEM),
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signatureBytes), for: signingInput,
                padding: .insecurePKCS1v1_5)
        else { return .refused(.oauthError("invalid_grant", signature)) }
        guard claims.aud == FCMAccessAssertion.audience else {
            return .refused(
                .oauthError(
                    "invalid_grant",
                    "Invalid JWT: Failed audience check. The expected audience is \(FCMAccessAssertion.audience)."))
        }
        let clock = Int64(now.timeIntervalSince1970.rounded(.down))
        guard let iat = claims.iat, let exp = claims.exp, Double(iat) <= Double(clock) + Self.allowedSkew,
            exp > clock, exp > iat, exp - iat <= Self.maximumLifetime
        else { return .refused(.oauthError("invalid_grant", Self.badTimes)) }
        let scopes = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        guard !scopes.isEmpty else {
            return .refused(.oauthError("invalid_scope", "Empty or missing scope not allowed."))
        }
        guard !scopes.isDisjoint(with: Self.sendingScopes) else {
            return .refused(.oauthError("invalid_scope", "Invalid OAuth scope or ID token audience provided."))
        }
        return .granted(account)
    }

    /// The fields of an `application/x-www-form-urlencoded` body (`+` is a space; a repeated name keeps its first
    /// value).
    static func decodeForm(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            let name = decode(parts[0])
            if fields[name] == nil { fields[name] = parts.count == 2 ? decode(parts[1]) : "" }
        }
        return fields
    }
}

import APNs
import Crypto
import Foundation

/// The claims of a provider token whose signature verified against a configured key.
struct VerifiedProviderToken: Sendable, Hashable {
    /// `kid`.
    var keyID: String
    /// `iss`, equal to the key's team.
    var teamID: String
    /// `iat`, in seconds since 1970.
    var issuedAt: Int64
}

/// Checks provider tokens (ES256 JWTs) the way APNs does, against the configured keys.
///
/// It checks form, key and signature only; the token's age depends on the clock and is the caller's
/// business, so that results can be cached per token.
struct ProviderTokenVerifier: Sendable {
    private struct Header: Decodable {
        var alg: String
        var kid: String
    }

    private struct Claims: Decodable {
        var iss: String
        var iat: Int64
    }

    private let keys: [String: APNsSimulatorKey]

    /// A verifier accepting `keys` (by key id; a later duplicate id wins).
    init(keys: [APNsSimulatorKey]) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The token's claims when it is a well-formed ES256 JWT whose `kid` is a configured key, whose `iss` is
    /// that key's team and whose signature verifies; nil otherwise (APNs: InvalidProviderToken).
    func verify(_ token: String) -> VerifiedProviderToken? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]),
            let claimsBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsBytes)),
            header.alg == "ES256",
            let key = keys[header.kid],
            claims.iss == key.teamID
        else { return nil }
        // The JWS form is the raw 64-byte r‖s; APNs also tolerates DER, and so does the simulator.
        let signature =
            signatureBytes.count == 64
            ? try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
            : try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes)
        let signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let signature, key.publicKey.isValidSignature(signature, for: signingInput) else { return nil }
        return VerifiedProviderToken(keyID: header.kid, teamID: claims.iss, issuedAt: claims.iat)
    }
}

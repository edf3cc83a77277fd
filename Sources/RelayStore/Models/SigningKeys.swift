import Crypto
package import Foundation
import Logging
import PostgresNIO

/// Which APNs environments a signing key is used for.
package enum SigningKeyEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com` only.
    case production
    /// `api.sandbox.push.apple.com` only.
    case development
    /// Both environments (an APNs key works for both; this is the default).
    case both
}

/// Where a signing key is in its life.
package enum SigningKeyStatus: String, Sendable, Hashable, CaseIterable, Codable {
    /// Used for new work.
    case active
    /// Replaced by a newer key; still used by work already in flight, then retired.
    case retiring
    /// No longer used; kept for the record until removed.
    case retired
}

/// A stored signing key's metadata: everything but the key itself.
package struct SigningKeyRecord: Sendable, Hashable {
    /// The tenant the key belongs to.
    package var tenantID: String
    /// Apple's 10-character key id (`kid`).
    package var keyID: String
    /// Apple's 10-character team id (`iss`).
    package var teamID: String
    /// The environments it is used for.
    package var environment: SigningKeyEnvironment
    /// The first 16 bytes of SHA-256 of the public key's DER (SubjectPublicKeyInfo), as 32 hex digits.
    package var fingerprint: String
    /// Where the key is in its life.
    package var status: SigningKeyStatus
    /// When it was added.
    package var createdAt: Date
    /// When a rotation replaced it, if one did.
    package var retiringAt: Date?
    /// When it was retired, if it was.
    package var retiredAt: Date?
}

/// What kind of credential a sealed key is: how the provider layer decodes its bytes.
package enum CredentialKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// An APNs token-based authentication key (`.p8`): a P-256 private key, its bytes PKCS#8 DER.
    case apnsP8 = "apns_p8"
}

/// A stored signing key unsealed for the relay: its metadata, its kind and its bytes, which the provider
/// layer decodes (the store knows no provider's key types).
package struct UnsealedSigningKey: Sendable {
    /// The key's metadata.
    package var record: SigningKeyRecord
    /// What the bytes are.
    package var kind: CredentialKind
    /// The private key's bytes (for ``CredentialKind/apnsP8``: PKCS#8 DER of a P-256 key).
    package var material: Data
}

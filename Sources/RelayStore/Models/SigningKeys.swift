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
    /// What kind of credential it is: which provider uses it.
    package var kind: CredentialKind
    /// Apple's 10-character key id (`kid`); for an FCM service account its `private_key_id`.
    package var keyID: String
    /// Apple's 10-character team id (`iss`); for an FCM service account its `project_id`.
    package var teamID: String
    /// The environments it is used for (APNs'; ``SigningKeyEnvironment/both`` for an FCM service account).
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
    /// A Google service account that sends through FCM HTTP v1: its bytes the whole JSON file Google gives.
    case fcmServiceAccount = "fcm_service_account"
}

/// A credential checked by its provider's layer, ready to be sealed and stored: the store keeps it without knowing
/// its format (it imports no provider engine), so whoever builds one has checked `material` is what `kind` says.
package struct CheckedCredential: Sendable {
    /// What the bytes are.
    package var kind: CredentialKind
    /// The credential's id, unique per tenant (a `.p8`'s key id; a service account's `private_key_id`).
    package var keyID: String
    /// Whom it signs for (a `.p8`'s team id; a service account's `project_id`).
    package var teamID: String
    /// ``RelayStore/fingerprint(publicKeyDER:)`` of its public key.
    package var fingerprint: String
    /// The secret bytes, sealed before they are stored (never logged or printed: no description shows them).
    package var material: Data

    /// A checked credential of `kind`.
    package init(kind: CredentialKind, keyID: String, teamID: String, fingerprint: String, material: Data) {
        self.kind = kind
        self.keyID = keyID
        self.teamID = teamID
        self.fingerprint = fingerprint
        self.material = material
    }
}

extension CheckedCredential: CustomStringConvertible {
    /// The metadata only, never the material: printing or logging one leaks nothing.
    package var description: String {
        "CheckedCredential(\(kind.rawValue) \(keyID) for \(teamID), fingerprint \(fingerprint))"
    }
}

/// A stored signing key unsealed for the relay: its metadata, its kind and its bytes, which the provider
/// layer decodes (the store knows no provider's key types).
package struct UnsealedSigningKey: Sendable {
    /// The key's metadata.
    package var record: SigningKeyRecord
    /// What the bytes are (the record's kind).
    package var kind: CredentialKind { record.kind }
    /// The private key's bytes (for ``CredentialKind/apnsP8``: PKCS#8 DER of a P-256 key; for
    /// ``CredentialKind/fcmServiceAccount``: the service account's JSON).
    package var material: Data
}

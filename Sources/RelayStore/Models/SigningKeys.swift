public import APNs
import Crypto
public import Foundation
import Logging
import PostgresNIO

/// Which APNs environments a signing key is used for.
public enum SigningKeyEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com` only.
    case production
    /// `api.sandbox.push.apple.com` only.
    case development
    /// Both environments (an APNs key works for both; this is the default).
    case both
}

/// Where a signing key is in its life.
public enum SigningKeyStatus: String, Sendable, Hashable, CaseIterable, Codable {
    /// Used for new work.
    case active
    /// Replaced by a newer key; still used by work already in flight, then retired.
    case retiring
    /// No longer used; kept for the record until removed.
    case retired
}

/// A stored signing key's metadata: everything but the key itself.
public struct SigningKeyRecord: Sendable, Hashable {
    /// The tenant the key belongs to.
    public var tenantID: String
    /// Apple's 10-character key id (`kid`).
    public var keyID: String
    /// Apple's 10-character team id (`iss`).
    public var teamID: String
    /// The environments it is used for.
    public var environment: SigningKeyEnvironment
    /// The first 16 bytes of SHA-256 of the public key's DER (SubjectPublicKeyInfo), as 32 hex digits.
    public var fingerprint: String
    /// Where the key is in its life.
    public var status: SigningKeyStatus
    /// When it was added.
    public var createdAt: Date
    /// When a rotation replaced it, if one did.
    public var retiringAt: Date?
    /// When it was retired, if it was.
    public var retiredAt: Date?
}

/// A stored signing key unsealed for the relay: the usable key and its metadata.
public struct UnsealedSigningKey: Sendable {
    /// The key's metadata.
    public var record: SigningKeyRecord
    /// The key, ready to make provider tokens.
    public var key: APNsSigningKey
}

import APNs
import Crypto
public import Foundation
import Logging
import PostgresNIO

/// A credential just issued: the only time its secret exists outside the backend that receives it.
public struct IssuedCredential: Sendable {
    /// The credential's id, for `list` and `revoke`.
    public var id: String
    /// The tenant it belongs to.
    public var tenantID: String
    /// The operator's name for it.
    public var name: String
    /// The secret's first characters, stored for display.
    public var prefix: String
    /// The secret (`prk_` and 43 base64url characters): shown once, never stored.
    public var secret: String
    /// When it was issued.
    public var createdAt: Date
}

/// A credential a secret was verified against: whom a connection acts for, and which credential, so that
/// revoking it ends the connection's rights.
public struct VerifiedCredential: Sendable, Hashable {
    /// The tenant it belongs to.
    public var tenantID: String
    /// The credential's id.
    public var id: String

    /// A verified credential of `tenantID`.
    public init(tenantID: String, id: String) {
        self.tenantID = tenantID
        self.id = id
    }
}

/// A stored credential, as listed: never its secret or hash.
public struct CredentialRecord: Sendable, Hashable {
    /// The credential's id.
    public var id: String
    /// The tenant it belongs to.
    public var tenantID: String
    /// The operator's name for it.
    public var name: String
    /// The secret's first characters, so an operator can tell which secret a backend holds.
    public var prefix: String
    /// When it was issued.
    public var createdAt: Date
    /// When it was revoked; `nil` while it is valid.
    public var revokedAt: Date?
}

import Crypto
package import Foundation
import Logging
import PostgresNIO

/// A credential just issued: the only time its secret exists outside the backend that receives it.
package struct IssuedCredential: Sendable {
    /// The credential's id, for `list` and `revoke`.
    package var id: String
    /// The tenant it belongs to.
    package var tenantID: String
    /// The operator's name for it.
    package var name: String
    /// The secret's first characters, stored for display.
    package var prefix: String
    /// The secret (`prk_` and 43 base64url characters): shown once, never stored.
    package var secret: String
    /// When it was issued.
    package var createdAt: Date
}

/// A credential a secret was verified against: whom a connection acts for, and which credential, so that
/// revoking it ends the connection's rights.
package struct VerifiedCredential: Sendable, Hashable {
    /// The tenant it belongs to.
    package var tenantID: String
    /// The credential's id.
    package var id: String

    /// A verified credential of `tenantID`.
    package init(tenantID: String, id: String) {
        self.tenantID = tenantID
        self.id = id
    }
}

/// A stored credential, as listed: never its secret or hash.
package struct CredentialRecord: Sendable, Hashable {
    /// The credential's id.
    package var id: String
    /// The tenant it belongs to.
    package var tenantID: String
    /// The operator's name for it.
    package var name: String
    /// The secret's first characters, so an operator can tell which secret a backend holds.
    package var prefix: String
    /// When it was issued.
    package var createdAt: Date
    /// When it was revoked; `nil` while it is valid.
    package var revokedAt: Date?
}

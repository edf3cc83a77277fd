import Crypto
import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// What every secret starts with.
    package static let credentialSecretPrefix = "prk_"
    /// How many characters of a secret are stored in clear (``CredentialRecord/prefix``) and used to find its row:
    /// `prk_` and 8 characters (48 of the secret's 256 random bits).
    package static let credentialPrefixLength = 12

    /// Issues a new credential for `tenant` and returns its secret, which is never stored or shown again:
    /// the database keeps a random 16-byte salt and SHA-256(salt ‖ secret).
    ///
    /// - Throws: ``RelayStoreError/unknownTenant(_:)``.
    package func issueCredential(tenant: String, name: String) async throws(RelayStoreError) -> IssuedCredential {
        // base64url without padding: 43 characters of [A-Za-z0-9_-].
        let random = Data(Self.randomBytes(32)).base64EncodedString()
        let secret =
            Self.credentialSecretPrefix
            + String(random.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }.filter { $0 != "=" })
        let prefix = String(secret.prefix(Self.credentialPrefixLength))
        let salt = Data(Self.randomBytes(16))
        let hash = Self.credentialHash(salt: salt, secret: secret)
        let id = UUID().uuidString.lowercased()
        let logger = self.logger
        return try await mappingErrors {
            return try await database.withConnection { connection in
                try await Self.requireTenant(tenant, on: connection, logger: logger)
                var createdAt = Date()
                for try await value in try await connection.query(
                    """
                    INSERT INTO credentials (id, tenant_id, name, prefix, salt, hash)
                    VALUES (\(id), \(tenant), \(name), \(prefix), \(salt), \(hash))
                    RETURNING created_at
                    """,
                    logger: logger
                ).decode(Date.self) {
                    createdAt = value
                }
                return IssuedCredential(
                    id: id, tenantID: tenant, name: name, prefix: prefix, secret: secret, createdAt: createdAt)
            }
        }
    }

    /// The valid (unrevoked) credential whose secret `secret` is, with its tenant, or `nil`.
    ///
    /// Hashes are compared in constant time (every byte, no early exit), against every unrevoked credential with
    /// the secret's prefix; the result does not depend on which of them matched first.
    package func verifyCredential(_ secret: String) async throws(RelayStoreError) -> VerifiedCredential? {
        // Only the base64url alphabet can be a secret: anything else (a NUL PostgreSQL would refuse) matches nothing.
        guard secret.hasPrefix(Self.credentialSecretPrefix), secret.utf8.count > Self.credentialPrefixLength,
            secret.utf8.allSatisfy({ Self.isSecretByte($0) })
        else {
            return nil
        }
        let prefix = String(secret.prefix(Self.credentialPrefixLength))
        var candidates: [(tenant: String, id: String, salt: Data, hash: Data)] = []
        try await mappingErrors {
            for try await row in try await database.query(
                """
                SELECT tenant_id, id, salt, hash FROM credentials
                WHERE prefix = \(prefix) AND revoked_at IS NULL
                """,
                logger: logger
            ).decode((String, String, Data, Data).self) {
                candidates.append(row)
            }
        }
        var match: VerifiedCredential?
        for candidate in candidates {
            let equal = constantTimeEquals(Self.credentialHash(salt: candidate.salt, secret: secret), candidate.hash)
            if equal && match == nil { match = VerifiedCredential(tenantID: candidate.tenant, id: candidate.id) }
        }
        return match
    }

    /// Whether credential `id` exists and is not revoked: a connection that authenticated with it asks
    /// again every few seconds, so that a revoke ends its rights.
    package func credentialIsValid(id: String) async throws(RelayStoreError) -> Bool {
        return try await mappingErrors {
            for try await _ in try await database.query(
                "SELECT 1 FROM credentials WHERE id = \(id) AND revoked_at IS NULL", logger: logger
            ) {
                return true
            }
            return false
        }
    }

    /// `tenant`'s credentials, oldest first, revoked ones included; never a secret or hash.
    ///
    /// - Throws: ``RelayStoreError/unknownTenant(_:)``.
    package func listCredentials(tenant: String) async throws(RelayStoreError) -> [CredentialRecord] {
        let logger = self.logger
        return try await mappingErrors {
            return try await database.withConnection { connection in
                try await Self.requireTenant(tenant, on: connection, logger: logger)
                var records: [CredentialRecord] = []
                for try await (id, name, prefix, createdAt, revokedAt) in try await connection.query(
                    """
                    SELECT id, name, prefix, created_at, revoked_at FROM credentials
                    WHERE tenant_id = \(tenant) ORDER BY created_at, id
                    """,
                    logger: logger
                ).decode((String, String, String, Date, Date?).self) {
                    records.append(
                        CredentialRecord(
                            id: id, tenantID: tenant, name: name, prefix: prefix, createdAt: createdAt,
                            revokedAt: revokedAt))
                }
                return records
            }
        }
    }

    /// Revokes `tenant`'s credential `id`; revoking it again changes nothing.
    ///
    /// - Throws: ``RelayStoreError/unknownCredential(tenant:id:)`` when `tenant` has no such credential
    ///   (another tenant's credential included).
    package func revokeCredential(tenant: String, id: String) async throws(RelayStoreError) {
        var found = false
        try await mappingErrors {
            for try await _ in try await database.query(
                """
                UPDATE credentials SET revoked_at = coalesce(revoked_at, now())
                WHERE tenant_id = \(tenant) AND id = \(id)
                RETURNING id
                """,
                logger: logger
            ).decode(String.self) {
                found = true
            }
        }
        guard found else { throw .unknownCredential(tenant: tenant, id: id) }
    }

    /// Whether `byte` may stand in a secret: `prk_` and base64url.
    private static func isSecretByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    static func credentialHash(salt: Data, secret: String) -> Data {
        var hasher = SHA256()
        hasher.update(data: salt)
        hasher.update(data: Data(secret.utf8))
        return Data(hasher.finalize())
    }

    private static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

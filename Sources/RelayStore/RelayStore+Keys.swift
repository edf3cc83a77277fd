package import Crypto
package import Foundation
import Logging
import PostgresNIO

extension RelayStore {
    /// The channel on which every change to a tenant's signing keys is announced, with the tenant id as payload.
    ///
    /// ``addSigningKey(tenant:p8PEM:keyID:teamID:environment:masterKey:)``,
    /// ``rotateSigningKey(tenant:oldKeyID:p8PEM:keyID:teamID:environment:masterKey:)``, their forms for a credential
    /// of any kind (``addSigningKey(tenant:credential:environment:masterKey:)``,
    /// ``rotateSigningKey(tenant:oldKeyID:credential:environment:masterKey:)``),
    /// ``retireSigningKey(tenant:keyID:)`` and ``removeSigningKey(tenant:keyID:)`` run
    /// `NOTIFY pushrelay_keys, '<tenant id>'` in the same transaction as the change, so a listener sees it only
    /// once it is committed. A running relay can `LISTEN pushrelay_keys` and reload that tenant's keys
    /// (``loadSigningKeys(tenant:masterKey:)``), rebuilding only that tenant's pools.
    package static let keyChangeChannel = "pushrelay_keys"

    /// Checks a `.p8` key as APNs will use it: Apple's 10-character key and team ids, and a PEM `PRIVATE KEY`
    /// (PKCS#8) of a P-256 key whose ES256 signature verifies with its public key. Returns its PKCS#8 DER and its
    /// fingerprint, as a credential to store.
    static func checkSigningKey(
        p8PEM: String, keyID: String, teamID: String
    ) throws(RelayStoreError) -> CheckedCredential {
        for (field, value) in [("key id", keyID), ("team id", teamID)] where !isAppleIdentifier(value) {
            throw .invalidSigningKey(reason: "the \(field) \"\(value)\" is not 10 upper-case letters and digits")
        }
        guard p8PEM.contains("-----BEGIN PRIVATE KEY-----") else {
            throw .invalidSigningKey(reason: "not a PEM PRIVATE KEY (PKCS#8), as Apple's .p8 files are")
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        } catch {
            throw .invalidSigningKey(reason: "key is not a P-256 (ES256) private key: \(error)")
        }
        let probe = Data("pushrelay signing key check \(keyID).\(teamID)".utf8)
        guard let signature = try? key.signature(for: probe), key.publicKey.isValidSignature(signature, for: probe)
        else {
            throw .invalidSigningKey(reason: "a signature made with it does not verify")
        }
        return CheckedCredential(
            kind: .apnsP8, keyID: keyID, teamID: teamID, fingerprint: fingerprint(of: key.publicKey),
            material: key.derRepresentation)
    }

    /// Whether `value` has the form of Apple's key and team ids: 10 upper-case ASCII letters and digits.
    private static func isAppleIdentifier(_ value: String) -> Bool {
        value.utf8.count == 10
            && value.utf8.allSatisfy { $0 &- UInt8(ascii: "A") < 26 || $0 &- UInt8(ascii: "0") < 10 }
    }

    /// The fingerprint ``SigningKeyRecord/fingerprint`` shows for `publicKey`.
    package static func fingerprint(of publicKey: P256.Signing.PublicKey) -> String {
        fingerprint(publicKeyDER: publicKey.derRepresentation)
    }

    /// The fingerprint ``SigningKeyRecord/fingerprint`` shows for the public key whose DER (SubjectPublicKeyInfo)
    /// is `publicKeyDER`, of any key type: the first 16 bytes of its SHA-256, as 32 hex digits.
    package static func fingerprint(publicKeyDER: some DataProtocol) -> String {
        hexString(SHA256.hash(data: Data(publicKeyDER)).prefix(16))
    }

    /// Checks what the store itself can of a credential its provider's layer checked: a key id and team id of
    /// printable ASCII (1 to 200 bytes, no spaces), and a fingerprint of 32 lower-case hex digits.
    static func checkStorable(_ credential: CheckedCredential) throws(RelayStoreError) {
        for (field, value) in [("key id", credential.keyID), ("team id", credential.teamID)]
        where value.isEmpty || value.utf8.count > 200 || !value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
            throw .invalidSigningKey(reason: "the \(field) is not 1 to 200 printable ASCII characters")
        }
        guard credential.fingerprint.utf8.count == 32,
            credential.fingerprint.utf8.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 || $0 &- UInt8(ascii: "a") < 6 })
        else {
            throw .invalidSigningKey(reason: "the fingerprint is not 32 lower-case hex digits")
        }
        guard !credential.material.isEmpty else { throw .invalidSigningKey(reason: "the credential is empty") }
    }

    /// The additional authenticated data of a sealed key: a sealed key opens only for the tenant and key id
    /// it was sealed for, so its bytes cannot be moved to another tenant or key row.
    static func sealingContext(tenant: String, keyID: String) -> Data {
        Data("pushrelay signing key\u{0}\(tenant)\u{0}\(keyID)".utf8)
    }

    /// Checks a `.p8` key (see ``SigningKeyRecord``) and stores it, sealed with AES-256-GCM under `masterKey`,
    /// as an active key of `tenant`. Nothing is stored when the key is refused.
    ///
    /// - Throws: ``RelayStoreError/invalidSigningKey(reason:)``, ``RelayStoreError/unknownTenant(_:)``,
    ///   ``RelayStoreError/duplicateSigningKey(tenant:keyID:)``.
    @discardableResult
    package func addSigningKey(
        tenant: String,
        p8PEM: String,
        keyID: String,
        teamID: String,
        environment: SigningKeyEnvironment = .both,
        masterKey: MasterKey
    ) async throws(RelayStoreError) -> SigningKeyRecord {
        try await storeSigningKey(
            tenant: tenant, credential: Self.checkSigningKey(p8PEM: p8PEM, keyID: keyID, teamID: teamID),
            environment: environment, masterKey: masterKey, replacing: nil)
    }

    /// Stores `credential`, which its provider's layer checked (an FCM service account: `pushrelay admin key add
    /// --fcm-service-account`), sealed with AES-256-GCM under `masterKey` as a `.p8` is, as an active key of
    /// `tenant` of its kind. Nothing is stored when it is refused.
    ///
    /// - Throws: ``RelayStoreError/invalidSigningKey(reason:)`` (``checkStorable(_:)``),
    ///   ``RelayStoreError/unknownTenant(_:)``, ``RelayStoreError/duplicateSigningKey(tenant:keyID:)``.
    @discardableResult
    package func addSigningKey(
        tenant: String, credential: CheckedCredential, environment: SigningKeyEnvironment = .both,
        masterKey: MasterKey
    ) async throws(RelayStoreError) -> SigningKeyRecord {
        try Self.checkStorable(credential)
        return try await storeSigningKey(
            tenant: tenant, credential: credential, environment: environment, masterKey: masterKey, replacing: nil)
    }

    /// Adds a new active key (as ``addSigningKey(tenant:p8PEM:keyID:teamID:environment:masterKey:)``) and marks
    /// `oldKeyID` as ``SigningKeyStatus/retiring``, in one transaction. The old key stays usable by work already
    /// in flight; ``retireSigningKey(tenant:keyID:)`` retires it once that work is done.
    ///
    /// - Parameter environment: The new key's environments; the old key's when `nil`.
    /// - Throws: as `addSigningKey`, and ``RelayStoreError/unknownSigningKey(tenant:keyID:)`` for `oldKeyID`.
    @discardableResult
    package func rotateSigningKey(
        tenant: String,
        oldKeyID: String,
        p8PEM: String,
        keyID: String,
        teamID: String,
        environment: SigningKeyEnvironment? = nil,
        masterKey: MasterKey
    ) async throws(RelayStoreError) -> SigningKeyRecord {
        try await storeSigningKey(
            tenant: tenant, credential: Self.checkSigningKey(p8PEM: p8PEM, keyID: keyID, teamID: teamID),
            environment: environment, masterKey: masterKey, replacing: oldKeyID)
    }

    /// Adds `credential` as ``addSigningKey(tenant:credential:environment:masterKey:)`` does and marks `oldKeyID`,
    /// an active key of the same kind, as ``SigningKeyStatus/retiring``, in one transaction.
    ///
    /// - Parameter environment: The new key's environments; the old key's when `nil`.
    /// - Throws: as `addSigningKey`; ``RelayStoreError/unknownSigningKey(tenant:keyID:)`` for `oldKeyID`, and
    ///   ``RelayStoreError/invalidSigningKey(reason:)`` when it is of another kind.
    @discardableResult
    package func rotateSigningKey(
        tenant: String, oldKeyID: String, credential: CheckedCredential, environment: SigningKeyEnvironment? = nil,
        masterKey: MasterKey
    ) async throws(RelayStoreError) -> SigningKeyRecord {
        try Self.checkStorable(credential)
        return try await storeSigningKey(
            tenant: tenant, credential: credential, environment: environment, masterKey: masterKey,
            replacing: oldKeyID)
    }

    /// Marks `keyID` of `tenant` as ``SigningKeyStatus/retired``: the relay no longer uses it.
    ///
    /// - Throws: ``RelayStoreError/unknownSigningKey(tenant:keyID:)``.
    package func retireSigningKey(tenant: String, keyID: String) async throws(RelayStoreError) {
        try await changeSigningKey(
            tenant: tenant, keyID: keyID,
            """
            UPDATE signing_keys SET status = 'retired', retired_at = coalesce(retired_at, now())
            WHERE tenant_id = \(tenant) AND key_id = \(keyID)
            RETURNING key_id
            """)
    }

    /// Deletes `keyID` of `tenant`, sealed bytes and all.
    ///
    /// - Throws: ``RelayStoreError/unknownSigningKey(tenant:keyID:)``.
    package func removeSigningKey(tenant: String, keyID: String) async throws(RelayStoreError) {
        try await changeSigningKey(
            tenant: tenant, keyID: keyID,
            "DELETE FROM signing_keys WHERE tenant_id = \(tenant) AND key_id = \(keyID) RETURNING key_id")
    }

    /// The metadata of `tenant`'s signing keys, newest first; never the keys themselves.
    ///
    /// - Throws: ``RelayStoreError/unknownTenant(_:)`` when there is no such tenant.
    package func listSigningKeys(tenant: String) async throws(RelayStoreError) -> [SigningKeyRecord] {
        try await signingKeyRows(tenant: tenant).map(\.record)
    }

    /// `tenant`'s active and retiring keys, unsealed with `masterKey`, newest first: what the relay signs with.
    ///
    /// - Throws: ``RelayStoreError/wrongMasterKey(tenant:keyID:)`` when `masterKey` does not open a key,
    ///   ``RelayStoreError/unknownTenant(_:)``.
    package func loadSigningKeys(tenant: String, masterKey: MasterKey) async throws(RelayStoreError)
        -> [UnsealedSigningKey]
    {
        var keys: [UnsealedSigningKey] = []
        for (record, sealed) in try await signingKeyRows(tenant: tenant) where record.status != .retired {
            guard
                let material = masterKey.open(
                    sealed, context: Self.sealingContext(tenant: record.tenantID, keyID: record.keyID))
            else {
                throw .wrongMasterKey(tenant: record.tenantID, keyID: record.keyID)
            }
            keys.append(UnsealedSigningKey(record: record, material: material))
        }
        return keys
    }

    /// Seals and inserts `credential` as an active key of `tenant`, after marking `oldKeyID` (an active key of the
    /// same kind) retiring when given, announcing the change: one transaction.
    private func storeSigningKey(
        tenant: String,
        credential: CheckedCredential,
        environment: SigningKeyEnvironment?,
        masterKey: MasterKey,
        replacing oldKeyID: String?
    ) async throws(RelayStoreError) -> SigningKeyRecord {
        let (kind, keyID, teamID, fingerprint) = (
            credential.kind, credential.keyID, credential.teamID, credential.fingerprint
        )
        let sealed = masterKey.seal(credential.material, context: Self.sealingContext(tenant: tenant, keyID: keyID))
        let logger = self.logger
        return try await mappingErrors {
            return try await database.withConnection { connection in
                try await connection.withTransaction(logger: logger) { transaction in
                    try await Self.requireTenant(tenant, on: transaction, logger: logger)
                    var newEnvironment = environment ?? .both
                    if let oldKeyID {
                        var old: (environment: String, kind: String)?
                        for try await value in try await transaction.query(
                            """
                            UPDATE signing_keys
                            SET status = 'retiring', retiring_at = coalesce(retiring_at, now())
                            WHERE tenant_id = \(tenant) AND key_id = \(oldKeyID) AND status = 'active'
                            RETURNING environment, kind
                            """,
                            logger: logger
                        ).decode((String, String).self) {
                            old = value
                        }
                        guard let old else {
                            throw RelayStoreError.unknownSigningKey(tenant: tenant, keyID: oldKeyID)
                        }
                        guard old.kind == kind.rawValue else {
                            throw RelayStoreError.invalidSigningKey(
                                reason: "key \(oldKeyID) is \(old.kind), not \(kind.rawValue): a rotation replaces a "
                                    + "key by one of its kind")
                        }
                        if environment == nil {
                            newEnvironment = SigningKeyEnvironment(rawValue: old.environment) ?? .both
                        }
                    }
                    var inserted: Date?
                    for try await createdAt in try await transaction.query(
                        """
                        INSERT INTO signing_keys (tenant_id, key_id, kind, team_id, environment, sealed_key, fingerprint)
                        VALUES (
                            \(tenant), \(keyID), \(kind.rawValue), \(teamID), \(newEnvironment.rawValue), \(sealed),
                            \(fingerprint)
                        )
                        ON CONFLICT (tenant_id, key_id) DO NOTHING
                        RETURNING created_at
                        """,
                        logger: logger
                    ).decode(Date.self) {
                        inserted = createdAt
                    }
                    guard let inserted else {
                        throw RelayStoreError.duplicateSigningKey(tenant: tenant, keyID: keyID)
                    }
                    try await Self.notifyKeyChange(tenant: tenant, on: transaction, logger: logger)
                    return SigningKeyRecord(
                        tenantID: tenant, kind: kind, keyID: keyID, teamID: teamID, environment: newEnvironment,
                        fingerprint: fingerprint, status: .active, createdAt: inserted)
                }
            }
        }
    }

    private func changeSigningKey(
        tenant: String, keyID: String, _ query: PostgresQuery
    ) async throws(RelayStoreError) {
        let logger = self.logger
        try await mappingErrors {
            try await database.withConnection { connection in
                try await connection.withTransaction(logger: logger) { transaction in
                    var found = false
                    for try await _ in try await transaction.query(query, logger: logger).decode(String.self) {
                        found = true
                    }
                    guard found else { throw RelayStoreError.unknownSigningKey(tenant: tenant, keyID: keyID) }
                    try await Self.notifyKeyChange(tenant: tenant, on: transaction, logger: logger)
                }
            }
        }
    }

    private func signingKeyRows(tenant: String) async throws(RelayStoreError) -> [(
        record: SigningKeyRecord, sealed: Data
    )] {
        let logger = self.logger
        return try await mappingErrors {
            return try await database.withConnection { connection in
                try await Self.requireTenant(tenant, on: connection, logger: logger)
                var rows: [(record: SigningKeyRecord, sealed: Data)] = []
                for try await (
                    keyID, kind, teamID, environment, sealed, fingerprint, status, createdAt, retiringAt, retiredAt
                )
                    in try await connection.query(
                        """
                        SELECT key_id, kind, team_id, environment, sealed_key, fingerprint, status,
                               created_at, retiring_at, retired_at
                        FROM signing_keys WHERE tenant_id = \(tenant)
                        ORDER BY created_at DESC, key_id
                        """,
                        logger: logger
                    ).decode((String, String, String, String, Data, String, String, Date, Date?, Date?).self)
                {
                    // A kind a later build added is one this build cannot use: it is not this build's to list.
                    guard let kind = CredentialKind(rawValue: kind) else { continue }
                    let record = SigningKeyRecord(
                        tenantID: tenant, kind: kind, keyID: keyID, teamID: teamID,
                        environment: SigningKeyEnvironment(rawValue: environment) ?? .both, fingerprint: fingerprint,
                        status: SigningKeyStatus(rawValue: status) ?? .retired, createdAt: createdAt,
                        retiringAt: retiringAt, retiredAt: retiredAt)
                    rows.append((record, sealed))
                }
                return rows
            }
        }
    }

    /// Throws ``RelayStoreError/unknownTenant(_:)`` unless tenant `id` exists.
    static func requireTenant(_ id: String, on connection: PostgresConnection, logger: Logger) async throws {
        var found = false
        for try await _ in try await connection.query("SELECT id FROM tenants WHERE id = \(id)", logger: logger)
            .decode(String.self)
        {
            found = true
        }
        guard found else { throw RelayStoreError.unknownTenant(id) }
    }

    private static func notifyKeyChange(
        tenant: String, on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query("SELECT pg_notify(\(keyChangeChannel), \(tenant))", logger: logger)
    }
}

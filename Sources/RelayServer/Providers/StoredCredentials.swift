import RelayStore

/// A tenant's stored credentials of one kind, read and unsealed for a provider's pool: what every push service
/// does before it decodes its own key format, with the same faults (no master key, the wrong one, the database).
struct StoredCredentials {
    let store: RelayStore
    let masterKey: MasterKey?

    /// `tenant`'s credentials of `kind` that `usable` accepts (not retired), as records: no secret is opened.
    ///
    /// - Throws: ``PoolUnavailable``, a passing fault, when the database does not answer.
    func records(
        tenant: String, kind: CredentialKind, where usable: (SigningKeyRecord) -> Bool = { _ in true }
    ) async throws(PoolUnavailable) -> [SigningKeyRecord] {
        do {
            return try await store.listSigningKeys(tenant: tenant).filter {
                $0.kind == kind && $0.status != .retired && usable($0)
            }
        } catch {
            throw PoolUnavailable(
                reason: "database", message: "stored credentials not read: \(error)", isConfiguration: false)
        }
    }

    /// `tenant`'s credentials of `kind`, unsealed, newest first.
    ///
    /// - Throws: ``PoolUnavailable``: a configuration fault when the relay has no master key or not the one that
    ///   sealed them, or a credential does not open; a passing one when the database does not answer.
    func unsealed(tenant: String, kind: CredentialKind) async throws(PoolUnavailable) -> [UnsealedSigningKey] {
        guard let masterKey else {
            throw PoolUnavailable(
                reason: "no_master_key",
                message: "tenant \(tenant) has stored credentials but the relay has no master key "
                    + "(give it master_key_file or PUSHRELAY_MASTER_KEY)",
                isConfiguration: true)
        }
        do {
            return try await store.loadSigningKeys(tenant: tenant, masterKey: masterKey).filter { $0.kind == kind }
        } catch  where error.code == .wrongMasterKey {
            throw PoolUnavailable(
                reason: "master_key_mismatch",
                message: "the relay's master key does not open the stored credentials of \(tenant) "
                    + "(it is not the master key that sealed them)",
                isConfiguration: true)
        } catch {
            throw PoolUnavailable(
                reason: error.isTransient ? "database" : "invalid_signing_key", message: "\(error)",
                isConfiguration: !error.isTransient)
        }
    }
}

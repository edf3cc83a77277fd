import APNs
import Crypto
import Foundation
import PostgresNIO
import RelayStore
import Testing

/// Runs `body` with a migrated store holding the tenants of `Tenants/` (circl, familyportal, argus, anky, dispo).
func withKeyStore(_ body: @escaping @Sendable (RelayStore) async throws -> Void) async throws {
    let tenants = try TenantConfiguration.loadFolder(tenantsFolder)
    try await withMigratedStore { store in
        try await store.syncTenants(tenants)
        try await body(store)
    }
}

/// A fresh P-256 key: Apple's .p8 text and the key's bytes (`P256.Signing.PrivateKey` is not `Sendable`).
struct TestP8: Sendable {
    /// The .p8 (PKCS#8 PEM) text.
    var pem: String
    /// The private scalar.
    var raw: Data
    /// The PKCS#8 DER.
    var der: Data
    /// The public key's DER.
    var publicDER: Data

    /// The public key.
    var publicKey: P256.Signing.PublicKey { try! P256.Signing.PublicKey(derRepresentation: publicDER) }
}

/// A fresh P-256 key as Apple's .p8 text, with the key's bytes.
func makeP8() -> (pem: String, key: TestP8) {
    let key = P256.Signing.PrivateKey()
    let p8 = TestP8(
        pem: key.pemRepresentation, raw: key.rawRepresentation, der: key.derRepresentation,
        publicDER: key.publicKey.derRepresentation)
    return (p8.pem, p8)
}

/// Whether `haystack` contains `needle` as a byte run.
func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    for start in 0...(haystack.count - needle.count) where Array(haystack[start..<start + needle.count]) == needle {
        return true
    }
    return false
}

/// The `sealed_key` bytes of every stored key.
func sealedKeys(in store: RelayStore) async throws -> [[UInt8]] {
    var rows: [[UInt8]] = []
    for try await sealed in try await store.client.query("SELECT sealed_key FROM signing_keys").decode(Data.self) {
        rows.append(Array(sealed))
    }
    return rows
}

/// Whether a signing key's provider token verifies with `publicKey`.
func tokenVerifies(_ unsealed: UnsealedSigningKey, with publicKey: P256.Signing.PublicKey) -> Bool {
    guard unsealed.kind == .apnsP8,
        let key = try? APNsSigningKey(
            privateKey: P256.Signing.PrivateKey(derRepresentation: unsealed.material), keyID: unsealed.record.keyID,
            teamID: unsealed.record.teamID)
    else { return false }
    let parts = key.makeToken(issuedAt: Date()).split(separator: ".")
    guard parts.count == 3, let raw = Base64URL.decode(parts[2]),
        let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
    else { return false }
    return publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
}

/// Runs `operation` and returns the error it threw as a ``RelayStoreError``, or `nil` when it did not throw.
func storeError(_ operation: () async throws -> Void) async -> RelayStoreError? {
    do {
        try await operation()
        return nil
    } catch let error as RelayStoreError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

@Suite("Signing keys")
struct KeyTests {
    @Test("add stores the key sealed: list shows metadata and fingerprint, no PEM or key bytes in the database")
    func addAndList() async throws {
        let master = MasterKey.generate()
        let (pem, privateKey) = makeP8()
        try await withKeyStore { store in
            let added = try await store.addSigningKey(
                tenant: "circl", p8PEM: pem, keyID: "ABCDE12345", teamID: "TEAM123456", environment: .production,
                masterKey: master)
            #expect(added.fingerprint == RelayStore.fingerprint(of: privateKey.publicKey))
            #expect(added.fingerprint.count == 32)

            let listed = try await store.listSigningKeys(tenant: "circl")
            #expect(listed.count == 1)
            let key = try #require(listed.first)
            #expect(key.keyID == "ABCDE12345")
            #expect(key.teamID == "TEAM123456")
            #expect(key.environment == .production)
            #expect(key.status == .active)
            #expect(key.fingerprint == added.fingerprint)
            #expect(key.retiringAt == nil && key.retiredAt == nil)

            // No PEM text, and none of the key's bytes, anywhere in the table.
            let sealed = try await sealedKeys(in: store)
            #expect(sealed.count == 1)
            let bytes = try #require(sealed.first)
            #expect(bytes.count == 12 + privateKey.der.count + 16)
            #expect(!containsBytes(bytes, Array("BEGIN".utf8)))
            #expect(!containsBytes(bytes, Array(privateKey.raw)))
            #expect(!containsBytes(bytes, Array(privateKey.der)))
            let pemBody = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            for text in try await column("SELECT signing_keys::text FROM signing_keys", in: store) {
                #expect(!text.contains("BEGIN"))
                #expect(!text.contains(String(pemBody.prefix(24))))
                #expect(!text.lowercased().contains(Data(privateKey.raw).map { String(format: "%02x", $0) }.joined()))
            }
        }
    }

    @Test("load unseals a key whose provider token verifies; a wrong master key is a typed error")
    func unsealRoundTrip() async throws {
        let master = MasterKey.generate()
        let (pem, privateKey) = makeP8()
        try await withKeyStore { store in
            try await store.addSigningKey(
                tenant: "argus", p8PEM: pem, keyID: "KEY0000001", teamID: "TEAM000001", masterKey: master)
            let loaded = try await store.loadSigningKeys(tenant: "argus", masterKey: master)
            #expect(loaded.count == 1)
            let key = try #require(loaded.first)
            #expect(key.record.environment == .both)
            #expect(key.record.keyID == "KEY0000001" && key.record.teamID == "TEAM000001")
            #expect(tokenVerifies(key, with: privateKey.publicKey))

            let error = await storeError {
                _ = try await store.loadSigningKeys(tenant: "argus", masterKey: .generate())
            }
            guard let error, error.code == .wrongMasterKey else {
                Issue.record("expected wrongMasterKey, got \(String(describing: error))")
                return
            }
            #expect(error.description.contains("tenant argus") && error.detail == "KEY0000001")
            #expect(error.description.contains("wrong master key?"))
        }
    }

    @Test("master keys: missing and malformed ones are typed errors; base64, hex and raw files load")
    func masterKeyLoading() throws {
        #expect(throws: RelayStoreError.self) { try MasterKey.load(file: nil, environment: [:]) }
        do {
            _ = try MasterKey.load(file: nil, environment: [:])
        } catch {
            guard error.code == .missingMasterKey else {
                Issue.record("expected missingMasterKey, got \(error)")
                return
            }
        }
        do {
            _ = try MasterKey(text: "c2hvcnQ=")
            Issue.record("a 5-byte key was accepted")
        } catch {
            guard error.code == .invalidMasterKey else {
                Issue.record("expected invalidMasterKey, got \(error)")
                return
            }
        }
        let generated = MasterKey.generate()
        #expect(!"\(generated)".contains(generated.base64))
        let fromEnvironment = try MasterKey.load(file: nil, environment: ["PUSHRELAY_MASTER_KEY": generated.base64])
        #expect(fromEnvironment.base64 == generated.base64)
        let raw = try #require(Data(base64Encoded: generated.base64))
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        #expect(try MasterKey(text: hex + "\n").base64 == generated.base64)

        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try raw.write(to: URL(fileURLWithPath: folder + "/raw.key"))
        try Data((generated.base64 + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/text.key"))
        #expect(try MasterKey.load(file: folder + "/raw.key").base64 == generated.base64)
        #expect(try MasterKey.load(file: folder + "/text.key", environment: [:]).base64 == generated.base64)
    }

    @Test("a bad .p8, a duplicate key id or an unknown tenant is refused and nothing is stored")
    func refusals() async throws {
        let master = MasterKey.generate()
        let (pem, _) = makeP8()
        try await withKeyStore { store in
            let bad = [
                "not a key",
                pem.replacingOccurrences(of: "PRIVATE KEY", with: "EC PRIVATE KEY"),
                P384.Signing.PrivateKey().pemRepresentation,
                pem.replacingOccurrences(of: "A", with: "B"),
            ]
            for text in bad {
                let error = await storeError {
                    try await store.addSigningKey(
                        tenant: "circl", p8PEM: text, keyID: "ABCDE12345", teamID: "TEAM123456", masterKey: master)
                }
                guard let error, error.code == .invalidSigningKey else {
                    Issue.record("expected invalidSigningKey, got \(String(describing: error))")
                    continue
                }
            }
            let badID = await storeError {
                try await store.addSigningKey(
                    tenant: "circl", p8PEM: pem, keyID: "short", teamID: "TEAM123456", masterKey: master)
            }
            guard badID?.code == .invalidSigningKey else {
                Issue.record("expected invalidSigningKey, got \(String(describing: badID))")
                return
            }
            let unknown = await storeError {
                try await store.addSigningKey(
                    tenant: "nobody", p8PEM: pem, keyID: "ABCDE12345", teamID: "TEAM123456", masterKey: master)
            }
            #expect(unknown.map { "\($0)" } == RelayStoreError.unknownTenant("nobody").description)
            #expect(try await column("SELECT count(*)::text FROM signing_keys", in: store) == ["0"])

            try await store.addSigningKey(
                tenant: "circl", p8PEM: pem, keyID: "ABCDE12345", teamID: "TEAM123456", masterKey: master)
            let duplicate = await storeError {
                try await store.addSigningKey(
                    tenant: "circl", p8PEM: makeP8().pem, keyID: "ABCDE12345", teamID: "TEAM123456",
                    masterKey: master)
            }
            guard duplicate?.code == .duplicateSigningKey else {
                Issue.record("expected duplicateSigningKey, got \(String(describing: duplicate))")
                return
            }
            #expect(try await column("SELECT count(*)::text FROM signing_keys", in: store) == ["1"])
        }
    }

    @Test("rotate makes the old key retiring, retire and remove finish the job")
    func rotateRetireRemove() async throws {
        let master = MasterKey.generate()
        let (oldPEM, _) = makeP8()
        let (newPEM, newKey) = makeP8()
        try await withKeyStore { store in
            try await store.addSigningKey(
                tenant: "familyportal", p8PEM: oldPEM, keyID: "OLDKEY0001", teamID: "TEAM000001",
                environment: .development, masterKey: master)
            let unknownOld = await storeError {
                try await store.rotateSigningKey(
                    tenant: "familyportal", oldKeyID: "NOSUCHKEY1", p8PEM: newPEM, keyID: "NEWKEY0001",
                    teamID: "TEAM000001", masterKey: master)
            }
            guard unknownOld?.code == .unknownSigningKey else {
                Issue.record("expected unknownSigningKey, got \(String(describing: unknownOld))")
                return
            }
            #expect(try await store.listSigningKeys(tenant: "familyportal").count == 1)

            let rotated = try await store.rotateSigningKey(
                tenant: "familyportal", oldKeyID: "OLDKEY0001", p8PEM: newPEM, keyID: "NEWKEY0001",
                teamID: "TEAM000001", masterKey: master)
            #expect(rotated.environment == .development)
            var keys = try await store.listSigningKeys(tenant: "familyportal")
            #expect(Set(keys.map { "\($0.keyID) \($0.status)" }) == ["OLDKEY0001 retiring", "NEWKEY0001 active"])
            #expect(keys.first { $0.keyID == "OLDKEY0001" }?.retiringAt != nil)
            #expect(try await store.loadSigningKeys(tenant: "familyportal", masterKey: master).count == 2)

            try await store.retireSigningKey(tenant: "familyportal", keyID: "OLDKEY0001")
            keys = try await store.listSigningKeys(tenant: "familyportal")
            #expect(keys.first { $0.keyID == "OLDKEY0001" }?.status == .retired)
            #expect(keys.first { $0.keyID == "OLDKEY0001" }?.retiredAt != nil)
            let usable = try await store.loadSigningKeys(tenant: "familyportal", masterKey: master)
            #expect(usable.map(\.record.keyID) == ["NEWKEY0001"])
            #expect(tokenVerifies(try #require(usable.first), with: newKey.publicKey))

            try await store.removeSigningKey(tenant: "familyportal", keyID: "OLDKEY0001")
            #expect(try await store.listSigningKeys(tenant: "familyportal").map(\.keyID) == ["NEWKEY0001"])
            let again = await storeError {
                try await store.removeSigningKey(tenant: "familyportal", keyID: "OLDKEY0001")
            }
            guard again?.code == .unknownSigningKey else {
                Issue.record("expected unknownSigningKey, got \(String(describing: again))")
                return
            }
        }
    }

    @Test("tenant B cannot list, load, retire, remove or reuse the sealed bytes of tenant A's key")
    func tenantScoping() async throws {
        let master = MasterKey.generate()
        let (pem, _) = makeP8()
        try await withKeyStore { store in
            try await store.addSigningKey(
                tenant: "circl", p8PEM: pem, keyID: "ABCDE12345", teamID: "TEAM123456", masterKey: master)
            #expect(try await store.listSigningKeys(tenant: "anky").isEmpty)
            #expect(try await store.loadSigningKeys(tenant: "anky", masterKey: master).isEmpty)
            for operation in [
                { try await store.removeSigningKey(tenant: "anky", keyID: "ABCDE12345") },
                { try await store.retireSigningKey(tenant: "anky", keyID: "ABCDE12345") },
            ] as [@Sendable () async throws -> Void] {
                let error = await storeError(operation)
                guard let error, error.code == .unknownSigningKey else {
                    Issue.record("expected unknownSigningKey, got \(String(describing: error))")
                    continue
                }
                #expect(error.description.contains("\"anky\""))
            }
            #expect(try await store.listSigningKeys(tenant: "circl").map(\.status) == [.active])
            let unknownTenant = await storeError { _ = try await store.listSigningKeys(tenant: "nobody") }
            #expect(unknownTenant.map { "\($0)" } == RelayStoreError.unknownTenant("nobody").description)

            // Copying circl's sealed bytes into anky's rows does not give anky a usable key.
            try await store.client.query(
                """
                INSERT INTO signing_keys (tenant_id, key_id, team_id, environment, sealed_key, fingerprint)
                SELECT 'anky', key_id, team_id, environment, sealed_key, fingerprint FROM signing_keys
                WHERE tenant_id = 'circl'
                """)
            let moved = await storeError { _ = try await store.loadSigningKeys(tenant: "anky", masterKey: master) }
            guard moved?.code == .wrongMasterKey else {
                Issue.record("expected wrongMasterKey, got \(String(describing: moved))")
                return
            }
            #expect(moved?.description.contains("tenant anky") == true)
        }
    }

    @Test("every key change sends NOTIFY pushrelay_keys with the tenant id")
    func notifications() async throws {
        let master = MasterKey.generate()
        let (pem, _) = makeP8()
        try await withKeyStore { store in
            let payloads = try await store.client.withConnection { connection in
                try await connection.listen(on: RelayStore.keyChangeChannel) { notifications in
                    try await store.addSigningKey(
                        tenant: "circl", p8PEM: pem, keyID: "ABCDE12345", teamID: "TEAM123456", masterKey: master)
                    try await store.retireSigningKey(tenant: "circl", keyID: "ABCDE12345")
                    try await store.removeSigningKey(tenant: "circl", keyID: "ABCDE12345")
                    // A failed change sends nothing; the marker shows the sequence is drained up to here.
                    _ = await storeError { try await store.removeSigningKey(tenant: "anky", keyID: "ABCDE12345") }
                    try await store.client.query("SELECT pg_notify('pushrelay_keys', 'end')")
                    var payloads: [String] = []
                    for try await notification in notifications {
                        if notification.payload == "end" { break }
                        payloads.append(notification.payload)
                    }
                    return payloads
                }
            }
            #expect(payloads == ["circl", "circl", "circl"])
        }
    }
}

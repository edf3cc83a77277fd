import Crypto
import Foundation
import PostgresNIO
import RelayStore
import Testing

/// A service account as its provider's layer hands it to the store: Google's JSON file (its `private_key` any PEM
/// text, since the store reads none of it) with the metadata taken from it.
struct TestServiceAccount: Sendable {
    /// The file's text.
    var json: Data
    /// The base64 body of its `private_key`, which must never be in the database in clear.
    var pemBody: String
    /// The credential the store is given.
    var credential: CheckedCredential
}

/// A service account of `project` whose `private_key_id` is `keyID`.
func makeServiceAccount(project: String = "dispo-app", keyID: String = "4c1e0f2a9b7d") -> TestServiceAccount {
    let key = P256.Signing.PrivateKey()
    let pem = key.pemRepresentation
    let fields = [
        "type": "service_account", "project_id": project, "private_key_id": keyID, "private_key": pem,
        "client_email": "relay@\(project).iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
    ]
    let json = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
    let credential = CheckedCredential(
        kind: .fcmServiceAccount, keyID: keyID, teamID: project,
        fingerprint: RelayStore.fingerprint(publicKeyDER: key.publicKey.derRepresentation), material: json)
    return TestServiceAccount(
        json: json, pemBody: pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined(),
        credential: credential)
}

@Suite("Credential kinds")
struct CredentialKindTests {
    @Test("an FCM service account is stored sealed, listed with its kind and loaded as its JSON")
    func serviceAccountStoredSealed() async throws {
        let master = MasterKey.generate()
        let account = makeServiceAccount()
        let (p8, _) = makeP8()
        try await withKeyStore { store in
            try await store.addSigningKey(
                tenant: "dispo", p8PEM: p8, keyID: "DISPOKEY01", teamID: "DISPOTEAM1", masterKey: master)
            let added = try await store.addSigningKey(
                tenant: "dispo", credential: account.credential, masterKey: master)
            #expect(added.kind == .fcmServiceAccount && added.keyID == "4c1e0f2a9b7d" && added.teamID == "dispo-app")
            #expect(added.environment == .both && added.status == .active)
            #expect(added.fingerprint == account.credential.fingerprint)

            let listed = try await store.listSigningKeys(tenant: "dispo")
            #expect(
                Set(listed.map { "\($0.keyID) \($0.kind.rawValue)" }) == [
                    "DISPOKEY01 apns_p8", "4c1e0f2a9b7d fcm_service_account",
                ])
            let loaded = try await store.loadSigningKeys(tenant: "dispo", masterKey: master)
            let unsealed = try #require(loaded.first { $0.kind == .fcmServiceAccount })
            #expect(unsealed.material == account.json)
            #expect(loaded.first { $0.kind == .apnsP8 }?.record.keyID == "DISPOKEY01")

            // What a pg_dump would show: neither the JSON nor the key's PEM body in clear.
            for text in try await column("SELECT signing_keys::text FROM signing_keys", in: store) {
                #expect(!text.contains("BEGIN") && !text.contains("client_email") && !text.contains("gserviceaccount"))
                #expect(!text.contains(String(account.pemBody.prefix(24))))
            }
            for sealed in try await sealedKeys(in: store) {
                #expect(!containsBytes(sealed, Array(account.pemBody.prefix(24).utf8)))
            }
            // The sealed JSON opens only for its tenant and key id, as a .p8 does.
            try await store.client.query(
                """
                INSERT INTO signing_keys (tenant_id, key_id, kind, team_id, environment, sealed_key, fingerprint)
                SELECT 'anky', key_id, kind, team_id, environment, sealed_key, fingerprint FROM signing_keys
                WHERE tenant_id = 'dispo' AND kind = 'fcm_service_account'
                """)
            let moved = await storeError { _ = try await store.loadSigningKeys(tenant: "anky", masterKey: master) }
            #expect(moved?.code == .wrongMasterKey)
        }
    }

    @Test("rotate, retire and remove work for service accounts; a rotation across kinds changes nothing")
    func serviceAccountLifecycle() async throws {
        let master = MasterKey.generate()
        let old = makeServiceAccount(keyID: "0ld0000000000001")
        let new = makeServiceAccount(keyID: "4e40000000000002")
        let (p8, _) = makeP8()
        try await withKeyStore { store in
            try await store.addSigningKey(tenant: "dispo", credential: old.credential, masterKey: master)
            try await store.addSigningKey(
                tenant: "dispo", p8PEM: p8, keyID: "DISPOKEY01", teamID: "DISPOTEAM1", masterKey: master)

            let across = await storeError {
                try await store.rotateSigningKey(
                    tenant: "dispo", oldKeyID: "DISPOKEY01", credential: new.credential, masterKey: master)
            }
            #expect(across?.code == .invalidSigningKey)
            #expect(across?.description.contains("apns_p8, not fcm_service_account") == true)
            var statuses = Dictionary(
                uniqueKeysWithValues: try await store.listSigningKeys(tenant: "dispo").map { ($0.keyID, $0.status) })
            #expect(statuses == ["0ld0000000000001": .active, "DISPOKEY01": .active])

            let rotated = try await store.rotateSigningKey(
                tenant: "dispo", oldKeyID: "0ld0000000000001", credential: new.credential, masterKey: master)
            #expect(rotated.kind == .fcmServiceAccount && rotated.status == .active)
            statuses = Dictionary(
                uniqueKeysWithValues: try await store.listSigningKeys(tenant: "dispo").map { ($0.keyID, $0.status) })
            #expect(statuses == ["0ld0000000000001": .retiring, "4e40000000000002": .active, "DISPOKEY01": .active])

            try await store.retireSigningKey(tenant: "dispo", keyID: "0ld0000000000001")
            let usable = try await store.loadSigningKeys(tenant: "dispo", masterKey: master)
            #expect(usable.filter { $0.kind == .fcmServiceAccount }.map(\.material) == [new.json])
            try await store.removeSigningKey(tenant: "dispo", keyID: "0ld0000000000001")
            #expect(
                Set(try await store.listSigningKeys(tenant: "dispo").map(\.keyID)) == [
                    "4e40000000000002", "DISPOKEY01",
                ])
        }
    }

    @Test("what the store can check of a credential is checked; nothing is stored when it is refused")
    func refusals() async throws {
        let master = MasterKey.generate()
        let account = makeServiceAccount()
        try await withKeyStore { store in
            let good = account.credential
            let cases = [
                CheckedCredential(
                    kind: good.kind, keyID: "", teamID: good.teamID, fingerprint: good.fingerprint,
                    material: good.material),
                CheckedCredential(
                    kind: good.kind, keyID: good.keyID, teamID: "has space", fingerprint: good.fingerprint,
                    material: good.material),
                CheckedCredential(
                    kind: good.kind, keyID: good.keyID, teamID: good.teamID, fingerprint: "abcdef",
                    material: good.material),
                CheckedCredential(
                    kind: good.kind, keyID: good.keyID, teamID: good.teamID,
                    fingerprint: String(repeating: "G", count: 32), material: good.material),
                CheckedCredential(
                    kind: good.kind, keyID: good.keyID, teamID: good.teamID, fingerprint: good.fingerprint,
                    material: Data()),
            ]
            for credential in cases {
                let error = await storeError {
                    try await store.addSigningKey(tenant: "dispo", credential: credential, masterKey: master)
                }
                #expect(error?.code == .invalidSigningKey, "\(credential)")
            }
            let stored = try await column("SELECT count(*)::text FROM signing_keys", in: store)
            #expect(stored == ["0"])
            // Its description is its metadata, never the material.
            #expect(!"\(account.credential)".contains("BEGIN") && "\(account.credential)".contains("dispo-app"))
        }
    }

    @Test("a service account's changes are announced as a .p8's are")
    func serviceAccountNotifications() async throws {
        let master = MasterKey.generate()
        let account = makeServiceAccount()
        try await withKeyStore { store in
            let payloads = try await store.client.withConnection { connection in
                try await connection.listen(on: RelayStore.keyChangeChannel) { notifications in
                    try await store.addSigningKey(tenant: "dispo", credential: account.credential, masterKey: master)
                    try await store.removeSigningKey(tenant: "dispo", keyID: account.credential.keyID)
                    try await store.client.query("SELECT pg_notify('pushrelay_keys', 'end')")
                    var payloads: [String] = []
                    for try await notification in notifications {
                        if notification.payload == "end" { break }
                        payloads.append(notification.payload)
                    }
                    return payloads
                }
            }
            #expect(payloads == ["dispo", "dispo"])
        }
    }
}

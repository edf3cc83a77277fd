import Crypto
import Foundation
import PostgresNIO
import RelayStore
import Testing

@Suite("Credentials")
struct CredentialTests {
    @Test("issue returns the secret once and stores only salt and SHA-256(salt || secret); verify finds the tenant")
    func issueAndVerify() async throws {
        try await withKeyStore { store in
            let issued = try await store.issueCredential(tenant: "circl", name: "circl-api")
            #expect(issued.secret.hasPrefix("prk_"))
            #expect(issued.secret.count == 4 + 43)
            #expect(issued.secret.hasPrefix(issued.prefix))
            #expect(issued.prefix.count == RelayStore.credentialPrefixLength)

            // The table holds no secret: only the display prefix, a 16-byte salt and a 32-byte hash.
            let secretTail = String(issued.secret.dropFirst(RelayStore.credentialPrefixLength))
            for text in try await column("SELECT credentials::text FROM credentials", in: store) {
                #expect(!text.contains(issued.secret))
                #expect(!text.contains(secretTail))
            }
            var rows: [(Data, Data)] = []
            for try await row in try await store.client.query("SELECT salt, hash FROM credentials").decode(
                (Data, Data).self)
            {
                rows.append(row)
            }
            let (salt, hash) = try #require(rows.first)
            #expect(rows.count == 1 && salt.count == 16 && hash.count == 32)
            #expect(hash == Data(SHA256.hash(data: salt + Data(issued.secret.utf8))))

            #expect(try await store.verifyCredential(issued.secret)?.tenantID == "circl")
            var wrong = issued.secret
            let last = wrong.removeLast()
            wrong.append(last == "A" ? "B" : "A")
            #expect(try await store.verifyCredential(wrong) == nil)
            #expect(try await store.verifyCredential("prk_") == nil)
            // Not the base64url alphabet (a NUL PostgreSQL would refuse): no credential, not an error.
            #expect(try await store.verifyCredential("prk_\u{0}" + issued.secret.dropFirst(5)) == nil)
            #expect(try await store.verifyCredential(issued.secret + "\n") == nil)
            #expect(try await store.verifyCredential("") == nil)
            #expect(try await store.verifyCredential(issued.prefix + String(repeating: "x", count: 35)) == nil)

            let second = try await store.issueCredential(tenant: "argus", name: "argus-hub")
            #expect(second.secret != issued.secret)
            #expect(try await store.verifyCredential(second.secret)?.tenantID == "argus")
        }
    }

    @Test("list shows id, name, prefix and dates, never a secret; revoked secrets stop verifying")
    func listAndRevoke() async throws {
        try await withKeyStore { store in
            let first = try await store.issueCredential(tenant: "anky", name: "one")
            let second = try await store.issueCredential(tenant: "anky", name: "two")
            var listed = try await store.listCredentials(tenant: "anky")
            #expect(listed.map(\.id) == [first.id, second.id])
            #expect(listed.map(\.name) == ["one", "two"])
            #expect(listed.map(\.prefix) == [first.prefix, second.prefix])
            #expect(listed.allSatisfy { $0.revokedAt == nil && $0.tenantID == "anky" })
            #expect(!"\(listed)".contains(first.secret) && !"\(listed)".contains(second.secret))

            try await store.revokeCredential(tenant: "anky", id: first.id)
            try await store.revokeCredential(tenant: "anky", id: first.id)
            #expect(try await store.verifyCredential(first.secret) == nil)
            let verified = try await store.verifyCredential(second.secret)
            #expect(verified == VerifiedCredential(tenantID: "anky", id: second.id))
            #expect(try await store.credentialIsValid(id: first.id) == false)
            #expect(try await store.credentialIsValid(id: second.id))
            #expect(try await store.credentialIsValid(id: "no-such-credential") == false)
            listed = try await store.listCredentials(tenant: "anky")
            #expect(listed.first { $0.id == first.id }?.revokedAt != nil)
            #expect(listed.first { $0.id == second.id }?.revokedAt == nil)
        }
    }

    @Test("a credential belongs to one tenant: another tenant cannot list or revoke it")
    func tenantScoping() async throws {
        try await withKeyStore { store in
            let issued = try await store.issueCredential(tenant: "circl", name: "circl-api")
            #expect(try await store.listCredentials(tenant: "familyportal").isEmpty)
            let error = await storeError { try await store.revokeCredential(tenant: "familyportal", id: issued.id) }
            guard let error, error.code == .unknownCredential else {
                Issue.record("expected unknownCredential, got \(String(describing: error))")
                return
            }
            #expect(error.description.contains("\"familyportal\"") && error.detail == issued.id)
            #expect(try await store.verifyCredential(issued.secret)?.tenantID == "circl")

            let unknown = await storeError { _ = try await store.issueCredential(tenant: "nobody", name: "x") }
            #expect(unknown.map { "\($0)" } == RelayStoreError.unknownTenant("nobody").description)
        }
    }
}

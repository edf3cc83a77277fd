import Crypto
import Foundation
import RelayStore
import Testing

@testable import RelayServer

extension RelayServerSuites {
    /// A tenant's stored FCM service account is never taken for an APNs key: APNs signs with the tenant's `.p8`,
    /// however new the account is, and a tenant with an account alone has no APNs key.
    @Suite struct CredentialKindTests {
        /// A service account as the admin command stores it (the store reads none of its JSON).
        static func serviceAccount(keyID: String) -> CheckedCredential {
            CheckedCredential(
                kind: .fcmServiceAccount, keyID: keyID, teamID: "dispo-app",
                fingerprint: RelayStore.fingerprint(
                    publicKeyDER: P256.Signing.PrivateKey().publicKey.derRepresentation),
                material: Data(#"{"type":"service_account","project_id":"dispo-app"}"#.utf8))
        }

        @Test func apnsSignsWithTheTenantsP8AndNeverWithItsServiceAccount() async throws {
            try await RelayHarness.with { relay in
                // No fallback key: what the service finds is what the store holds.
                let service = APNsService(
                    store: relay.store, masterKey: relay.masterKey, target: APNsTarget(connectionsPerPool: 1),
                    group: relay.group)
                try await relay.store.addSigningKey(
                    tenant: "dispo", credential: Self.serviceAccount(keyID: "1111aaaa"), masterKey: relay.masterKey)
                do {
                    let key = try await service.signingKey(tenant: "dispo", environment: .production)
                    Issue.record("the service account became APNs key \(key.keyID)")
                } catch let error as PoolUnavailable {
                    #expect(error.reason == "no_signing_key" && error.isConfiguration)
                }

                let p8 = P256.Signing.PrivateKey()
                try await relay.store.addSigningKey(
                    tenant: "dispo", p8PEM: p8.pemRepresentation, keyID: "DISPOKEY01", teamID: "DISPOTEAM1",
                    masterKey: relay.masterKey)
                // A newer service account, listed first, is passed over.
                try await relay.store.addSigningKey(
                    tenant: "dispo", credential: Self.serviceAccount(keyID: "2222bbbb"), masterKey: relay.masterKey)
                #expect(try await relay.store.listSigningKeys(tenant: "dispo").first?.keyID == "2222bbbb")
                for environment in [TenantConfiguration.Environment.production, .development] {
                    let key = try await service.signingKey(tenant: "dispo", environment: environment)
                    #expect(key.keyID == "DISPOKEY01" && key.teamID == "DISPOTEAM1")
                }
                #expect(
                    try await service.credentialID(tenant: "dispo", destination: .apns(.production)) == "DISPOKEY01")
            }
        }
    }
}

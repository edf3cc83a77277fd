import FCM
import Foundation
import RelayStore

/// A Google service account's JSON file as `pushrelay admin key add|rotate --fcm-service-account` reads it: checked
/// by the FCM module when read (its fields, an RSA key that signs), and against the tenant's Firebase project when
/// stored. Nothing it says, errors included, repeats the private key.
struct ServiceAccountFile: Sendable {
    /// Where it was read from, for messages.
    let path: String
    /// The file's bytes, stored sealed as they are.
    let json: Data
    /// The account the file holds.
    let account: FCMServiceAccount

    /// The account's address, which the operator recognises in Google's console.
    var clientEmail: String { account.clientEmail }

    /// Reads and checks the file at `path`.
    ///
    /// - Throws: ``Failure`` saying why the file cannot be read or is no usable service account.
    init(path: String) throws {
        let json: Data
        do {
            json = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw Failure(
                message: "cannot read service-account file \(path): \((error as NSError).localizedDescription)")
        }
        do {
            account = try FCMServiceAccount(json: json)
        } catch {
            throw Failure(message: "\(path): \(error) (nothing stored)")
        }
        self.path = path
        self.json = json
    }

    /// The account as the store keeps it for `tenant` (key id its `private_key_id`, team id its `project_id`),
    /// once its project is the one `tenant`'s file names (`fcm.project_id`, as last synced).
    ///
    /// - Throws: ``Failure`` when the tenant names no FCM project or another one;
    ///   ``RelayStore/RelayStoreError/unknownTenant(_:)``.
    func credential(for tenant: String, in store: RelayStore) async throws -> CheckedCredential {
        guard let record = try await store.tenant(id: tenant) else { throw RelayStoreError.unknownTenant(tenant) }
        guard let project = record.configuration.fcm?.projectID else {
            throw Failure(
                message: "tenant \(tenant) names no FCM project: its tenant file needs fcm: project_id: (this "
                    + "account's is \(account.projectID)), then pushrelay admin tenant sync; nothing stored")
        }
        guard project == account.projectID else {
            throw Failure(
                message: "\(path) is a service account of project \(account.projectID), but tenant \(tenant)'s file "
                    + "names project \(project); nothing stored")
        }
        return CheckedCredential(
            kind: .fcmServiceAccount, keyID: account.privateKeyID, teamID: account.projectID,
            fingerprint: RelayStore.fingerprint(publicKeyDER: account.publicKeyDER), material: json)
    }
}

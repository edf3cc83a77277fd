import Crypto
import Foundation
import _CryptoExtras

/// A fresh service account, as the JSON file Google's console hands a project owner, pointing its `token_uri` at the
/// simulator: what a test (or `pushrelay fcm-sim --new-account`) gives the relay, with the account the simulator
/// then accepts.
struct ServiceAccountFile: Sendable {
    /// The file's text, in Google's field order.
    var json: Data
    /// The account's public half, for the simulator.
    var account: FCMSimulatorAccount

    /// A new RSA-2048 account of `projectID`, named `clientEmail` (default: a `firebase-adminsdk-…` address of the
    /// project), whose file sends its grants to `tokenURI`.
    ///
    /// `private_key_id` is the SHA-1 of the public key (40 hex digits, as Google's are), `private_key` the PKCS#8
    /// PEM, `client_id` 21 random digits.
    static func make(projectID: String, clientEmail: String?, tokenURI: String) throws -> ServiceAccountFile {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyID = Insecure.SHA1.hash(data: key.publicKey.derRepresentation)
            .map { String(format: "%02x", $0) }.joined()
        let suffix = String(keyID.prefix(5))
        let email = clientEmail ?? "firebase-adminsdk-\(suffix)@\(projectID).iam.gserviceaccount.com"
        let clientID = "1" + (1..<21).map { _ in String(Int.random(in: 0...9)) }.joined()
        let escapedEmail = email.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? email
        let fields: [(String, String)] = [
            ("type", "service_account"),
            ("project_id", projectID),
            ("private_key_id", keyID),
            ("private_key", key.pkcs8PEMRepresentation + "\n"),
            ("client_email", email),
            ("client_id", clientID),
            ("auth_uri", "https://accounts.google.com/o/oauth2/auth"),
            ("token_uri", tokenURI),
            ("auth_provider_x509_cert_url", "https://www.googleapis.com/oauth2/v1/certs"),
            ("client_x509_cert_url", "https://www.googleapis.com/robot/v1/metadata/x509/\(escapedEmail)"),
            ("universe_domain", "googleapis.com"),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let lines = try fields.map { name, value in
            "  \"\(name)\": " + String(decoding: try encoder.encode(value), as: UTF8.self)
        }
        let json = Data(("{\n" + lines.joined(separator: ",\n") + "\n}\n").utf8)
        let account = try FCMSimulatorAccount(
            projectID: projectID, keyID: keyID, clientEmail: email, publicKeyPEM: key.publicKey.pemRepresentation)
        return ServiceAccountFile(json: json, account: account)
    }
}

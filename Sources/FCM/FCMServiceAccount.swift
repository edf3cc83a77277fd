public import Foundation
import _CryptoExtras

/// A Google service account as the JSON file a Firebase project owner downloads: what the relay signs its OAuth 2.0
/// assertions with (``FCMAccessAssertion``) to get the access tokens FCM HTTP v1 takes.
///
/// Checked when it is read: `type` is `service_account`; `project_id`, `private_key_id`, `private_key`,
/// `client_email` and `token_uri` are present; the private key is a PEM RSA key of at least 2,048 bits whose
/// RS256 signature verifies with its public key. The other fields of Google's file (`client_id`, `auth_uri`, the
/// certificate URLs) are not used.
public struct FCMServiceAccount: Sendable, Hashable {
    /// The Firebase (Google Cloud) project the account belongs to: the `{project}` of `messages:send`.
    public let projectID: String
    /// The id of the account's key: the assertion's `kid`.
    public let privateKeyID: String
    /// The account's address: the assertion's `iss`.
    public let clientEmail: String
    /// Where the assertion is exchanged for an access token (`https://oauth2.googleapis.com/token` in Google's
    /// files).
    public let tokenURI: String
    /// The private key, PKCS#8 DER (the key type itself is not `Sendable`).
    let privateKeyDER: Data

    /// The account of a service-account file's text.
    ///
    /// - Throws: ``FCMCredentialError`` naming what is wrong; its message never repeats the private key.
    public init(json: Data) throws(FCMCredentialError) {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: json)
        } catch {
            throw FCMCredentialError(.notServiceAccount, "the file is not a service-account JSON object")
        }
        guard file.type == "service_account" else {
            throw FCMCredentialError(
                .notServiceAccount, "its type is \"\(file.type ?? "")\", not \"service_account\"")
        }
        let fields: [(name: String, value: String?)] = [
            ("project_id", file.projectID), ("private_key_id", file.privateKeyID), ("private_key", file.privateKey),
            ("client_email", file.clientEmail), ("token_uri", file.tokenURI),
        ]
        for field in fields where (field.value ?? "").isEmpty {
            throw FCMCredentialError(.missingField, "the file has no \(field.name)")
        }
        guard let tokenURL = URL(string: file.tokenURI!), tokenURL.scheme == "https" || tokenURL.scheme == "http",
            tokenURL.host != nil
        else {
            throw FCMCredentialError(.missingField, "its token_uri is not an http(s) URL")
        }
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: file.privateKey!)
        } catch {
            throw FCMCredentialError(
                .invalidPrivateKey, "its private_key is not a PEM RSA private key of at least 2048 bits")
        }
        let probe = Data("pushrelay service account check".utf8)
        guard let signature = try? key.signature(for: probe, padding: .insecurePKCS1v1_5),
            key.publicKey.isValidSignature(signature, for: probe, padding: .insecurePKCS1v1_5)
        else {
            throw FCMCredentialError(.invalidPrivateKey, "a signature made with its private_key does not verify")
        }
        projectID = file.projectID!
        privateKeyID = file.privateKeyID!
        clientEmail = file.clientEmail!
        tokenURI = file.tokenURI!
        privateKeyDER = key.derRepresentation
    }

    /// The account's public key, PEM: what Google checks the assertion's signature with (and the tests and the
    /// simulator do).
    public var publicKeyPEM: String {
        // The DER came from a key that signed in the initializer.
        (try? _RSA.Signing.PrivateKey(derRepresentation: privateKeyDER).publicKey.pemRepresentation) ?? ""
    }

    /// The account's public key, DER (SubjectPublicKeyInfo): what the relay fingerprints a stored account by.
    public var publicKeyDER: Data {
        (try? _RSA.Signing.PrivateKey(derRepresentation: privateKeyDER).publicKey.derRepresentation) ?? Data()
    }

    /// The fields of Google's file that are read.
    private struct File: Decodable {
        var type: String?
        var projectID: String?
        var privateKeyID: String?
        var privateKey: String?
        var clientEmail: String?
        var tokenURI: String?

        enum CodingKeys: String, CodingKey {
            case type
            case projectID = "project_id"
            case privateKeyID = "private_key_id"
            case privateKey = "private_key"
            case clientEmail = "client_email"
            case tokenURI = "token_uri"
        }
    }
}

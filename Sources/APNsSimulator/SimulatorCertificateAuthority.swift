import Crypto
import Foundation
package import NIOSSL
import SwiftASN1
import X509

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why the simulator's TLS material could not be made or loaded.
enum SimulatorCertificateError: Error, CustomStringConvertible {
    case keyDoesNotMatchCertificate(caFile: String, keyFile: String)
    case cannotLock(path: String, errno: Int32)

    var description: String {
        switch self {
        case .keyDoesNotMatchCertificate(let caFile, let keyFile):
            "\(keyFile) is not the private key of \(caFile); remove both to make a new CA"
        case .cannotLock(let path, let code): "cannot lock \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// The simulator's own certificate authority: signs the server certificate and the client certificates
/// of certificate-based authentication.
///
/// It lives in a directory as `ca.pem` (what clients trust) and `ca-key.pem`, and is reused when present,
/// so clients keep trusting a restarted simulator.
package struct SimulatorCertificateAuthority: Sendable {
    /// The subject attribute that carries an APNs certificate's topic: UID (0.9.2342.19200300.100.1.1).
    static let userIDAttribute: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// The CA certificate.
    let certificate: Certificate
    /// The CA's signing key, as PKCS#8 PEM (kept as text: the key type itself is not `Sendable`).
    private let privateKeyPEM: String
    /// The path of `ca.pem`.
    package let caFile: String

    private init(certificate: Certificate, privateKeyPEM: String, caFile: String) {
        self.certificate = certificate
        self.privateKeyPEM = privateKeyPEM
        self.caFile = caFile
    }

    /// Loads the CA from `directory`, or makes one there (creating the directory) when there is none.
    ///
    /// A lock file serialises simulators that start at the same time with the same directory.
    package static func loadOrCreate(in directory: String) throws -> SimulatorCertificateAuthority {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let caFile = (directory as NSString).appendingPathComponent("ca.pem")
        let keyFile = (directory as NSString).appendingPathComponent("ca-key.pem")
        return try withExclusiveLock(on: (directory as NSString).appendingPathComponent(".ca.lock")) {
            let files = FileManager.default
            if files.fileExists(atPath: caFile), files.fileExists(atPath: keyFile) {
                let certificate = try Certificate(pemEncoded: String(contentsOfFile: caFile, encoding: .utf8))
                let keyPEM = try String(contentsOfFile: keyFile, encoding: .utf8)
                let key = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
                guard certificate.publicKey == Certificate.PublicKey(key.publicKey) else {
                    throw SimulatorCertificateError.keyDoesNotMatchCertificate(caFile: caFile, keyFile: keyFile)
                }
                return SimulatorCertificateAuthority(certificate: certificate, privateKeyPEM: keyPEM, caFile: caFile)
            }
            let key = P256.Signing.PrivateKey()
            let publicKey = Certificate.PublicKey(key.publicKey)
            let name = try DistinguishedName {
                OrganizationName("pushrelay")
                CommonName("pushrelay APNs simulator CA")
            }
            let now = Date()
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: publicKey,
                notValidBefore: now.addingTimeInterval(-3600),
                notValidAfter: now.addingTimeInterval(3650 * 86400),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(digitalSignature: true, keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: publicKey)
                },
                issuerPrivateKey: Certificate.PrivateKey(key)
            )
            try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
            let certificatePEM = try certificate.serializeAsPEM().pemString
            try Data(certificatePEM.utf8).write(to: URL(fileURLWithPath: caFile), options: .atomic)
            return SimulatorCertificateAuthority(
                certificate: certificate, privateKeyPEM: key.pemRepresentation, caFile: caFile
            )
        }
    }

    /// The CA certificate for NIOSSL's trust roots.
    package func trustRoot() throws -> NIOSSLCertificate {
        try NIOSSLCertificate(bytes: Array(certificate.serializeAsPEM().pemString.utf8), format: .pem)
    }

    /// A fresh server certificate and key for `localhost`, 127.0.0.1, ::1 and `host`.
    package func makeServerIdentity(host: String) throws -> (certificate: NIOSSLCertificate, key: NIOSSLPrivateKey) {
        var names: [GeneralName] = [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
        ]
        if let address = Self.ipAddressBytes(host) {
            let name = GeneralName.ipAddress(ASN1OctetString(contentBytes: address[...]))
            if !names.contains(name) { names.append(name) }
        } else if host != "localhost" {
            names.append(.dnsName(host))
        }
        let subject = try DistinguishedName {
            OrganizationName("pushrelay")
            CommonName("localhost")
        }
        let key = P256.Signing.PrivateKey()
        let certificate = try sign(
            subject: subject, publicKey: key.publicKey, usage: .serverAuth, subjectAlternativeNames: names
        )
        return (
            try NIOSSLCertificate(bytes: Array(certificate.serializeAsPEM().pemString.utf8), format: .pem),
            try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem)
        )
    }

    /// A client certificate for certificate-based authentication to `topic`, as PEM texts.
    func issueClientCertificate(topic: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let subject = try DistinguishedName([
            RelativeDistinguishedName.Attribute(type: Self.userIDAttribute, utf8String: topic),
            RelativeDistinguishedName.Attribute(
                type: .RDNAttributeType.commonName, utf8String: "Apple Push Services: \(topic)"
            ),
        ])
        let key = P256.Signing.PrivateKey()
        let certificate = try sign(subject: subject, publicKey: key.publicKey, usage: .clientAuth)
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }

    /// The topic (subject UID) of an APNs client certificate; nil when it has none.
    static func topic(of certificate: NIOSSLCertificate) -> String? {
        guard let parsed = try? Certificate(derEncoded: certificate.toDERBytes()) else { return nil }
        for relativeName in parsed.subject {
            for attribute in relativeName where attribute.type == userIDAttribute {
                return String(attribute.value)
            }
        }
        return nil
    }

    /// A leaf certificate for `publicKey`, valid for a year, signed by this CA.
    private func sign(
        subject: DistinguishedName,
        publicKey: P256.Signing.PublicKey,
        usage: ExtendedKeyUsage.Usage,
        subjectAlternativeNames: [GeneralName] = []
    ) throws -> Certificate {
        let caKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        let subjectKey = Certificate.PublicKey(publicKey)
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([usage])
            SubjectKeyIdentifier(hash: subjectKey)
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier)
            if !subjectAlternativeNames.isEmpty {
                SubjectAlternativeNames(subjectAlternativeNames)
            }
        }
        let now = Date()
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: subjectKey,
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address literal; nil for anything else.
    private static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Runs `body` holding an exclusive `flock` on `path` (created when missing).
    private static func withExclusiveLock<T>(on path: String, _ body: () throws -> T) throws -> T {
        let descriptor = open(path, O_CREAT | O_RDWR, 0o600)
        guard descriptor >= 0 else { throw SimulatorCertificateError.cannotLock(path: path, errno: errno) }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX) == 0 else {
            throw SimulatorCertificateError.cannotLock(path: path, errno: errno)
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}

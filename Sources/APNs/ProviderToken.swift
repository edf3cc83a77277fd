public import Crypto
public import Foundation

/// Why a `.p8` key, key id or team id was refused: a ``code`` to act on, the details the code has, and a sentence for
/// people.
///
/// A struct rather than an enum, in the manner of postgres-nio's `PSQLError`, so that a new code is not a breaking
/// change: compare ``code`` (`error.code == .notPEM`) instead of matching cases.
public struct APNsKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong with the key.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case unreadable, notPEM, wrongPEMLabel, notP256, invalidIdentifier
        }

        let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The file could not be read.
        public static let unreadable = Code(.unreadable)
        /// The text has no `-----BEGIN PRIVATE KEY-----` block.
        public static let notPEM = Code(.notPEM)
        /// The PEM block is of another kind (an EC-only key, a certificate, a public key...).
        public static let wrongPEMLabel = Code(.wrongPEMLabel)
        /// The block is PKCS#8 but does not hold a P-256 private key.
        public static let notP256 = Code(.notP256)
        /// A key id or team id is not 10 upper-case letters and digits.
        public static let invalidIdentifier = Code(.invalidIdentifier)

        /// The code's name (`notPEM`).
        public var description: String { base.rawValue }
    }

    /// What is wrong with the key.
    public var code: Code
    /// With ``Code/unreadable``: the file.
    public var path: String?
    /// Why: the file could not be read (``Code/unreadable``), or the key is not P-256 (``Code/notP256``).
    public var reason: String?
    /// With ``Code/wrongPEMLabel``: the PEM block's label.
    public var label: String?
    /// With ``Code/invalidIdentifier``: which identifier (`key id`, `team id`).
    public var field: String?
    /// With ``Code/invalidIdentifier``: the identifier given.
    public var value: String?

    private init(
        _ code: Code, path: String? = nil, reason: String? = nil, label: String? = nil, field: String? = nil,
        value: String? = nil
    ) {
        self.code = code
        self.path = path
        self.reason = reason
        self.label = label
        self.field = field
        self.value = value
    }

    /// The file at `path` could not be read, for `reason`.
    public static func unreadable(path: String, reason: String) -> Self {
        Self(.unreadable, path: path, reason: reason)
    }
    /// The text has no `-----BEGIN PRIVATE KEY-----` block.
    public static let notPEM = Self(.notPEM)
    /// The PEM block is a `label` block, not a private key (an EC-only key, a certificate, a public key...).
    public static func wrongPEMLabel(_ label: String) -> Self { Self(.wrongPEMLabel, label: label) }
    /// The block is PKCS#8 but does not hold a P-256 private key, as `reason` says.
    public static func notP256(_ reason: String) -> Self { Self(.notP256, reason: reason) }
    /// The `field` (key id or team id) `value` is not 10 upper-case letters and digits.
    public static func invalidIdentifier(field: String, value: String) -> Self {
        Self(.invalidIdentifier, field: field, value: value)
    }

    /// A sentence saying what is wrong with the key.
    public var description: String {
        switch code.base {
        case .unreadable: "cannot read key file \(path ?? ""): \(reason ?? "")"
        case .notPEM:
            "key is not PEM: expected Apple's .p8 text starting with -----BEGIN PRIVATE KEY-----"
        case .wrongPEMLabel:
            "key is a PEM '\(label ?? "")' block; an APNs .p8 key is a PKCS#8 'PRIVATE KEY' block"
        case .notP256: "key is not a P-256 (ES256) private key: \(reason ?? "")"
        case .invalidIdentifier:
            "\(field ?? "") '\(value ?? "")' must be 10 characters of A-Z and 0-9, as Apple shows it"
        }
    }
}

/// An APNs signing key (.p8) with its key id and team id: makes ES256 provider tokens.
public struct APNsSigningKey: Sendable {
    /// The 10-character key id (`kid`).
    public let keyID: String
    /// The 10-character team id (`iss`).
    public let teamID: String
    /// The private scalar (32 bytes); `P256.Signing.PrivateKey` itself is not `Sendable` in swift-crypto 3.
    private let privateKeyBytes: Data

    /// A signing key from the text of Apple's `.p8` file (PKCS#8 PEM).
    public init(pem: String, keyID: String, teamID: String) throws(APNsKeyError) {
        try Self.checkIdentifier(keyID, field: "key id")
        try Self.checkIdentifier(teamID, field: "team id")
        guard let begin = pem.range(of: "-----BEGIN ") else { throw .notPEM }
        let rest = pem[begin.upperBound...]
        guard let dashes = rest.range(of: "-----") else { throw .notPEM }
        let label = String(rest[..<dashes.lowerBound])
        guard label == "PRIVATE KEY" else { throw .wrongPEMLabel(label) }
        do {
            self.privateKeyBytes = try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation
        } catch {
            throw .notP256(String(describing: error))
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A signing key read from a `.p8` file.
    public init(p8File path: String, keyID: String, teamID: String) throws(APNsKeyError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        try self.init(pem: text, keyID: keyID, teamID: teamID)
    }

    /// A signing key from a private key already in memory (tests, key generation).
    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws(APNsKeyError) {
        try Self.checkIdentifier(keyID, field: "key id")
        try Self.checkIdentifier(teamID, field: "team id")
        self.privateKeyBytes = privateKey.rawRepresentation
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The public half, to verify tokens.
    public var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    private var privateKey: P256.Signing.PrivateKey {
        // The bytes came from a valid key in an initializer.
        try! P256.Signing.PrivateKey(rawRepresentation: privateKeyBytes)
    }

    /// A provider token (JWT) issued at `issuedAt`: header `{alg: ES256, kid}`, claims `{iss, iat}`,
    /// signed with the raw 64-byte r‖s signature, base64url without padding.
    public func makeToken(issuedAt: Date) -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        // Signing a P-256 digest only fails on a broken key, which the initializers rule out.
        let signature = try! privateKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    private static func checkIdentifier(_ value: String, field: String) throws(APNsKeyError) {
        let ok =
            value.utf8.count == 10
            && value.utf8.allSatisfy {
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
        if !ok { throw .invalidIdentifier(field: field, value: value) }
    }
}

/// The provider token of one connection: made at its first request, replaced after ``refreshAge``,
/// and never replaced sooner than ``minimumAge`` after the previous one.
public struct ProviderTokenRotation: Sendable {
    /// A token older than this is replaced at the next request (50 minutes).
    public static let refreshAge: TimeInterval = 50 * 60
    /// APNs answers TooManyProviderTokenUpdates to a connection whose token changes sooner (20 minutes).
    public static let minimumAge: TimeInterval = 20 * 60

    /// The current token and when it was issued; nil before the first request.
    public private(set) var current: (token: String, issuedAt: Date)?
    /// The `authorization` header value for the current token.
    public private(set) var authorization: String = ""
    /// How many tokens this connection has made.
    public private(set) var tokensMade = 0

    /// No token yet.
    public init() {}

    /// The `authorization` header value to send at `now`, making or replacing the token as the rules say.
    public mutating func authorization(at now: Date, key: APNsSigningKey) -> String {
        if let current {
            let age = now.timeIntervalSince(current.issuedAt)
            if age < Self.refreshAge || age < Self.minimumAge { return authorization }
        }
        let token = key.makeToken(issuedAt: now)
        current = (token, now)
        authorization = "bearer " + token
        tokensMade += 1
        return authorization
    }
}

/// base64url without padding (RFC 7515 §2).
public enum Base64URL {
    /// Encodes bytes as base64url without `=` padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }

    /// Decodes base64url with or without padding; nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.utf8.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map(Array.init)
    }
}

/// A push service a device's token belongs to (`RegisterDevice.provider`): `apns` (the default), `fcm`, `webpush`.
///
/// Each provider has its own token rule (``storedToken(_:)``): an APNs token is hex and stored lower-cased, since
/// APNs reads it case-insensitively; every other provider's token is opaque text (FCM's are case-sensitive and hold
/// colons), stored and sent byte for byte. A relay serves the providers it has a pool for; the names below are the
/// ones the wire reserves.
public struct PushProvider: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The provider's name on the wire and in the `devices.provider` column.
    public var rawValue: String

    /// A provider from its name (lower-case letters, digits and `_`, at most ``maximumNameBytes`` bytes).
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Apple Push Notification service.
    public static let apns = PushProvider(rawValue: "apns")
    /// Firebase Cloud Messaging (HTTP v1).
    public static let fcm = PushProvider(rawValue: "fcm")
    /// Web Push (RFC 8030).
    public static let webpush = PushProvider(rawValue: "webpush")

    /// Longest provider name, in bytes.
    public static let maximumNameBytes = 32
    /// Length of an APNs token, in hex digits.
    public static let apnsTokenHexDigits = 64...200
    /// Longest token of any other provider, in UTF-8 bytes (an FCM registration token is about 160).
    public static let maximumOpaqueTokenBytes = 4_096

    /// The provider a request names: `apns` when the field is empty, so clients that predate the field work.
    public init(wireName: String) {
        self.init(rawValue: wireName.isEmpty ? Self.apns.rawValue : wireName)
    }

    /// Whether the name is one a provider may have: 1 to ``maximumNameBytes`` of `a-z`, `0-9` and `_`.
    public var isWellFormed: Bool {
        let bytes = rawValue.utf8
        return !bytes.isEmpty && bytes.count <= Self.maximumNameBytes
            && bytes.allSatisfy { byte in
                byte &- UInt8(ascii: "a") < 26 || byte &- UInt8(ascii: "0") < 10 || byte == UInt8(ascii: "_")
            }
    }

    /// The token as stored and sent, or why it is not a token of this provider: an APNs token is an even number
    /// of hex digits (``apnsTokenHexDigits``), either case, lower-cased; any other provider's token is 1 to
    /// ``maximumOpaqueTokenBytes`` bytes with no space or control character, kept as it is.
    public func storedToken(_ token: String) -> Result<String, TokenRefusal> {
        if self == .apns {
            guard Self.isHexToken(token) else {
                let count = token.utf8.count
                guard Self.apnsTokenHexDigits.contains(count), count % 2 == 0 else {
                    return .failure(
                        TokenRefusal(
                            "an APNs device token is an even number of hex digits from 64 to 200, not \(count)"))
                }
                return .failure(TokenRefusal("an APNs device token is hex digits only"))
            }
            return .success(token.lowercased())
        }
        return Self.checkOpaque(token).map { .failure($0) } ?? .success(token)
    }

    /// The forms `token` may be stored in when its provider is not known (UNREGISTER_DEVICE, a SEND's tokens,
    /// QUERY_DELIVERIES): as given, and lower-cased when it has the APNs form in upper or mixed case.
    public static func storedForms(of token: String) -> [String] {
        guard isHexToken(token) else { return [token] }
        let lowered = token.lowercased()
        return lowered == token ? [token] : [token, lowered]
    }

    /// How a token whose provider is not known is recorded when no device holds it (a `no_device` row): lower-cased
    /// when it has the APNs form, else as given.
    public static func canonicalForm(of token: String) -> String {
        isHexToken(token) ? token.lowercased() : token
    }

    /// Why `token` is not a token of any provider, or `nil` when it may be one (a token whose provider the
    /// request does not name).
    public static func checkAnyToken(_ token: String) -> TokenRefusal? {
        isHexToken(token) ? nil : checkOpaque(token)
    }

    /// Whether `token` has the APNs form: an even number of hex digits within ``apnsTokenHexDigits``.
    static func isHexToken(_ token: String) -> Bool {
        let bytes = token.utf8
        return apnsTokenHexDigits.contains(bytes.count) && bytes.count % 2 == 0
            && bytes.allSatisfy { byte in
                byte &- UInt8(ascii: "0") < 10 || (byte | 0x20) &- UInt8(ascii: "a") < 6
            }
    }

    private static func checkOpaque(_ token: String) -> TokenRefusal? {
        let bytes = token.utf8
        guard !bytes.isEmpty, bytes.count <= maximumOpaqueTokenBytes else {
            return TokenRefusal("a device token is 1 to \(maximumOpaqueTokenBytes) bytes, not \(bytes.count)")
        }
        // Printable: no ASCII space or control character, no Unicode space or separator.
        guard
            !token.unicodeScalars.contains(where: {
                $0.value <= 0x20 || $0.value == 0x7F || $0.properties.isWhitespace
                    || $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
            })
        else {
            return TokenRefusal("a device token has no spaces or control characters")
        }
        return nil
    }

    /// Orders providers by name (listings and pools are sorted by it).
    public static func < (lhs: PushProvider, rhs: PushProvider) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The provider's name.
    public var description: String { rawValue }

    /// Decodes a provider from its name.
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the provider as its name.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Why a string is not a device token of a provider: a sentence for the client.
public struct TokenRefusal: Error, Hashable, Sendable {
    /// What is wrong with the token.
    public var message: String

    /// A refusal saying `message`.
    public init(_ message: String) {
        self.message = message
    }
}

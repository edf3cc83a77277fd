/// Why a service-account file was refused: a code to match on and a sentence for the operator, which never
/// repeats the private key.
public struct FCMCredentialError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of fault it is; new codes may come.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The code's name.
        public let description: String

        /// Not JSON, or not a service account's (`type` is not `service_account`).
        public static let notServiceAccount = Code(description: "not_service_account")
        /// A field the relay needs is missing or empty.
        public static let missingField = Code(description: "missing_field")
        /// The private key is not an RSA key of at least 2,048 bits that signs.
        public static let invalidPrivateKey = Code(description: "invalid_private_key")
        /// The token endpoint refused the account's assertion (`invalid_grant`: a deleted key, an unknown
        /// account, a clock out of step).
        public static let tokenRefused = Code(description: "token_refused")
        /// The token endpoint could not be reached or did not answer with a token.
        public static let tokenUnavailable = Code(description: "token_unavailable")
    }

    /// What kind of fault it is.
    public let code: Code
    /// What is wrong, in a sentence.
    public let message: String

    /// A refusal of `code` saying `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The refusal as an operator reads it.
    public var description: String {
        code == .tokenUnavailable ? "no access token: \(message)" : "service account refused: \(message)"
    }
}

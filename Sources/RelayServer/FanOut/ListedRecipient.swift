/// A listed recipient of a SEND: a user, or a token (with no user).
struct ListedRecipient: Hashable, Sendable {
    /// The user, or `nil` for a token listed in `tokens`.
    var user: String?
    /// The token as stored (an APNs token lower-cased), or empty for a user.
    var token: String
}

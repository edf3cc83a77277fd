import Foundation

/// A request whose ids are compared as the relay compares them everywhere: in Unicode Normalization Form C (NFC).
///
/// Swift compares strings by canonical equivalence, PostgreSQL by bytes: `"zo\u{EB}"` and `"zoe\u{308}"` would be one
/// user in a `Set` and two in the database. Every id a request names (users, threads, scopes, the template values
/// that render a thread id) is put in NFC when the request is decoded, before its fields are checked; canonically
/// equivalent spellings then have the same bytes, so both comparisons agree (Protocol/README.md, "Field rules").
public protocol IdentityNormalized {
    /// Puts every id of the request in NFC.
    mutating func normalizeIdentities()
}

extension String {
    /// The string in Unicode Normalization Form C (canonical composition); ASCII is returned as it is.
    public var nfc: String {
        isNotASCII ? precomposedStringWithCanonicalMapping : self
    }

    /// Whether a byte of the string's UTF-8 is not ASCII (the only strings NFC can change).
    var isNotASCII: Bool { utf8.contains { $0 >= 0x80 } }
}

extension Pushrelay_V1_Hello: IdentityNormalized {
    /// The tenant is an ASCII id checked by authentication: nothing to normalize.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_Ping: IdentityNormalized {
    /// A PING names no id.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_Goodbye: IdentityNormalized {
    /// A GOODBYE names no id.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_RegisterDevice: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_UnregisterDevice: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_ListDevices: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_Send: IdentityNormalized {
    /// The users and excluded users, the thread, the scope and the template values (which render thread ids).
    public mutating func normalizeIdentities() {
        // Swift's `==` would call the spellings equal: whether a value changes is asked of its bytes.
        if userIds.contains(where: \.isNotASCII) { userIds = userIds.map(\.nfc) }
        if excludeUserIds.contains(where: \.isNotASCII) { excludeUserIds = excludeUserIds.map(\.nfc) }
        threadID = threadID.nfc
        scope = scope.nfc
        if templateValues.values.contains(where: \.isNotASCII) { templateValues = templateValues.mapValues(\.nfc) }
    }
}

extension Pushrelay_V1_JobStatus: IdentityNormalized {
    /// A job id is ASCII.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_CancelJob: IdentityNormalized {
    /// A job id is ASCII.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_ListNotificationTypes: IdentityNormalized {
    /// It names no id.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_QueryDeliveries: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_SetPreferences: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_GetPreferences: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_SetMute: IdentityNormalized {
    /// The user, the thread and the scope.
    public mutating func normalizeIdentities() {
        userID = userID.nfc
        threadID = threadID.nfc
        scope = scope.nfc
    }
}

extension Pushrelay_V1_ClearMute: IdentityNormalized {
    /// The user, the thread and the scope.
    public mutating func normalizeIdentities() {
        userID = userID.nfc
        threadID = threadID.nfc
        scope = scope.nfc
    }
}

extension Pushrelay_V1_ListMutes: IdentityNormalized {
    /// The user.
    public mutating func normalizeIdentities() { userID = userID.nfc }
}

extension Pushrelay_V1_SetPresence: IdentityNormalized {
    /// The user and the thread.
    public mutating func normalizeIdentities() {
        userID = userID.nfc
        threadID = threadID.nfc
    }
}

extension Pushrelay_V1_SubscribeResults: IdentityNormalized {
    /// It names no id.
    public mutating func normalizeIdentities() {}
}

extension Pushrelay_V1_UnsubscribeResults: IdentityNormalized {
    /// It names no id.
    public mutating func normalizeIdentities() {}
}

package import Foundation
import Logging
import PostgresNIO

/// A user's mute of one thread or one scope: a row of the `mutes` table.
///
/// Exactly one of ``threadID`` and ``scope`` is set.
package struct MuteRecord: Sendable, Hashable {
    /// The user who muted.
    package var userID: String
    /// The muted thread (a notification's `thread-id`), for a thread mute.
    package var threadID: String?
    /// The muted scope (a name the tenant's backend gives a group of notifications), for a scope mute.
    package var scope: String?
    /// When the mute ends; `nil` mutes until it is cleared.
    package var until: Date?

    /// Creates a record.
    package init(userID: String, threadID: String? = nil, scope: String? = nil, until: Date? = nil) {
        self.userID = userID
        self.threadID = threadID
        self.scope = scope
        self.until = until
    }
}

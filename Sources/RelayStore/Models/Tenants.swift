package import Foundation
import Logging
import PostgresNIO

/// What ``RelayStore/syncTenants(_:)`` did, tenant ids sorted in each list.
package struct TenantSyncReport: Sendable, Hashable {
    /// Tenants that were not in the database and were inserted.
    package var created: [String]
    /// Tenants whose stored display name or configuration differed and were replaced.
    package var updated: [String]
    /// Tenants already stored exactly as given.
    package var unchanged: [String]
    /// Tenants in the database that the sync was not given; they are left as they are.
    package var notInFolder: [String]

    /// Creates a report.
    package init(created: [String] = [], updated: [String] = [], unchanged: [String] = [], notInFolder: [String] = []) {
        self.created = created
        self.updated = updated
        self.unchanged = unchanged
        self.notInFolder = notInFolder
    }
}

/// A tenant as stored in the `tenants` table.
package struct TenantRecord: Sendable, Hashable {
    /// The tenant's id.
    package var id: String
    /// The display name from its configuration.
    package var displayName: String
    /// Whether the relay serves it (`admin tenant disable` turns this off; sync leaves it alone).
    package var enabled: Bool
    /// The configuration last synced.
    package var configuration: TenantConfiguration
    /// When it was first synced.
    package var createdAt: Date
    /// When its configuration or enabled flag last changed.
    package var updatedAt: Date
}

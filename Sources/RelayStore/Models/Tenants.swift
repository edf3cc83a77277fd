public import Foundation
import Logging
import PostgresNIO

/// What ``RelayStore/syncTenants(_:)`` did, tenant ids sorted in each list.
public struct TenantSyncReport: Sendable, Hashable {
    /// Tenants that were not in the database and were inserted.
    public var created: [String]
    /// Tenants whose stored display name or configuration differed and were replaced.
    public var updated: [String]
    /// Tenants already stored exactly as given.
    public var unchanged: [String]
    /// Tenants in the database that the sync was not given; they are left as they are.
    public var notInFolder: [String]

    /// Creates a report.
    public init(created: [String] = [], updated: [String] = [], unchanged: [String] = [], notInFolder: [String] = []) {
        self.created = created
        self.updated = updated
        self.unchanged = unchanged
        self.notInFolder = notInFolder
    }
}

/// A tenant as stored in the `tenants` table.
public struct TenantRecord: Sendable, Hashable {
    /// The tenant's id.
    public var id: String
    /// The display name from its configuration.
    public var displayName: String
    /// Whether the relay serves it (`admin tenant disable` turns this off; sync leaves it alone).
    public var enabled: Bool
    /// The configuration last synced.
    public var configuration: TenantConfiguration
    /// When it was first synced.
    public var createdAt: Date
    /// When its configuration or enabled flag last changed.
    public var updatedAt: Date
}

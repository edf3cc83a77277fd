import PostgresNIO

extension RelayStore {
    /// Asks the database for `SELECT 1`: throws when it cannot be reached or does not answer within the call
    /// deadline. The relay's readiness check.
    package func ping() async throws(RelayStoreError) {
        try await mappingErrors {
            for try await _ in try await database.query("SELECT 1", logger: logger) {}
        }
    }

    /// Listens on ``keyChangeChannel`` on one connection and calls `changed` with the tenant id of each
    /// notification (a tenant's signing keys were added, replaced or removed, by any process), until the task is
    /// cancelled or the connection is lost, which throws: the caller listens again.
    package func followKeyChanges(_ changed: @Sendable (_ tenant: String) async -> Void) async throws(RelayStoreError) {
        try await mappingErrors {
            try await client.withConnection { connection in
                try await connection.listen(on: Self.keyChangeChannel) { notifications in
                    for try await notification in notifications {
                        await changed(notification.payload)
                    }
                }
            }
        }
    }
}

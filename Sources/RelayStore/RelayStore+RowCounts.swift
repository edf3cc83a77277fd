package import PostgresNIO

extension RelayStore {
    /// Runs a statement that returns one row per affected row and counts them.
    package func countRows(_ query: PostgresQuery) async throws(RelayStoreError) -> Int {
        return try await mappingErrors {
            var count = 0
            for try await _ in try await database.query(query, logger: logger).decode(Int.self) {
                count += 1
            }
            return count
        }
    }

    /// ``countRows(_:)`` of a hot path's statement, prepared as `name`.
    func countRows<Name: PreparedStatementName>(_ query: PostgresQuery, preparedAs name: Name.Type)
        async throws(RelayStoreError) -> Int
    {
        return try await mappingErrors {
            return try await database.query(query, preparedAs: name, logger: logger).count
        }
    }
}

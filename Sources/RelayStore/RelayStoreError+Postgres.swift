import PostgresNIO

/// Runs `body`, a call to PostgreSQL, and turns what it throws into a ``RelayStoreError`` with
/// ``relayStoreError(from:)``: the one place where the store maps postgres-nio's errors.
@discardableResult
package func mappingErrors<Result>(_ body: () async throws -> Result) async throws(RelayStoreError) -> Result {
    do {
        return try await body()
    } catch {
        throw relayStoreError(from: error)
    }
}

/// The store's error for `error`: a store error as it is (also inside a transaction), a statement PostgreSQL
/// refused for its data as ``RelayStoreError/Code/statementRejected``, anything else as
/// ``RelayStoreError/Code/databaseUnavailable``.
package func relayStoreError(from error: any Error) -> RelayStoreError {
    if let error = error as? RelayStoreError { return error }
    if let transaction = error as? PostgresTransactionError,
        let inner = transaction.closureError as? RelayStoreError
    {
        return inner
    }
    if isRejectedStatement(error) { return .statementRejected(describePostgresError(error)) }
    return .databaseUnavailable(describePostgresError(error))
}

/// Whether PostgreSQL refused a statement for its data (SQLSTATE class 22, data exception, e.g. a NUL in
/// text; class 23, integrity constraint violation): running it again fails again, unlike a lost connection.
private func isRejectedStatement(_ error: any Error) -> Bool {
    if let transaction = error as? PostgresTransactionError {
        guard let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError else {
            return false
        }
        return isRejectedStatement(inner)
    }
    guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
    return state.hasPrefix("22") || state.hasPrefix("23")
}

/// A readable message for an error from postgres-nio, which hides server messages from `description`.
func describePostgresError(_ error: any Error) -> String {
    if let transaction = error as? PostgresTransactionError {
        if let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError {
            return describePostgresError(inner)
        }
        return String(reflecting: transaction)
    }
    if let psql = error as? PSQLError {
        if let info = psql.serverInfo, let message = info[.message] {
            let state = info[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        if let underlying = psql.underlying {
            return "\(psql.code): \(underlying)"
        }
        return "\(psql.code)"
    }
    return String(describing: error)
}

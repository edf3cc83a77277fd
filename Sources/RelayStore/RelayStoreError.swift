import PostgresNIO

/// Everything that can go wrong while setting up, starting, stopping or migrating the store.
///
/// Each case carries what an operator needs to act on it: the command output of a PostgreSQL
/// tool that failed, the offending database URL, or the server's message for a failed migration.
public enum RelayStoreError: Error, CustomStringConvertible {
    /// No PostgreSQL server binaries (`initdb`, `pg_ctl`) were found in the searched folders.
    case noPostgreSQLBinaries(searched: [String])
    /// The data folder cannot hold a cluster: it cannot be created or owned, or its path is unusable.
    case dataFolderUnusable(path: String, reason: String)
    /// `initdb` failed; `output` is what it printed.
    case initdbFailed(output: String)
    /// The server did not start (or did not become ready); `output` is `pg_ctl`'s output and the server log's tail.
    case startFailed(output: String)
    /// `pg_ctl stop` failed; `output` is what it printed.
    case stopFailed(output: String)
    /// A helper program could not be launched at all.
    case commandFailed(command: String, reason: String)
    /// The database URL cannot be used; `reason` says why.
    case invalidDatabaseURL(String, reason: String)
    /// The database could not be reached or did not answer in time: trying again later may succeed.
    case databaseUnavailable(String)
    /// PostgreSQL refused a statement for the data it carried (SQLSTATE classes 22 and 23): trying again
    /// fails again.
    case statementRejected(String)
    /// Migration `version` (`name`) failed and was rolled back; `underlying` is the server's message.
    case migrationFailed(version: Int, name: String, underlying: String)
    /// No tenant has this id.
    case unknownTenant(String)
    /// Two configurations given to one sync have the same tenant id.
    case duplicateTenant(String)
    /// A tenant's stored configuration could not be encoded or decoded.
    case invalidTenantConfiguration(id: String, reason: String)
    /// No master key was given: neither a master key file nor `PUSHRELAY_MASTER_KEY`.
    case missingMasterKey
    /// The master key given is not 32 bytes (raw, base64 or hex); `reason` says what was wrong.
    case invalidMasterKey(reason: String)
    /// The master key does not open the sealed signing key `keyID` of `tenant`.
    case wrongMasterKey(tenant: String, keyID: String)
    /// A `.p8` signing key was refused; `reason` says why. Nothing was stored.
    case invalidSigningKey(reason: String)
    /// Tenant `tenant` has no signing key `keyID`.
    case unknownSigningKey(tenant: String, keyID: String)
    /// Tenant `tenant` already has a signing key `keyID`.
    case duplicateSigningKey(tenant: String, keyID: String)
    /// Tenant `tenant` has no credential `id`.
    case unknownCredential(tenant: String, id: String)
    /// A device registration was refused (a token that is not hex, an unknown topic…); nothing was stored.
    case invalidDeviceRegistration(reason: String)
    /// A batch of delivery records was refused before it reached the database; `reason` says why.
    case invalidDeliveries(reason: String)
    /// An argument was refused before it reached the database (a mute naming both a thread and a scope, a
    /// negative count…); the message says which and why. Nothing was stored.
    case invalidArgument(String)
    /// Tenant `tenant` has no job `id`.
    case unknownJob(tenant: String, id: String)

    /// A one-line explanation of the failure, suitable for an operator.
    public var description: String {
        switch self {
        case .noPostgreSQLBinaries(let searched):
            return "no PostgreSQL server binaries (initdb, pg_ctl) found in \(searched.joined(separator: ", ")); "
                + "install PostgreSQL (Debian: apt-get install postgresql) or give a database URL"
        case .dataFolderUnusable(let path, let reason):
            return "PostgreSQL data folder \(path) is unusable: \(reason)"
        case .initdbFailed(let output):
            return "initdb failed: \(output)"
        case .startFailed(let output):
            return "PostgreSQL did not start: \(output)"
        case .stopFailed(let output):
            return "PostgreSQL did not stop: \(output)"
        case .commandFailed(let command, let reason):
            return "could not run \(command): \(reason)"
        case .invalidDatabaseURL(let url, let reason):
            return "invalid database URL \(url): \(reason)"
        case .databaseUnavailable(let message):
            return "database unavailable: \(message)"
        case .statementRejected(let message):
            return "the database refused the statement: \(message)"
        case .migrationFailed(let version, let name, let underlying):
            return "migration \(version) (\(name)) failed and was rolled back: \(underlying)"
        case .unknownTenant(let id):
            return "no tenant \"\(id)\" (pushrelay admin tenant list shows them)"
        case .duplicateTenant(let id):
            return "tenant \"\(id)\" is given twice"
        case .invalidTenantConfiguration(let id, let reason):
            return "tenant \(id)'s configuration is unreadable: \(reason)"
        case .missingMasterKey:
            return "no master key: give --master-key-file FILE or set PUSHRELAY_MASTER_KEY "
                + "(pushrelay admin master-key generate makes one)"
        case .invalidMasterKey(let reason):
            return "invalid master key: \(reason); it must be 32 bytes, raw or as base64 or hex text"
        case .wrongMasterKey(let tenant, let keyID):
            return "master key does not open the sealed key \(keyID) of tenant \(tenant): wrong master key?"
        case .invalidSigningKey(let reason):
            return "signing key refused, nothing stored: \(reason)"
        case .unknownSigningKey(let tenant, let keyID):
            return
                "tenant \"\(tenant)\" has no signing key \"\(keyID)\" (pushrelay admin key list \(tenant) shows them)"
        case .duplicateSigningKey(let tenant, let keyID):
            return "tenant \"\(tenant)\" already has a signing key \"\(keyID)\""
        case .unknownCredential(let tenant, let id):
            return
                "tenant \"\(tenant)\" has no credential \"\(id)\" (pushrelay admin credential list \(tenant) shows them)"
        case .invalidDeviceRegistration(let reason):
            return "device registration refused: \(reason)"
        case .invalidDeliveries(let reason):
            return "delivery records refused: \(reason)"
        case .invalidArgument(let message):
            return "invalid argument: \(message)"
        case .unknownJob(let tenant, let id):
            return "tenant \"\(tenant)\" has no job \"\(id)\""
        }
    }
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

import PostgresNIO

/// Everything that can go wrong in the store, as a code (what kind of failure, for a caller to act on) and a
/// message (what an operator reads), in the manner of postgres-nio's `PSQLError`.
///
/// The code says what a caller may do: ``Code/databaseUnavailable`` is the one transient failure (trying again
/// later may succeed); ``Code/corruptRow`` means the database holds a row the store cannot read, which retrying
/// does not fix; the others are refusals of what the caller asked for.
package struct RelayStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidDatabaseURL, databaseUnavailable, loginRefused, schemaBehind, statementRejected, corruptRow
            case migrationFailed
            case unknownTenant, duplicateTenant, invalidTenantConfiguration
            case missingMasterKey, invalidMasterKey, wrongMasterKey
            case invalidSigningKey, unknownSigningKey, duplicateSigningKey, unknownCredential
            case invalidDeviceRegistration, invalidDeliveries, invalidArgument, unknownJob
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The database URL cannot be used.
        package static let invalidDatabaseURL = Code(.invalidDatabaseURL)
        /// The database could not be reached or did not answer in time: trying again later may succeed.
        package static let databaseUnavailable = Code(.databaseUnavailable)
        /// PostgreSQL refused the login: no such role or database, a wrong password, no `pg_hba.conf` entry. Trying
        /// again fails again until the settings or the server change.
        package static let loginRefused = Code(.loginRefused)
        /// The database's schema lacks migrations this build has: `pushrelay admin migrate` applies them.
        package static let schemaBehind = Code(.schemaBehind)
        /// PostgreSQL refused a statement for the data it carried (SQLSTATE classes 22 and 23): trying again fails
        /// again.
        package static let statementRejected = Code(.statementRejected)
        /// A stored row cannot be read (an unknown state, environment or outcome; arrays of different lengths):
        /// trying again reads the same row.
        package static let corruptRow = Code(.corruptRow)
        /// A migration failed and was rolled back.
        package static let migrationFailed = Code(.migrationFailed)
        /// No tenant has the id.
        package static let unknownTenant = Code(.unknownTenant)
        /// Two configurations given to one sync have the same tenant id.
        package static let duplicateTenant = Code(.duplicateTenant)
        /// A tenant's stored configuration could not be encoded or decoded.
        package static let invalidTenantConfiguration = Code(.invalidTenantConfiguration)
        /// No master key was given.
        package static let missingMasterKey = Code(.missingMasterKey)
        /// The master key given is not 32 bytes.
        package static let invalidMasterKey = Code(.invalidMasterKey)
        /// The master key does not open a sealed signing key.
        package static let wrongMasterKey = Code(.wrongMasterKey)
        /// A `.p8` signing key was refused; nothing was stored.
        package static let invalidSigningKey = Code(.invalidSigningKey)
        /// The tenant has no such signing key.
        package static let unknownSigningKey = Code(.unknownSigningKey)
        /// The tenant already has a signing key with the id.
        package static let duplicateSigningKey = Code(.duplicateSigningKey)
        /// The tenant has no such credential.
        package static let unknownCredential = Code(.unknownCredential)
        /// A device registration was refused; nothing was stored.
        package static let invalidDeviceRegistration = Code(.invalidDeviceRegistration)
        /// A batch of delivery records was refused before it reached the database.
        package static let invalidDeliveries = Code(.invalidDeliveries)
        /// An argument was refused before it reached the database; nothing was stored.
        package static let invalidArgument = Code(.invalidArgument)
        /// The tenant has no such job.
        package static let unknownJob = Code(.unknownJob)

        /// The code's name, as in logs.
        package var description: String { base.rawValue }
    }

    /// The kind of failure.
    package let code: Code
    /// What the failure is about, without the code's wording: the server's message, the offending value, the
    /// reason a value was refused.
    package let detail: String
    /// A one-line explanation of the failure for an operator.
    package let description: String

    private init(_ code: Code, detail: String, description: String) {
        self.code = code
        self.detail = detail
        self.description = description
    }

    /// Whether trying again later may succeed: only for a database that could not be reached or did not answer.
    package var isTransient: Bool { code == .databaseUnavailable }

    /// The database URL `url` cannot be used; `reason` says why.
    package static func invalidDatabaseURL(_ url: String, reason: String) -> Self {
        Self(.invalidDatabaseURL, detail: reason, description: "invalid database URL \(url): \(reason)")
    }

    /// The database could not be reached or did not answer in time.
    package static func databaseUnavailable(_ message: String) -> Self {
        Self(.databaseUnavailable, detail: message, description: "database unavailable: \(message)")
    }

    /// PostgreSQL at `place` refused the login; `message` is the server's own (`role "x" does not exist`).
    package static func loginRefused(place: String, message: String) -> Self {
        Self(.loginRefused, detail: message, description: "PostgreSQL at \(place) refused the login: \(message)")
    }

    /// The database's schema is at migration `applied`, this build's at `latest`.
    package static func schemaBehind(applied: Int, latest: Int) -> Self {
        Self(
            .schemaBehind, detail: "\(applied) of \(latest)",
            description: "the database schema is at migration \(applied), this pushrelay needs \(latest): "
                + "run `pushrelay admin migrate` (with the same database settings) first")
    }

    /// PostgreSQL refused a statement for the data it carried.
    package static func statementRejected(_ message: String) -> Self {
        Self(.statementRejected, detail: message, description: "the database refused the statement: \(message)")
    }

    /// A stored row cannot be read; `message` says which and why.
    package static func corruptRow(_ message: String) -> Self {
        Self(.corruptRow, detail: message, description: "unreadable row in the database: \(message)")
    }

    /// Migration `version` (`name`) failed and was rolled back; `underlying` is the server's message.
    package static func migrationFailed(version: Int, name: String, underlying: String) -> Self {
        Self(
            .migrationFailed, detail: underlying,
            description: "migration \(version) (\(name)) failed and was rolled back: \(underlying)")
    }

    /// No tenant has the id `id`.
    package static func unknownTenant(_ id: String) -> Self {
        Self(.unknownTenant, detail: id, description: "no tenant \"\(id)\" (pushrelay admin tenant list shows them)")
    }

    /// Two configurations given to one sync have the tenant id `id`.
    package static func duplicateTenant(_ id: String) -> Self {
        Self(.duplicateTenant, detail: id, description: "tenant \"\(id)\" is given twice")
    }

    /// Tenant `id`'s stored configuration could not be encoded or decoded; `reason` says why.
    package static func invalidTenantConfiguration(id: String, reason: String) -> Self {
        Self(
            .invalidTenantConfiguration, detail: reason,
            description: "tenant \(id)'s configuration is unreadable: \(reason)")
    }

    /// No master key was given: neither a master key file nor `PUSHRELAY_MASTER_KEY`.
    package static var missingMasterKey: Self {
        Self(
            .missingMasterKey, detail: "",
            description: "no master key: give --master-key-file FILE or set PUSHRELAY_MASTER_KEY "
                + "(pushrelay admin master-key generate makes one)")
    }

    /// The master key given is not 32 bytes (raw, base64 or hex); `reason` says what was wrong.
    package static func invalidMasterKey(reason: String) -> Self {
        Self(
            .invalidMasterKey, detail: reason,
            description: "invalid master key: \(reason); it must be 32 bytes, raw or as base64 or hex text")
    }

    /// The master key does not open the sealed signing key `keyID` of `tenant`.
    package static func wrongMasterKey(tenant: String, keyID: String) -> Self {
        Self(
            .wrongMasterKey, detail: keyID,
            description: "master key does not open the sealed key \(keyID) of tenant \(tenant): wrong master key?")
    }

    /// A `.p8` signing key was refused; `reason` says why. Nothing was stored.
    package static func invalidSigningKey(reason: String) -> Self {
        Self(.invalidSigningKey, detail: reason, description: "signing key refused, nothing stored: \(reason)")
    }

    /// Tenant `tenant` has no signing key `keyID`.
    package static func unknownSigningKey(tenant: String, keyID: String) -> Self {
        Self(
            .unknownSigningKey, detail: keyID,
            description:
                "tenant \"\(tenant)\" has no signing key \"\(keyID)\" (pushrelay admin key list \(tenant) shows them)")
    }

    /// Tenant `tenant` already has a signing key `keyID`.
    package static func duplicateSigningKey(tenant: String, keyID: String) -> Self {
        Self(
            .duplicateSigningKey, detail: keyID,
            description: "tenant \"\(tenant)\" already has a signing key \"\(keyID)\"")
    }

    /// Tenant `tenant` has no credential `id`.
    package static func unknownCredential(tenant: String, id: String) -> Self {
        Self(
            .unknownCredential, detail: id,
            description:
                "tenant \"\(tenant)\" has no credential \"\(id)\" (pushrelay admin credential list \(tenant) shows them)"
        )
    }

    /// A device registration was refused (a token that is not its provider's, an unknown topic…); nothing was stored.
    package static func invalidDeviceRegistration(reason: String) -> Self {
        Self(.invalidDeviceRegistration, detail: reason, description: "device registration refused: \(reason)")
    }

    /// A batch of delivery records was refused before it reached the database; `reason` says why.
    package static func invalidDeliveries(reason: String) -> Self {
        Self(.invalidDeliveries, detail: reason, description: "delivery records refused: \(reason)")
    }

    /// An argument was refused before it reached the database (a mute naming both a thread and a scope, a
    /// negative count…); `message` says which and why. Nothing was stored.
    package static func invalidArgument(_ message: String) -> Self {
        Self(.invalidArgument, detail: message, description: "invalid argument: \(message)")
    }

    /// Tenant `tenant` has no job `id`.
    package static func unknownJob(tenant: String, id: String) -> Self {
        Self(.unknownJob, detail: id, description: "tenant \"\(tenant)\" has no job \"\(id)\"")
    }
}

extension RelayStore {
    /// Checks, without changing anything, that every migration of this build is applied: what a command that
    /// must not migrate (every `pushrelay admin` command but `migrate`) does before it reads or writes.
    ///
    /// - Throws: ``RelayStoreError/Code/schemaBehind`` naming `pushrelay admin migrate` when a migration is
    ///   missing (also on a database never migrated); ``RelayStoreError/Code/databaseUnavailable`` when the
    ///   database cannot be read.
    package func requireMigrated() async throws(RelayStoreError) {
        let applied = Set(try await appliedMigrations())
        guard let latest = migrations.last?.version else { return }
        if migrations.contains(where: { !applied.contains($0.version) }) {
            throw .schemaBehind(applied: applied.max() ?? 0, latest: latest)
        }
    }
}

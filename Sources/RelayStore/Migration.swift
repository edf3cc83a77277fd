/// One versioned step of the relay's schema.
///
/// Migrations run in `version` order, each in its own transaction, and each is recorded in
/// `schema_migrations` so it is applied exactly once. A migration is a list of statements rather
/// than one string because PostgreSQL's extended protocol takes one statement at a time.
public struct Migration: Sendable, Hashable {
    /// The position in the schema's history; unique and increasing.
    public var version: Int
    /// A short name, recorded next to the version.
    public var name: String
    /// The SQL statements, run in order inside the migration's transaction.
    public var statements: [String]

    /// Creates a migration.
    public init(version: Int, name: String, statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }
}

extension Migration {
    /// Every migration of the relay's schema, in order. Append new ones; never edit applied ones.
    public static let all: [Migration] = [
        Migration(
            version: 1,
            name: "tenants",
            statements: [
                """
                CREATE TABLE tenants (
                    id text PRIMARY KEY,
                    display_name text,
                    enabled boolean NOT NULL DEFAULT true,
                    config jsonb NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now()
                )
                """
            ]
        )
    ]
}

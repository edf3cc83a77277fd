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
        ),
        Migration(
            version: 2,
            name: "keys_and_credentials",
            statements: [
                """
                CREATE TABLE signing_keys (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    key_id text NOT NULL,
                    team_id text NOT NULL,
                    environment text NOT NULL CHECK (environment IN ('production', 'development', 'both')),
                    sealed_key bytea NOT NULL,
                    fingerprint text NOT NULL,
                    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retiring', 'retired')),
                    created_at timestamptz NOT NULL DEFAULT now(),
                    retiring_at timestamptz,
                    retired_at timestamptz,
                    PRIMARY KEY (tenant_id, key_id)
                )
                """,
                """
                CREATE TABLE credentials (
                    id text PRIMARY KEY,
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    name text NOT NULL,
                    prefix text NOT NULL,
                    salt bytea NOT NULL,
                    hash bytea NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    revoked_at timestamptz
                )
                """,
                "CREATE INDEX credentials_prefix ON credentials (prefix)",
                "CREATE INDEX credentials_tenant ON credentials (tenant_id)",
            ]
        ),
        Migration(
            version: 3,
            name: "devices_and_deliveries",
            statements: [
                """
                CREATE TABLE devices (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    slot text NOT NULL,
                    user_id text NOT NULL,
                    token text NOT NULL CHECK (token ~ '^[0-9a-f]+$'),
                    platform text NOT NULL,
                    environment text NOT NULL CHECK (environment IN ('production', 'development')),
                    device_id text,
                    app_version text,
                    locale text,
                    time_zone text,
                    topics text[] NOT NULL DEFAULT '{}',
                    active boolean NOT NULL DEFAULT true,
                    registered_at timestamptz NOT NULL,
                    invalidated_at timestamptz,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    CONSTRAINT devices_policy_slot UNIQUE (tenant_id, slot)
                )
                """,
                "CREATE INDEX devices_tenant_user ON devices (tenant_id, user_id)",
                "CREATE INDEX devices_tenant_token ON devices (tenant_id, token)",
                """
                CREATE TABLE deliveries (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    job_id text NOT NULL,
                    user_id text,
                    token text NOT NULL,
                    apns_id text,
                    outcome text NOT NULL CHECK (
                        outcome IN ('delivered', 'token_dead', 'retry_later', 'configuration_fault', 'skipped')
                    ),
                    reason text,
                    attempt integer NOT NULL CHECK (attempt >= 0),
                    sent_at timestamptz NOT NULL,
                    answered_at timestamptz,
                    latency_ms integer
                ) PARTITION BY RANGE (sent_at)
                """,
                "CREATE INDEX deliveries_tenant_job ON deliveries (tenant_id, job_id)",
                "CREATE INDEX deliveries_tenant_user ON deliveries (tenant_id, user_id, sent_at)",
                "CREATE INDEX deliveries_tenant_token ON deliveries (tenant_id, token, sent_at)",
                "CREATE INDEX deliveries_tenant_sent ON deliveries (tenant_id, sent_at)",
                """
                CREATE FUNCTION pushrelay_ensure_delivery_partition(day date) RETURNS text
                LANGUAGE plpgsql AS $$
                DECLARE
                    partition_name text := 'deliveries_p' || to_char(day, 'YYYYMMDD');
                BEGIN
                    PERFORM pg_advisory_xact_lock(8102588588814526838);
                    IF to_regclass(partition_name) IS NOT NULL THEN
                        RETURN NULL;
                    END IF;
                    EXECUTE format(
                        'CREATE TABLE %I PARTITION OF deliveries FOR VALUES FROM (%L) TO (%L)',
                        partition_name,
                        day::timestamp AT TIME ZONE 'UTC',
                        (day + 1)::timestamp AT TIME ZONE 'UTC'
                    );
                    RETURN partition_name;
                END
                $$
                """,
                """
                CREATE FUNCTION pushrelay_drop_delivery_partitions(cutoff timestamptz) RETURNS SETOF text
                LANGUAGE plpgsql AS $$
                DECLARE
                    partition_name text;
                BEGIN
                    PERFORM pg_advisory_xact_lock(8102588588814526838);
                    FOR partition_name IN
                        SELECT c.relname::text
                        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                        WHERE i.inhparent = 'deliveries'::regclass
                          AND c.relname ~ '^deliveries_p[0-9]{8}$'
                          AND (to_date(substr(c.relname, 13), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= cutoff
                        ORDER BY c.relname
                    LOOP
                        EXECUTE format('DROP TABLE %I', partition_name);
                        RETURN NEXT partition_name;
                    END LOOP;
                END
                $$
                """,
            ]
        ),
    ]
}

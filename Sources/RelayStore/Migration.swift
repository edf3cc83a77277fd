/// One versioned step of the relay's schema.
///
/// Migrations run in `version` order, each in its own transaction, and each is recorded in
/// `schema_migrations` so it is applied exactly once. A migration is a list of statements rather
/// than one string because PostgreSQL's extended protocol takes one statement at a time.
package struct Migration: Sendable, Hashable {
    /// The position in the schema's history; unique and increasing.
    package var version: Int
    /// A short name, recorded next to the version.
    package var name: String
    /// The SQL statements, run in order inside the migration's transaction.
    package var statements: [String]

    /// Creates a migration.
    package init(version: Int, name: String, statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }
}

extension Migration {
    /// Every migration of the relay's schema, in order. Append new ones; never edit applied ones.
    package static let all: [Migration] = [
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
        Migration(
            version: 4,
            name: "jobs_and_user_policy",
            statements: [
                """
                CREATE TABLE jobs (
                    id uuid PRIMARY KEY,
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    notification_type text NOT NULL,
                    state text NOT NULL CHECK (
                        state IN ('accepted', 'scheduled', 'running', 'completed', 'failed', 'cancelled')
                    ),
                    idempotency_key text,
                    request bytea NOT NULL,
                    send_at timestamptz,
                    devices integer NOT NULL DEFAULT 0 CHECK (devices >= 0),
                    delivered integer NOT NULL DEFAULT 0 CHECK (delivered >= 0),
                    failed integer NOT NULL DEFAULT 0 CHECK (failed >= 0),
                    skipped integer NOT NULL DEFAULT 0 CHECK (skipped >= 0),
                    error text,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    finished_at timestamptz,
                    CONSTRAINT jobs_finished_when_final CHECK (
                        (finished_at IS NOT NULL) = (state IN ('completed', 'failed', 'cancelled'))
                    )
                )
                """,
                // A key is unique per tenant while it is set; keys older than the idempotency window are
                // cleared (by the next job that reuses the key, or by maintenance), which frees them.
                """
                CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (tenant_id, idempotency_key)
                WHERE idempotency_key IS NOT NULL
                """,
                "CREATE INDEX jobs_idempotency_age ON jobs (created_at) WHERE idempotency_key IS NOT NULL",
                "CREATE INDEX jobs_tenant_created ON jobs (tenant_id, created_at)",
                "CREATE INDEX jobs_unfinished ON jobs (state, send_at) WHERE finished_at IS NULL",
                "CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL",
                """
                CREATE TABLE preferences (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    user_id text NOT NULL,
                    notification_type text NOT NULL,
                    enabled boolean NOT NULL,
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (tenant_id, user_id, notification_type)
                )
                """,
                """
                CREATE TABLE mutes (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    user_id text NOT NULL,
                    kind text NOT NULL CHECK (kind IN ('thread', 'scope')),
                    value text NOT NULL,
                    until timestamptz,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (tenant_id, user_id, kind, value)
                )
                """,
                "CREATE INDEX mutes_until ON mutes (until) WHERE until IS NOT NULL",
                """
                CREATE TABLE presence (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    user_id text NOT NULL,
                    thread_id text NOT NULL,
                    until timestamptz NOT NULL,
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (tenant_id, user_id, thread_id)
                )
                """,
                "CREATE INDEX presence_until ON presence (until)",
                // Apple's latest invalidation timestamp per token, kept after the device row is deleted or
                // replaced, so that a registration older than it does not bring the token back.
                """
                CREATE TABLE dead_tokens (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    token text NOT NULL CHECK (token ~ '^[0-9a-f]+$'),
                    invalidated_at timestamptz NOT NULL,
                    PRIMARY KEY (tenant_id, token)
                )
                """,
                "CREATE INDEX dead_tokens_invalidated ON dead_tokens (invalidated_at)",
                "CREATE INDEX devices_topics ON devices USING gin (topics)",
            ]
        ),
        Migration(
            version: 5,
            name: "durable_fan_out",
            statements: [
                "ALTER TABLE deliveries ADD COLUMN notification_type text",
                // Planning: a relay process leases an unplanned due job, writes its pages, marks it planned.
                "ALTER TABLE jobs ADD COLUMN planned_at timestamptz",
                "ALTER TABLE jobs ADD COLUMN planning_owner text",
                "ALTER TABLE jobs ADD COLUMN planning_until timestamptz",
                """
                CREATE INDEX jobs_to_plan ON jobs (send_at)
                WHERE planned_at IS NULL AND state IN ('accepted', 'scheduled')
                """,
                // A page: up to a few hundred devices of one job, due at one time, leased by one process.
                """
                CREATE TABLE job_pages (
                    job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
                    page integer NOT NULL CHECK (page >= 0),
                    tenant_id text NOT NULL,
                    due_at timestamptz NOT NULL,
                    tokens text[] NOT NULL,
                    users text[] NOT NULL,
                    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'leased', 'done', 'cancelled')),
                    lease_owner text,
                    lease_until timestamptz,
                    claims integer NOT NULL DEFAULT 0,
                    devices integer NOT NULL DEFAULT 0,
                    delivered integer NOT NULL DEFAULT 0,
                    failed integer NOT NULL DEFAULT 0,
                    skipped integer NOT NULL DEFAULT 0,
                    deferred integer NOT NULL DEFAULT 0,
                    PRIMARY KEY (job_id, page)
                )
                """,
                "CREATE INDEX job_pages_claimable ON job_pages (due_at) WHERE state IN ('pending', 'leased')",
            ]
        ),
        Migration(
            version: 6,
            name: "relay_nodes",
            statements: [
                // One row per running relay process, its heartbeat renewed every few seconds: the live relays
                // share each tenant's notifications_per_second. A process that stops removes its row; the row
                // of one that died is ignored once its heartbeat is old and deleted after an hour.
                """
                CREATE TABLE relay_nodes (
                    id text PRIMARY KEY,
                    started_at timestamptz NOT NULL DEFAULT now(),
                    heartbeat_at timestamptz NOT NULL DEFAULT now()
                )
                """
            ]
        ),
        Migration(
            version: 7,
            name: "fan_out_speed",
            statements: [
                // Whether a job has pages left is asked at every page's end: without this, it reads every page.
                "CREATE INDEX job_pages_open ON job_pages (job_id) WHERE state IN ('pending', 'leased')",
                // A page's token and user arrays (tens of kB) are written once and read once: compressing them
                // costs more CPU than the bytes it saves.
                "ALTER TABLE job_pages ALTER COLUMN tokens SET STORAGE EXTERNAL, ALTER COLUMN users SET STORAGE EXTERNAL",
                // Checking every delivery row's tenant against `tenants` ran a query per row. Tenants are never
                // deleted (a removed tenant file disables its tenant), and retention drops old partitions.
                "ALTER TABLE deliveries DROP CONSTRAINT deliveries_tenant_id_fkey",
            ]
        ),
        Migration(
            version: 8,
            name: "delivery_index_cost",
            statements: [
                // Index upkeep was most of the cost of writing a delivery row.
                // A token is looked up by equality only: a hash index costs a fifth of a (tenant, token, time)
                // btree over 64 random hex characters.
                "DROP INDEX deliveries_tenant_token",
                "CREATE INDEX deliveries_token ON deliveries USING hash (token)",
                // Rows arrive in time order: block ranges find a time window at almost no upkeep.
                "DROP INDEX deliveries_tenant_sent",
                "CREATE INDEX deliveries_sent ON deliveries USING brin (sent_at)",
                // A fan-out writes one job id a million times: merging the duplicates into posting lists costs
                // more per row than the space it saves.
                "DROP INDEX deliveries_tenant_job",
                "CREATE INDEX deliveries_tenant_job ON deliveries (tenant_id, job_id) WITH (deduplicate_items = off)",
            ]
        ),
        Migration(
            version: 9,
            name: "delivery_job_index",
            statements: [
                // Job ids are unique across tenants: the job index needs no tenant. With the tenant first, the
                // planner could read a fresh day partition (no statistics yet) for the per-user cap counts
                // through the job index, every row of the tenant's day once per user. Only the (tenant, user, time) index now starts with the tenant.
                "DROP INDEX deliveries_tenant_job",
                "CREATE INDEX deliveries_job ON deliveries (job_id) WITH (deduplicate_items = off)",
            ]
        ),
        Migration(
            version: 10,
            name: "topic_range_pages",
            statements: [
                // A topic page due at one time is a token range of the topic, resolved when it is sent: the
                // active devices subscribed to `topic` whose token comes after `range_after` and up to
                // `range_last`: no tokens and users are written into a page and read back (the database's time and the
                // relay's decoding of the strings). `range_devices` is how many the
                // planner counted. Such a page's `tokens` and `users` are empty.
                """
                ALTER TABLE job_pages ADD COLUMN topic text, ADD COLUMN range_after text, ADD COLUMN range_last text,
                    ADD COLUMN range_devices integer,
                    ADD CONSTRAINT job_pages_range CHECK (
                        (topic IS NULL) = (range_last IS NULL) AND (topic IS NULL) = (range_after IS NULL)
                        AND (topic IS NULL) = (range_devices IS NULL)
                    )
                """
            ]
        ),
        Migration(
            version: 11,
            name: "token_users",
            statements: [
                // Every (tenant, token, user) pair a device row has held, and when it last changed. The deliveries
                // of a token are found through its users' (tenant, user, time) index: the hash index on the token
                // cost the database much CPU in a fan-out (every row a random page of it), for a lookup
                // that support tools make once in a while. A pair is kept while a device holds it and for the
                // retention after (`RelayStore.maintain`), as long as its deliveries can be.
                """
                CREATE TABLE token_users (
                    tenant_id text NOT NULL,
                    token text NOT NULL,
                    user_id text NOT NULL,
                    seen_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (tenant_id, token, user_id)
                )
                """,
                """
                CREATE FUNCTION pushrelay_note_token_users() RETURNS trigger
                LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP IN ('INSERT', 'UPDATE') THEN
                        INSERT INTO token_users (tenant_id, token, user_id, seen_at)
                        SELECT DISTINCT tenant_id, token, user_id, now() FROM new_devices
                        ON CONFLICT (tenant_id, token, user_id) DO UPDATE SET seen_at = excluded.seen_at;
                    END IF;
                    IF TG_OP IN ('UPDATE', 'DELETE') THEN
                        INSERT INTO token_users (tenant_id, token, user_id, seen_at)
                        SELECT DISTINCT tenant_id, token, user_id, now() FROM old_devices
                        ON CONFLICT (tenant_id, token, user_id) DO UPDATE SET seen_at = excluded.seen_at;
                    END IF;
                    RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER devices_token_users_insert AFTER INSERT ON devices
                REFERENCING NEW TABLE AS new_devices
                FOR EACH STATEMENT EXECUTE FUNCTION pushrelay_note_token_users()
                """,
                """
                CREATE TRIGGER devices_token_users_update AFTER UPDATE ON devices
                REFERENCING OLD TABLE AS old_devices NEW TABLE AS new_devices
                FOR EACH STATEMENT EXECUTE FUNCTION pushrelay_note_token_users()
                """,
                """
                CREATE TRIGGER devices_token_users_delete AFTER DELETE ON devices
                REFERENCING OLD TABLE AS old_devices
                FOR EACH STATEMENT EXECUTE FUNCTION pushrelay_note_token_users()
                """,
                "INSERT INTO token_users (tenant_id, token, user_id) SELECT DISTINCT tenant_id, token, user_id FROM devices",
                """
                INSERT INTO token_users (tenant_id, token, user_id)
                SELECT DISTINCT tenant_id, token, user_id FROM deliveries WHERE user_id IS NOT NULL AND token <> ''
                ON CONFLICT DO NOTHING
                """,
                "DROP INDEX deliveries_token",
            ]
        ),
        Migration(
            version: 12,
            name: "cap_count_bounds",
            statements: [
                // A user counted below a per-user cap is not counted again while its count then plus the jobs of
                // the type that could have delivered since stays below the cap (`RelayStore.userPolicy`): the
                // jobs whose insert the count's snapshot did not see, found by their inserting transaction, and
                // the jobs that could still record rows then (not finished or not planned, or with a page open).
                "ALTER TABLE jobs ADD COLUMN created_xid xid8 NOT NULL DEFAULT pg_current_xact_id()",
                "CREATE INDEX jobs_type_created_xid ON jobs (tenant_id, notification_type, created_xid)",
                """
                CREATE INDEX jobs_type_open ON jobs (tenant_id, notification_type)
                WHERE finished_at IS NULL OR planned_at IS NULL
                """,
            ]
        ),
        Migration(
            version: 13,
            name: "delivery_user_index_order",
            statements: [
                // Every lookup gives both the user and the tenant. With the user first, a key comparison in a
                // descent is settled by the user instead of by the tenant (the same in every row of a fan-out)
                // and then the user; keys are unique by time, so merging duplicates only costs.
                "DROP INDEX deliveries_tenant_user",
                "CREATE INDEX deliveries_user ON deliveries (user_id, tenant_id, sent_at) WITH (deduplicate_items = off)",
            ]
        ),
        Migration(
            version: 14,
            name: "delivery_user_hash_index",
            statements: [
                // A user's rows are found by a 64-bit hash of the user id and the time: a key of 16 bytes compared
                // as integers instead of two texts and a time, so the index is a third of the size and a row's
                // insert (at a random place in it, a fan-out's users being in token order) costs less. Lookups
                // give the hash and check the user and the tenant on the row (`hashtextextended` is the hash of
                // hash partitioning, which PostgreSQL keeps stable across versions).
                "DROP INDEX deliveries_user",
                """
                CREATE INDEX deliveries_user_hash ON deliveries (hashtextextended(user_id, 0), sent_at)
                WITH (deduplicate_items = off)
                """,
            ]
        ),
        Migration(
            version: 15,
            name: "held_deliveries",
            statements: [
                // A page of devices held while their provider cannot take them (unreachable, 5xx, 429, our
                // credentials refused): its retry round (the backoff grows with it), when the hold began and until
                // when the notification may still go out, and why it waits, for which environment. Page 0 and every
                // planned page have round 0.
                """
                ALTER TABLE job_pages ADD COLUMN retry_round int NOT NULL DEFAULT 0,
                    ADD COLUMN held_since timestamptz, ADD COLUMN retry_until timestamptz,
                    ADD COLUMN wait_reason text, ADD COLUMN wait_environment text, ADD COLUMN held_from_page int
                """,
                // A page holds its devices of one environment once: a page claimed again (its sender died or
                // stopped after holding them) does not hold them a second time, so they are not sent twice.
                """
                CREATE UNIQUE INDEX job_pages_held_once ON job_pages (job_id, held_from_page, wait_environment)
                WHERE held_from_page IS NOT NULL
                """,
                // The held pages still open, for the status view and the gauges: a handful of rows during an
                // outage, none otherwise.
                """
                CREATE INDEX job_pages_held ON job_pages (tenant_id, held_since)
                WHERE retry_round > 0 AND state IN ('pending', 'leased')
                """,
                // A held notification whose validity ended before its provider took it is recorded `expired`.
                "ALTER TABLE deliveries DROP CONSTRAINT deliveries_outcome_check",
                """
                ALTER TABLE deliveries ADD CONSTRAINT deliveries_outcome_check CHECK (
                    outcome IN ('delivered', 'token_dead', 'retry_later', 'configuration_fault', 'skipped', 'expired')
                )
                """,
                // A provider's refusal of a tenant's configuration (its key, team or topic) as the relay that met it
                // last reported it; removed when delivery resumes. Read by `pushrelay admin status`.
                """
                CREATE TABLE provider_faults (
                    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                    environment text NOT NULL,
                    reason text NOT NULL,
                    detail text NOT NULL,
                    since timestamptz NOT NULL DEFAULT now(),
                    relay text NOT NULL,
                    PRIMARY KEY (tenant_id, environment)
                )
                """,
            ]
        ),
        Migration(
            version: 16,
            name: "delivery_tenant_time_index",
            statements: [
                // A tenant's time range reads that tenant's rows only, from a page's key down. The key is a 64-bit
                // hash of the tenant id with the time (lookups give the hash and check the tenant on the row), not
                // `(tenant_id, sent_at)`: the per-user cap counts name the tenant and a time window too, and on a
                // fresh day partition (no statistics yet) the planner took such an index for them, reading every
                // row of the tenant's day once per user of a page (a 100,000-device fan-out took 7-38 s, not 1.4 s).
                """
                CREATE INDEX deliveries_tenant_time ON deliveries (hashtextextended(tenant_id, 0), sent_at)
                WITH (deduplicate_items = off)
                """
            ]
        ),
        Migration(
            version: 17,
            name: "deferred_deliveries",
            statements: [
                // A device deferred by quiet hours has a row (`deferred`, reason `quiet_hours`) while it waits, so
                // QUERY_DELIVERIES shows why nothing came yet; its send later records its own row.
                "ALTER TABLE deliveries DROP CONSTRAINT deliveries_outcome_check",
                """
                ALTER TABLE deliveries ADD CONSTRAINT deliveries_outcome_check CHECK (
                    outcome IN (
                        'delivered', 'token_dead', 'retry_later', 'configuration_fault', 'skipped', 'expired', 'deferred'
                    )
                )
                """,
            ]
        ),
        Migration(
            version: 18,
            name: "providers",
            statements: [
                // A device names the push service its token belongs to; rows from before are APNs devices. An APNs
                // token is stored lower-cased hex, any other byte for byte (FCM's are case-sensitive text).
                "ALTER TABLE devices ADD COLUMN provider text NOT NULL DEFAULT 'apns'",
                "ALTER TABLE devices DROP CONSTRAINT devices_token_check",
                """
                ALTER TABLE devices ADD CONSTRAINT devices_token_check
                    CHECK (token <> '' AND (provider <> 'apns' OR token ~ '^[0-9a-f]+$'))
                """,
                "ALTER TABLE dead_tokens DROP CONSTRAINT dead_tokens_token_check",
                "ALTER TABLE dead_tokens ADD CONSTRAINT dead_tokens_token_check CHECK (token <> '')",
                // A delivery row keeps the provider's id of the message (APNs: the apns-id) under a neutral name.
                "ALTER TABLE deliveries RENAME COLUMN apns_id TO provider_message_id",
            ]
        ),
        Migration(
            version: 19,
            name: "credential_kinds",
            statements: [
                // A sealed key says what it is (`CredentialKind`): an APNs `.p8` (every row from before) or an FCM
                // service account (its whole JSON, sealed), so each provider loads only its own credentials.
                """
                ALTER TABLE signing_keys ADD COLUMN kind text NOT NULL DEFAULT 'apns_p8'
                    CHECK (kind IN ('apns_p8', 'fcm_service_account'))
                """
            ]
        ),
    ]
}

#!/usr/bin/env bash
# Ops/scenarios/admin-cli.sh: `pushrelay admin` and `serve` against their database, as an operator meets them.
#
#   PUSHRELAY_BIN=.build/debug/pushrelay bash Ops/scenarios/admin-cli.sh
#
# Steps, each checked:
#   1. a missing embedded cluster (a typo in --data-dir): every command but `admin migrate` says where it looked
#      and exits non-zero, creating nothing; a command that only reads refuses --create
#   2. `admin migrate` creates and migrates it; then sync, list, issue work on it
#   3. FCM service accounts (`admin key add|list|rotate|remove --fcm-service-account`): stored for dispo, whose file
#      names its Firebase project; refused for a tenant without one, of another project, broken, or mixed with .p8
#      options; the private key never printed, and in pg_dump nowhere in clear
#   4. a schema behind this build (its last migration unrecorded): the commands say so and name `admin migrate`,
#      exit non-zero, and migrate nothing
#   5. settings PostgreSQL refuses (no such role, no such database, nothing listening on the port): `admin` and
#      `serve` print PostgreSQL's reason in one sentence at once (each bounded by ADMIN_CLI_COMMAND_TIMEOUT, 15 s:
#      the pool's retries took 67 s)
#
# Environment: PUSHRELAY_BIN (default .build/debug/pushrelay), ADMIN_CLI_TIMEOUT (180 s).
set -euo pipefail

NAME="admin-cli"
TIMEOUT="${ADMIN_CLI_TIMEOUT:-180}"
COMMAND_TIMEOUT="${ADMIN_CLI_COMMAND_TIMEOUT:-15}"
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fl_init
failures=0

# outcome ARGS...: runs `pushrelay ARGS` (bounded), its output in $TMP/out.txt, its exit status in $status and
# its duration in $took (milliseconds, printed, not checked).
outcome() {
    local started_ms
    started_ms=$(date +%s%3N)
    status=0
    timeout "$COMMAND_TIMEOUT" "$BIN" "$@" >"$TMP/out.txt" 2>&1 || status=$?
    took=$(($(date +%s%3N) - started_ms))
}
# refuses LABEL EXPECTED ARGS...: `pushrelay ARGS` exits non-zero (not by the timeout) saying EXPECTED.
refuses() {
    local label="$1" expected="$2"
    shift 2
    outcome "$@"
    check "$label: exit $status in ${took} ms: $(head -n 1 "$TMP/out.txt" | cut -c1-110)" \
        eval '[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && grep -qF -- "$expected" "$TMP/out.txt"'
}
migrations() { fl_psql "SELECT count(*) FROM schema_migrations"; }

# --- 1. a missing cluster ------------------------------------------------------------------------
step="missing-cluster"
log "a missing embedded cluster"
cd "$TMP"
for command in "tenant list" "tenant show circl" "key list circl" "credential list circl" "tenant disable circl" \
    "credential issue circl --name x" "tenant sync $ROOT/Tenants"; do
    # shellcheck disable=SC2086
    refuses "admin $command --data-dir pgg" "no embedded PostgreSQL cluster in $TMP/pgg" admin $command --data-dir pgg
done
check "nothing was created" eval '[ ! -e "$TMP/pgg" ]'
refuses "a command that only reads refuses --create" "only reads" admin tenant list --data-dir pgg --create
cd "$ROOT"

# --- 2. admin migrate creates it -----------------------------------------------------------------
step="migrate"
log "admin migrate creates the cluster; the other commands then work"
outcome admin migrate --data-dir "$TMP/pg"
latest="$(sed -n 's/^schema at version \([0-9]*\) .*/\1/p' "$TMP/out.txt")"
check "admin migrate creates and migrates (schema at version ${latest:-?})" eval '[ "$status" -eq 0 ] && [ -n "$latest" ]'
outcome admin tenant sync "$ROOT/Tenants" --data-dir "$TMP/pg"
check "tenant sync on it" eval '[ "$status" -eq 0 ] && grep -q "created circl" "$TMP/out.txt"'
outcome admin credential issue circl --name admin-cli --data-dir "$TMP/pg"
check "credential issue on it" eval '[ "$status" -eq 0 ] && grep -q "prk_" "$TMP/out.txt"'
outcome admin tenant list --data-dir "$TMP/pg"
check "tenant list on it" eval '[ "$status" -eq 0 ] && grep -q "^circl " "$TMP/out.txt"'

# --- 3. FCM service accounts ---------------------------------------------------------------------
step="fcm-service-accounts"
log "FCM service accounts: add, list, refusals, rotate, remove; never in clear"
# The cluster started as the admin commands start it, so that they reuse it and psql and pg_dump reach it.
quoted="'$TMP/pg'"
fl_as_pg_owner "$(fl_pg_bin)/pg_ctl" start -D "$TMP/pg" -l "$TMP/pg/server.log" -w -s \
    -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories=$quoted"
PUSHRELAY_MASTER_KEY="$("$BIN" admin master-key generate)"
export PUSHRELAY_MASTER_KEY
# service_account NAME PROJECT: a service-account file as Google's console gives it, with a fresh RSA key, in
# $TMP/NAME.json (its key alone in $TMP/NAME.pem).
service_account() {
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TMP/$1.pem" 2>/dev/null
    python3 - "$TMP/$1.pem" "$2" "$TMP/$1.json" <<'PY'
import json, secrets, sys
key, project, out = sys.argv[1:]
json.dump({
    "type": "service_account", "project_id": project, "private_key_id": secrets.token_hex(20),
    "private_key": open(key).read(), "client_email": f"relay@{project}.iam.gserviceaccount.com",
    "client_id": "104", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
    "token_uri": "https://oauth2.googleapis.com/token",
}, open(out, "w"), indent=2)
PY
}
key_id() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["private_key_id"])' "$TMP/$1.json"; }
# A line from the middle of a key's PEM body: what must never be printed or stored in clear.
pem_line() { sed -n 10p "$TMP/$1.pem"; }
service_account first dispo-app
service_account second dispo-app
service_account stranger other-app
first_id="$(key_id first)"
second_id="$(key_id second)"
all_output="$TMP/fcm-output.txt"
: >"$all_output"
kept() { cat "$TMP/out.txt" >>"$all_output"; }

outcome admin key add dispo --fcm-service-account "$TMP/first.json" --data-dir "$TMP/pg"
kept
check "key add dispo --fcm-service-account stores it" eval \
    '[ "$status" -eq 0 ] && grep -q "added dispo FCM service account $first_id project dispo-app" "$TMP/out.txt"'
outcome admin key list dispo --data-dir "$TMP/pg"
kept
check "key list shows its kind, id and project" eval \
    '[ "$status" -eq 0 ] && grep -qE "^fcm_service_account +$first_id +dispo-app +both .* active" "$TMP/out.txt"'
refuses "a tenant whose file names no FCM project" "tenant circl names no FCM project" \
    admin key add circl --fcm-service-account "$TMP/first.json" --data-dir "$TMP/pg"
kept
refuses "an account of another project" \
    "is a service account of project other-app, but tenant dispo's file names project dispo-app" \
    admin key add dispo --fcm-service-account "$TMP/stranger.json" --data-dir "$TMP/pg"
kept
python3 - "$TMP/first.json" "$TMP/broken.json" <<'PY'
import json, sys
account = json.load(open(sys.argv[1]))
# A key cut short: still PEM, no longer a key.
account["private_key"] = "\n".join(account["private_key"].splitlines()[:6] + ["-----END PRIVATE KEY-----", ""])
json.dump(account, open(sys.argv[2], "w"))
PY
refuses "a broken file" "service account refused: its private_key is not a PEM RSA private key" \
    admin key add dispo --fcm-service-account "$TMP/broken.json" --data-dir "$TMP/pg"
kept
printf 'not json' >"$TMP/notjson.json"
refuses "a file that is no JSON" "service account refused: the file is not a service-account JSON object" \
    admin key add dispo --fcm-service-account "$TMP/notjson.json" --data-dir "$TMP/pg"
kept
refuses "an account with .p8 options" "--fcm-service-account excludes --p8, --key-id and --team-id" \
    admin key add dispo --fcm-service-account "$TMP/second.json" --key-id ABCDE12345 --data-dir "$TMP/pg"
kept
check "the refused ones stored nothing" eq "$(fl_psql "SELECT count(*) FROM signing_keys")" 1

outcome admin key rotate dispo --old-key-id "$first_id" --fcm-service-account "$TMP/second.json" --data-dir "$TMP/pg"
kept
check "key rotate: the new account active" eval \
    '[ "$status" -eq 0 ] && grep -q "added dispo FCM service account $second_id project dispo-app" "$TMP/out.txt"'
check "key rotate: the old one retiring" eq \
    "$(fl_psql "SELECT key_id || ' ' || kind || ' ' || status FROM signing_keys ORDER BY created_at")" \
    "$first_id fcm_service_account retiring
$second_id fcm_service_account active"
"$(fl_pg_bin)/pg_dump" --data-only --table=signing_keys \
    "host=$TMP/pg port=5432 user=pushrelay dbname=pushrelay" >"$TMP/dump.sql"
check "pg_dump holds both sealed accounts" eq "$(grep -c "fcm_service_account" "$TMP/dump.sql")" 2
# The check sees a key where it is: a PEM line is a run of base64 that the file's JSON text holds as it is.
check "the PEM line checked for is in first's file" eval 'grep -qF "$(pem_line first)" "$TMP/first.json"'
for name in first second; do
    check "no part of $name's private key or its file in pg_dump" eval \
        '! grep -qF -e "$(pem_line $name)" -e "PRIVATE KEY" -e "gserviceaccount" "$TMP/dump.sql"'
done
outcome admin key remove dispo --key-id "$first_id" --data-dir "$TMP/pg"
kept
check "key remove" eval '[ "$status" -eq 0 ] && grep -q "removed dispo key $first_id" "$TMP/out.txt"'
outcome admin key list dispo --data-dir "$TMP/pg"
kept
check "key list: the new account alone" eval \
    '[ "$(grep -c "fcm_service_account" "$TMP/out.txt")" -eq 1 ] && grep -q "$second_id" "$TMP/out.txt"'
for name in first second stranger; do
    check "no command printed $name's private key" eval '! grep -qF "$(pem_line $name)" "$all_output"'
done
check "no command printed a private key at all" eval '! grep -q "PRIVATE KEY" "$all_output"'

# --- 4. a schema behind --------------------------------------------------------------------------
step="schema-behind"
log "a schema behind this build"
fl_psql "DELETE FROM schema_migrations WHERE version = $latest" >/dev/null
before="$(migrations)"
for command in "tenant list" "tenant show circl" "key list circl" "credential list circl" "tenant disable circl"; do
    # shellcheck disable=SC2086
    refuses "admin $command, schema behind" "this pushrelay needs $latest: run \`pushrelay admin migrate\`" \
        admin $command --data-dir "$TMP/pg"
done
check "they migrated nothing ($before of $latest migrations recorded)" eq "$(migrations)" "$before"

# --- 5. settings PostgreSQL refuses --------------------------------------------------------------
step="refused-login"
log "PostgreSQL's own reasons, at once"
socket="host=$TMP/pg"
refuses "admin, a role that does not exist" "refused the login: role \"nobody\" does not exist" \
    admin tenant list --database-url "postgres://nobody@/pushrelay?$socket"
refuses "admin, a database that does not exist" "refused the login: database \"nope\" does not exist" \
    admin credential list circl --database-url "postgres://pushrelay@/nope?$socket"
refuses "admin, nothing on the port" "cannot reach PostgreSQL at 127.0.0.1:1: connection refused" \
    admin tenant list --database-url "postgres://pushrelay@127.0.0.1:1/pushrelay?sslmode=disable"
refuses "serve, a role that does not exist" "refused the login: role \"nobody\" does not exist" \
    serve --listen 127.0.0.1:0 --metrics-listen "" --tenants "" --database-url "postgres://nobody@/pushrelay?$socket"
refuses "serve, nothing on the port" "connection refused" \
    serve --listen 127.0.0.1:0 --metrics-listen "" --tenants "" \
    --database-url "postgres://pushrelay@127.0.0.1:1/pushrelay?sslmode=disable"

step="done"
[ "$failures" -eq 0 ] || fail "$failures checks failed"
printf '\n%s: OK: missing cluster, admin migrate, FCM service accounts, schema behind, refused logins in %ds\n' \
    "$NAME" "$(elapsed)"

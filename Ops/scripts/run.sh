#!/usr/bin/env bash
# Ops/scripts/run.sh: the first command on a fresh Debian 12 machine.
#
#   bash Ops/scripts/run.sh [arguments for `pushrelay serve`]
#
# Installs the Debian dependencies, builds pushrelay in release mode, then runs the main job: the
# relay on embedded defaults. It applies Tenants/ to the embedded PostgreSQL cluster in
# .pushrelay/pg, issues a credential for circl once (saved in .pushrelay/circl.credential, mode 600),
# and runs `pushrelay serve --apns-simulator` on 127.0.0.1:7411 in the foreground (Ctrl-C stops it
# gracefully). README's "First notification" sends through it with the CLI and with Python.
#
# Environment:
#   PUSHRELAY_SCRATCH_PATH  build directory to use instead of ./.build (passed as --scratch-path)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -d /opt/swift/usr/bin ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
scratch=()
if [ -n "${PUSHRELAY_SCRATCH_PATH:-}" ]; then
    scratch=(--scratch-path "$PUSHRELAY_SCRATCH_PATH")
fi

bash "$ROOT/Ops/scripts/install-deps.sh"

echo "==> run.sh: swift build -c release --product pushrelay"
swift build "${scratch[@]}" -c release --product pushrelay
bin="$(swift build "${scratch[@]}" -c release --show-bin-path)/pushrelay"

echo "==> run.sh: pushrelay admin migrate, then admin tenant sync Tenants"
"$bin" admin migrate
"$bin" admin tenant sync Tenants
mkdir -p .pushrelay
# circl's (an iPhone app) and dispo's (iPhone and Android, through APNs and FCM): README's first notification.
for tenant in circl dispo; do
    if [ ! -s ".pushrelay/$tenant.credential" ]; then
        (umask 077 && "$bin" admin credential issue "$tenant" --name run.sh | sed -n 's/^secret: //p' \
            >".pushrelay/$tenant.credential")
        echo "==> run.sh: $tenant's credential saved in .pushrelay/$tenant.credential"
    fi
done

echo "==> run.sh: pushrelay serve --apns-simulator $*"
exec "$bin" serve --apns-simulator "$@"

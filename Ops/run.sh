#!/usr/bin/env bash
# Ops/run.sh: the first command on a fresh Debian 12 machine.
#
#   bash Ops/run.sh [arguments for `pushrelay demo`]
#
# Installs the Debian dependencies, builds pushrelay in release mode, then runs the main job:
# for now `pushrelay demo` (starts the APNs simulator and sends notifications through the engine).
#
# Environment:
#   PUSHRELAY_SCRATCH_PATH  build directory to use instead of ./.build (passed as --scratch-path)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -d /opt/swift/usr/bin ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
scratch=()
if [ -n "${PUSHRELAY_SCRATCH_PATH:-}" ]; then
    scratch=(--scratch-path "$PUSHRELAY_SCRATCH_PATH")
fi

bash "$ROOT/Ops/install-deps.sh"

echo "==> run.sh: swift build -c release --product pushrelay"
swift build "${scratch[@]}" -c release --product pushrelay
bin="$(swift build "${scratch[@]}" -c release --show-bin-path)/pushrelay"

echo "==> run.sh: pushrelay demo $*"
exec "$bin" demo "$@"

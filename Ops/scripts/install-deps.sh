#!/usr/bin/env bash
# Ops/scripts/install-deps.sh: install what pushrelay needs from Debian 12 (bookworm).
#
#   bash Ops/scripts/install-deps.sh
#
# - Checks each need first (binary on PATH, file, or `dpkg-query`); when every need is met it does
#   not touch apt at all, so a second run takes well under a second.
# - Otherwise runs `apt-get update` and `apt-get install -y` for the missing packages only.
#   As root it calls apt-get directly; as another user it uses sudo when sudo exists, and else
#   prints the command for root to run and exits 1.
# - linux-perf (for profiling) is optional: tried separately, never fatal.
# - Swift is not a Debian package: expected at /opt/swift/usr/bin or on PATH. When missing, this
#   script says how to install Swift 6.3 and exits 1 (after the Debian packages are installed).
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

# True when the Debian package is fully installed (not merely known, or "config-files" only).
pkg_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = "installed" ]
}
have() { command -v "$1" >/dev/null 2>&1; }

# One row per Debian package: "<package>|<shell test that is true when the need is met>".
# A need is met when the package is installed, or else when the test passes (tools are checked by
# binary, so a machine that has them from elsewhere is not made to install them again).
REQUIRED=(
    "postgresql|compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null"
    "postgresql-client|have psql"
    "libzstd-dev|[ -f /usr/include/zstd.h ]"
    "pkg-config|have pkg-config"   # lets SwiftPM find libzstd for the CZstd system-library target
    "git|have git"                 # SwiftPM fetches dependencies with git
    "nghttp2-client|have h2load && have nghttp"
    "nghttp2-server|have nghttpd || [ -x /usr/sbin/nghttpd ]"
    "openssl|have openssl"
    "tzdata|[ -f /usr/share/zoneinfo/tzdata.zi ]"   # the IANA names the time-zone rule is checked against
    "ca-certificates|[ -s /etc/ssl/certs/ca-certificates.crt ]"
    "python3|have python3"
    "python3-venv|python3 -c 'import ensurepip, venv' >/dev/null 2>&1"
    "haproxy|have haproxy || [ -x /usr/sbin/haproxy ]"   # the TCP load balancer of Ops/scenarios/three-relays.sh
    "util-linux|have taskset"
    "time|[ -x /usr/bin/time ]"    # GNU time (the shell keyword cannot print user/sys separately)
    "prometheus|have promtool && have prometheus"   # promtool checks /metrics and the alert rules; the server scrapes relays (Ops/scenarios/silent-failures.sh)
    "curl|have curl"               # the scenarios read the operator port
    "systemd|have systemd-analyze" # systemd-analyze verifies Ops/deploy/pushrelay.service (test.sh)
    "procps|have ps"               # ps: the scenarios tell a stopped process from a zombie
)
OPTIONAL=(
    "linux-perf|have perf"
)

# Collect the packages whose check fails.
missing_of() {
    local row pkg check
    for row in "$@"; do
        pkg=${row%%|*}
        check=${row#*|}
        if ! pkg_installed "$pkg" && ! eval "$check"; then
            printf '%s\n' "$pkg"
        fi
    done
}
mapfile -t missing < <(missing_of "${REQUIRED[@]}")
mapfile -t missing_optional < <(missing_of "${OPTIONAL[@]}")

# How to run apt-get: directly as root, through sudo otherwise (when sudo exists).
apt_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if have sudo; then
        apt_cmd=(sudo)
    elif [ "${#missing[@]}" -gt 0 ]; then
        log "missing packages: ${missing[*]}"
        log "not root and no sudo: as root, run"
        log "  apt-get update && apt-get install -y ${missing[*]}"
        exit 1
    fi
fi
apt_cmd+=(env DEBIAN_FRONTEND=noninteractive apt-get)

if [ "${#missing[@]}" -gt 0 ]; then
    log "installing: ${missing[*]}"
    "${apt_cmd[@]}" update
    "${apt_cmd[@]}" install -y "${missing[@]}"
    updated=1
else
    log "all Debian packages present; apt skipped"
    updated=0
fi

# Optional packages: one try, and never fatal (linux-perf can be absent on some mirrors/arches).
if [ "${#missing_optional[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] || have sudo; then
        log "trying optional: ${missing_optional[*]}"
        if [ "$updated" -eq 0 ]; then
            "${apt_cmd[@]}" update || true
        fi
        "${apt_cmd[@]}" install -y "${missing_optional[@]}" \
            || log "optional packages not installed (fine): ${missing_optional[*]}"
    else
        log "optional packages not installed (not root, no sudo): ${missing_optional[*]}"
    fi
fi

# Swift: the toolchain tarball lives at /opt/swift by convention here.
if ! have swift && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
if ! have swift; then
    arch_suffix=""
    if [ "$(uname -m)" = "aarch64" ]; then arch_suffix="-aarch64"; fi
    cat >&2 <<EOF
install-deps: 'swift' not found (neither on PATH nor at /opt/swift/usr/bin).
Install Swift 6.3 for Debian 12 (see https://www.swift.org/install/linux/), for example as root:

  apt-get install -y curl binutils-gold gcc git libcurl4-openssl-dev libedit-dev libicu-dev \\
      libncurses-dev libpython3-dev libsqlite3-dev libxml2-dev pkg-config tzdata uuid-dev
  curl -fLO https://download.swift.org/swift-6.3-release/debian12${arch_suffix}/swift-6.3-RELEASE/swift-6.3-RELEASE-debian12${arch_suffix}.tar.gz
  mkdir -p /opt/swift && tar -xzf swift-6.3-RELEASE-debian12${arch_suffix}.tar.gz -C /opt/swift --strip-components=1
  export PATH=/opt/swift/usr/bin:\$PATH

(or use swiftly: https://www.swift.org/install/linux/ ; then run this script again)
EOF
    exit 1
fi
log "swift: $(swift --version 2>/dev/null | head -n 1)"

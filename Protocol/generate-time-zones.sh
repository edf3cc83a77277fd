#!/usr/bin/env bash
# Protocol/generate-time-zones.sh: writes Sources/PushRelayProtocol/Generated/TimeZoneNames.swift, the names of the
# IANA time zone database the field rules accept (Protocol/README.md, "Field rules": time zone).
#
#   bash Protocol/generate-time-zones.sh [tzdata.zi]
#
# The names are every Zone and every Link of the database as zic reads it (default: Debian's
# /usr/share/zoneinfo/tzdata.zi from the tzdata package), but Factory, which names no place's time. The database only
# ever adds names (a retired name becomes a link), so a newer tzdata.zi gives a superset: run this script after a
# tzdata update and commit the file. TimeZoneNamesTests checks the file against this machine's tzdata.zi.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="${1:-/usr/share/zoneinfo/tzdata.zi}"
OUT="$ROOT/Sources/PushRelayProtocol/Generated/TimeZoneNames.swift"

[ -r "$SOURCE" ] || { echo "generate-time-zones.sh: cannot read $SOURCE (apt-get install tzdata)" >&2; exit 1; }
version="$(awk '$1 == "#" && $2 == "version" { print $3; exit }' "$SOURCE")"
[ -n "$version" ] || { echo "generate-time-zones.sh: $SOURCE has no '# version' line" >&2; exit 1; }

{
    printf '// DO NOT EDIT: written by Protocol/generate-time-zones.sh from the IANA time zone database %s.\n' "$version"
    printf '\n'
    printf 'extension FieldRules {\n'
    printf '    /// The version of the IANA time zone database ``timeZoneNames`` comes from.\n'
    printf '    public static let timeZoneDatabaseVersion = "%s"\n' "$version"
    printf '\n'
    printf '    /// Every Zone and Link name of the IANA time zone database but `Factory`: the canonical names\n'
    printf '    /// (`Europe/Berlin`, `Etc/GMT+5`, `EST5EDT`) and the links, older or other names of them (`Japan`,\n'
    printf '    /// `US/Eastern`, `Asia/Calcutta`, `UTC`). Names are case-sensitive.\n'
    printf '    public static let timeZoneNames: Set<String> = Set(\n'
    printf '        """\n'
    awk '($1 == "Z" && $2 != "Factory") { print $2 } $1 == "L" { print $3 }' "$SOURCE" | LC_ALL=C sort -u \
        | awk '
            { if (length(line) + 1 + length($0) > 108 && line != "") { print "        " line; line = "" }
              line = (line == "" ? $0 : line " " $0) }
            END { if (line != "") print "        " line }'
    printf '        """.split(whereSeparator: \\.isWhitespace).map(String.init)\n'
    printf '    )\n'
    printf '}\n'
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "generate-time-zones.sh: wrote $OUT ($(awk '($1 == "Z" && $2 != "Factory") || $1 == "L"' "$SOURCE" | wc -l) names of tzdata $version)"

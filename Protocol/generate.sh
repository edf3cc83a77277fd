#!/usr/bin/env bash
# Protocol/generate.sh: regenerates the committed code of Protocol/pushrelay.proto.
#
#   bash Protocol/generate.sh
#
# Swift: Sources/PushRelayProtocol/Generated/pushrelay.pb.swift, made by protoc with protoc-gen-swift
# from swift-protobuf 1.39.0 (the version Package.swift depends on). Set PROTOC_GEN_SWIFT to a built
# plugin, or the script builds it once from the package checkout under .build/checkouts (run
# `swift package resolve` first) into .build/protoc-gen-swift.
# Python: Protocol/python/pushrelay_client/pushrelay_pb2.py (+ .pyi type stubs), made by protoc
# (Debian's protobuf-compiler); its code runs on the protobuf runtime >= 4.21.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PROTO_DIR=Protocol
PROTO=pushrelay.proto

generate_swift() {
    local plugin="${PROTOC_GEN_SWIFT:-}"
    if [ -z "$plugin" ]; then
        local checkout=.build/checkouts/swift-protobuf
        [ -d "$checkout" ] || swift package resolve
        swift build --package-path "$checkout" --scratch-path .build/protoc-gen-swift -c release \
            --product protoc-gen-swift
        plugin="$(swift build --package-path "$checkout" --scratch-path .build/protoc-gen-swift -c release \
            --show-bin-path)/protoc-gen-swift"
    fi
    protoc --proto_path="$PROTO_DIR" --plugin=protoc-gen-swift="$plugin" \
        --swift_out=Sources/PushRelayProtocol/Generated \
        --swift_opt=Visibility=Public --swift_opt=UseAccessLevelOnImports=true "$PROTO_DIR/$PROTO"
    echo "generate.sh: wrote Sources/PushRelayProtocol/Generated/pushrelay.pb.swift"
}

generate_python() {
    local out=Protocol/python/pushrelay_client
    if ! command -v protoc >/dev/null 2>&1; then
        echo "generate.sh: protoc not found (apt-get install protobuf-compiler)" >&2
        return 1
    fi
    protoc --proto_path="$PROTO_DIR" --python_out="$out" --pyi_out="$out" "$PROTO_DIR/$PROTO"
    # protoc's own header says "DO NOT EDIT"; say also where the file comes from.
    local note="# Generated from Protocol/$PROTO by Protocol/generate.sh ($(protoc --version)); do not edit."
    for file in "$out/pushrelay_pb2.py" "$out/pushrelay_pb2.pyi"; do
        { printf '%s\n' "$note"; cat "$file"; } >"$file.tmp"
        mv "$file.tmp" "$file"
    done
    echo "generate.sh: wrote $out/pushrelay_pb2.py and $out/pushrelay_pb2.pyi"
}

generate_swift
generate_python

#!/usr/bin/env python3
"""Checks that Package.swift's dependency edges equal the imports: every module a target's files import is one
it declares, and every module it declares is imported by one of its files; and that RelayStore, PushRelayProtocol
and PushRelayClient import no provider engine (APNs, FCM). Prints each mismatch; exit 1 if any."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
package = (root / "Package.swift").read_text()
system = {"Foundation", "FoundationEssentials", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization", "Testing", "XCTest"}
problems = []
for match in re.finditer(r'\.(target|testTarget|executableTarget)\(\s*name: "([^"]+)",\s*dependencies: \[(.*?)\n            \]', package, re.S):
    kind, name, body = match.groups()
    declared = set(re.findall(r'^\s*"([^"]+)",?$', body, re.M)) | set(re.findall(r'\.product\(name: "([^"]+)"', body))
    folder = root / ("Tests" if kind == "testTarget" else "Sources") / name
    imported = set()
    for file in folder.rglob("*.swift"):
        for line in file.read_text().splitlines():
            found = re.match(r"^\s*(?:@testable |@preconcurrency |public |package |internal )*import ([A-Za-z_0-9]+)", line)
            if found:
                imported.add(found.group(1))
    imported -= system
    for module in sorted(imported - declared):
        problems.append(f"{name}: imports {module} without declaring it")
    for module in sorted(declared - imported):
        problems.append(f"{name}: declares {module} and imports it nowhere")
# Below the relay's provider layer no module knows a provider's protocol: the store, the wire and the client import
# no provider engine (Sources/RelayServer/Providers/ is where they plug in).
for name in ["RelayStore", "PushRelayProtocol", "PushRelayClient"]:
    for file in sorted((root / "Sources" / name).rglob("*.swift")):
        for line in file.read_text().splitlines():
            found = re.match(r"^\s*(?:@testable |@preconcurrency |public |package |internal )*import (APNs|FCM)\b", line)
            if found:
                problems.append(f"{file.relative_to(root)}: imports {found.group(1)}, a provider engine, below the provider layer")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)

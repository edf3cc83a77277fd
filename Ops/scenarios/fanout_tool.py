#!/usr/bin/env python3
"""Ops/scenarios/fanout_tool.py: the wire-protocol and accounting side of Ops/scenarios/crash-test.sh and Ops/scenarios/two-relays.sh.

Runs with the pushrelay_client package (Protocol/python) installed:

  register --address H:P --credential prk_... --tenant circl --count N --run RUN --out devices.tsv
      registers N devices through the relay (RegisterDevice, pipelined on a few connections; a
      RATE_LIMITED answer is retried after its retry_after_ms), users RUN-u00000..., one 64-hex token
      each; writes "token<TAB>user" lines
  send --address ... --devices devices.tsv --run RUN
      one Send of type "message" to every user of devices.tsv (at most the relay's max_recipients),
      with custom key {"fanout_run": RUN} in the payload; prints the job id
  status --address ... --job ID
      JobStatus: prints "state=... devices=... delivered=... failed=... skipped=...", then "waiting=...
      waiting_reason=..." while devices wait for APNs
  account --log sim.jsonl --run RUN --devices devices.tsv --delivered delivered.txt
      reads the simulator's request log (one JSON object per answered request: deviceToken, payload,
      status, connection, ...) and prints key=value lines: requests and distinct tokens of the run,
      duplicates, tokens missing or unexpected, and whether the delivered tokens recorded in the
      deliveries table (delivered.txt, one per line) are exactly the tokens the simulator answered 200
"""

import argparse
import asyncio
import collections
import hashlib
import json
import sys
import time

CONNECTIONS = 4
IN_FLIGHT_PER_CONNECTION = 256


def split_address(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def device_token(run, index):
    return hashlib.sha256(f"{run}-{index}".encode()).hexdigest()


def read_devices(path):
    devices = []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line:
                token, user = line.split("\t")
                devices.append((token, user))
    return devices


async def call_with_retry(make_call):
    from pushrelay_client import ErrorCode, RelayError

    for _ in range(100):
        try:
            return await make_call()
        except RelayError as error:
            if error.code in (ErrorCode.RATE_LIMITED, ErrorCode.UNAVAILABLE):
                await asyncio.sleep(max(error.retry_after_ms, 10) / 1000)
                continue
            raise
    raise RuntimeError("still refused after 100 attempts")


async def register(args):
    from pushrelay_client import AsyncRelayClient

    host, port = split_address(args.address)
    devices = [(device_token(args.run, i), f"{args.run}-u{i:05d}") for i in range(args.count)]
    clients = [
        await AsyncRelayClient.connect(host, port, args.tenant, args.credential, client_name="fanout_tool")
        for _ in range(CONNECTIONS)
    ]
    started = time.monotonic()
    try:

        async def worker(client, part):
            for start in range(0, len(part), IN_FLIGHT_PER_CONNECTION):
                chunk = part[start : start + IN_FLIGHT_PER_CONNECTION]
                await asyncio.gather(
                    *(
                        call_with_retry(
                            lambda token=token, user=user: client.register_device(
                                user_id=user, token=token, platform="ios", environment="PRODUCTION"
                            )
                        )
                        for token, user in chunk
                    )
                )

        await asyncio.gather(*(worker(client, devices[i::CONNECTIONS]) for i, client in enumerate(clients)))
    finally:
        for client in clients:
            await client.close()
    elapsed = time.monotonic() - started
    with open(args.out, "w") as handle:
        for token, user in devices:
            handle.write(f"{token}\t{user}\n")
    print(f"registered {len(devices)} devices in {elapsed:.1f}s ({len(devices) / elapsed:.0f}/s, "
          f"{CONNECTIONS} pipelined connections)")


async def send(args):
    from pushrelay_client import AsyncRelayClient

    host, port = split_address(args.address)
    users = [user for _, user in read_devices(args.devices)]
    async with await AsyncRelayClient.connect(host, port, args.tenant, args.credential) as client:
        limit = client.hello_ok.max_recipients
        if len(users) > limit:
            sys.exit(f"fanout_tool: {len(users)} users exceed the relay's max_recipients {limit} for one Send")
        result = await client.send(
            notification_type="message",
            user_ids=users,
            template_values={"circle_id": "1", "channel_id": "1"},
            alert={"title": "fan-out", "body": f"run {args.run}"},
            custom_json={"fanout_run": args.run},
            idempotency_key=f"fanout-{args.run}",
        )
    print(result.job_id)


async def status(args):
    from pushrelay_client import AsyncRelayClient, pb

    host, port = split_address(args.address)
    async with await AsyncRelayClient.connect(host, port, args.tenant, args.credential) as client:
        job = await client.job_status(job_id=args.job)
    waiting = f" waiting={job.waiting} waiting_reason={job.waiting_reason}" if job.waiting else ""
    print(f"state={pb.JobState.Name(job.state)} devices={job.devices} delivered={job.delivered} "
          f"failed={job.failed} skipped={job.skipped}{waiting}")


def account(args):
    expected = {token for token, _ in read_devices(args.devices)}
    marker = f'"fanout_run":"{args.run}"'
    per_token = collections.Counter()
    ok_tokens = set()
    statuses = collections.Counter()
    connections = set()
    requests = 0
    with open(args.log) as handle:
        for line in handle:
            if args.run not in line:
                continue
            entry = json.loads(line)
            if marker not in entry.get("payload", "").replace(" ", ""):
                continue
            requests += 1
            token = entry.get("deviceToken") or ""
            per_token[token] += 1
            statuses[entry.get("status")] += 1
            connections.add(entry.get("connection"))
            if entry.get("status") == 200:
                ok_tokens.add(token)
    with open(args.delivered) as handle:
        recorded_list = [line.strip() for line in handle if line.strip()]
    recorded = set(recorded_list)
    received = set(per_token)
    duplicates = sum(1 for count in per_token.values() if count > 1)
    ok_per_token = collections.Counter()
    with open(args.log) as handle:
        for line in handle:
            if args.run in line and '"status":200' in line:
                entry = json.loads(line)
                if marker in entry.get("payload", "").replace(" ", ""):
                    ok_per_token[entry.get("deviceToken") or ""] += 1
    values = {
        "requests": requests,
        "distinct_tokens": len(received),
        "duplicate_tokens": duplicates,
        "extra_requests": requests - len(received),
        "most_sends_to_one_token": max(per_token.values(), default=0),
        "status_200": statuses.get(200, 0),
        "tokens_200_twice": sum(1 for count in ok_per_token.values() if count > 1),
        "status_500": statuses.get(500, 0),
        "status_503": statuses.get(503, 0),
        "status_other": requests - statuses.get(200, 0),
        "sim_connections": len(connections),
        "missing_tokens": len(expected - received),
        "unexpected_tokens": len(received - expected),
        "db_delivered_rows": len(recorded_list),
        "db_delivered_distinct": len(recorded),
        "db_matches_sim": "yes" if recorded == ok_tokens else "no",
        "db_not_in_sim": len(recorded - ok_tokens),
        "sim_not_in_db": len(ok_tokens - recorded),
    }
    for key, value in values.items():
        print(f"{key}={value}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("register", "send", "status"):
        command = commands.add_parser(name)
        command.add_argument("--address", required=True)
        command.add_argument("--credential", required=True)
        command.add_argument("--tenant", default="circl")
        if name == "register":
            command.add_argument("--count", type=int, required=True)
            command.add_argument("--run", required=True)
            command.add_argument("--out", required=True)
        elif name == "send":
            command.add_argument("--devices", required=True)
            command.add_argument("--run", required=True)
        else:
            command.add_argument("--job", required=True)
    command = commands.add_parser("account")
    command.add_argument("--log", required=True)
    command.add_argument("--run", required=True)
    command.add_argument("--devices", required=True)
    command.add_argument("--delivered", required=True)
    args = parser.parse_args()
    if args.command == "account":
        account(args)
    else:
        asyncio.run({"register": register, "send": send, "status": status}[args.command](args))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ops/scenarios/fault_tool.py: the client side of the fault runs (Ops/scenarios/fault-postgres-restart.sh, Ops/scenarios/fault-slow-apns.sh).

Runs with the pushrelay_client package (Protocol/python) installed:

  sends --address H:P --credential prk_... --devices devices.tsv --run RUN --stop-file F --out sends.tsv
        [--concurrency 4] [--max-seconds 300]
      single-user Sends (type "message", one user of devices.tsv each, in turn, idempotency key RUN-s<i>),
      `concurrency` at a time on one connection, until the stop file exists; no retry: each attempt is
      written as one line "index<TAB>user<TAB>result<TAB>job_id<TAB>started_ms<TAB>latency_ms", result
      being "acked" or the typed error's code name (UNAVAILABLE, INTERNAL, ...) or "CONNECTION" (the
      connection was lost: a new one is opened for the next send); prints key=value counts at the end
  flood --address ... --devices devices.tsv --run RUN --count N [--wait]
      N single-user Sends written at once on one connection (pipelined, no client-side limit), with
      `wait` (the answer comes once APNs answered) or not; prints key=value lines: answers, their error
      codes, answer latencies (p50, p90, max), and how the answers arrived over time (answers per 250 ms)
"""

import argparse
import asyncio
import collections
import json
import os
import time


def split_address(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def read_users(path):
    users = []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line:
                users.append(line.split("\t")[1])
    return users


def now_ms():
    return int(time.time() * 1000)


async def one_send(client, user, run, key, wait=False):
    return await client.send(
        notification_type="message",
        user_ids=[user],
        template_values={"circle_id": "1", "channel_id": "1"},
        alert={"title": "fault", "body": f"run {run}"},
        custom_json={"fanout_run": run},
        idempotency_key=key,
        wait=wait,
    )


async def sends(args):
    from pushrelay_client import AsyncRelayClient, ConnectionClosed, RelayError

    host, port = split_address(args.address)
    users = read_users(args.devices)
    started = time.monotonic()
    counter = iter(range(10**9))
    client = None
    lock = asyncio.Lock()
    results = collections.Counter()

    async def get_client():
        nonlocal client
        async with lock:
            if client is None or not client.connected:
                client = await AsyncRelayClient.connect(host, port, args.tenant, args.credential,
                                                        client_name="fault_tool")
            return client

    out = open(args.out, "w")

    async def worker():
        nonlocal client
        while not os.path.exists(args.stop_file) and time.monotonic() - started < args.max_seconds:
            index = next(counter)
            user = users[index % len(users)]
            begun = now_ms()
            job_id = ""
            try:
                current = await get_client()
                result = await asyncio.wait_for(one_send(current, user, args.run, f"{args.run}-s{index}"), 120)
                job_id = result.job_id
                outcome = "acked"
            except RelayError as error:
                outcome = error.code.name
            except (ConnectionClosed, OSError, asyncio.TimeoutError) as error:
                outcome = "CONNECTION" if not isinstance(error, asyncio.TimeoutError) else "TIMEOUT"
                async with lock:
                    if client is not None:
                        try:
                            await asyncio.wait_for(client.close(timeout=1), 2)
                        except Exception:
                            pass
                        client = None
                await asyncio.sleep(0.2)
            latency = now_ms() - begun
            results[outcome] += 1
            out.write(f"{index}\t{user}\t{outcome}\t{job_id}\t{begun}\t{latency}\n")
            out.flush()
            await asyncio.sleep(args.pause)

    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    out.close()
    if client is not None:
        try:
            await asyncio.wait_for(client.close(timeout=2), 5)
        except Exception:
            pass
    print(" ".join(f"{key}={value}" for key, value in sorted(results.items())))


def percentile(values, share):
    if not values:
        return 0
    values = sorted(values)
    return values[min(len(values) - 1, int(share * len(values)))]


async def flood(args):
    from pushrelay_client import AsyncRelayClient, RelayError

    host, port = split_address(args.address)
    users = read_users(args.devices)
    async with await AsyncRelayClient.connect(host, port, args.tenant, args.credential,
                                              client_name="fault_tool") as client:
        max_in_flight = client.hello_ok.max_in_flight
        begun = time.monotonic()
        answers = []
        codes = collections.Counter()

        async def one(index):
            try:
                await one_send(client, users[index % len(users)], args.run, f"{args.run}-f{index}", wait=args.wait)
                codes["acked"] += 1
            except RelayError as error:
                codes[error.code.name] += 1
            answers.append(time.monotonic() - begun)

        await asyncio.gather(*(one(i) for i in range(args.count)))
    waves = collections.Counter(int(t / 0.25) for t in answers)
    values = {
        "count": args.count,
        "relay_max_in_flight": max_in_flight,
        "answers": len(answers),
        "codes": ",".join(f"{k}:{v}" for k, v in sorted(codes.items())),
        "latency_p50_ms": int(percentile(answers, 0.5) * 1000),
        "latency_p90_ms": int(percentile(answers, 0.9) * 1000),
        "latency_max_ms": int(max(answers, default=0) * 1000),
        "answers_in_first_250ms": waves.get(0, 0),
        "most_answers_in_250ms": max(waves.values(), default=0),
        "waves": json.dumps([waves.get(i, 0) for i in range(max(waves, default=-1) + 1)]).replace(" ", ""),
    }
    for key, value in values.items():
        print(f"{key}={value}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("sends", "flood"):
        command = commands.add_parser(name)
        command.add_argument("--address", required=True)
        command.add_argument("--credential", required=True)
        command.add_argument("--tenant", default="circl")
        command.add_argument("--devices", required=True)
        command.add_argument("--run", required=True)
        if name == "sends":
            command.add_argument("--stop-file", required=True)
            command.add_argument("--out", required=True)
            command.add_argument("--concurrency", type=int, default=4)
            command.add_argument("--pause", type=float, default=0.02)
            command.add_argument("--max-seconds", type=float, default=300)
        else:
            command.add_argument("--count", type=int, required=True)
            command.add_argument("--wait", action="store_true")
    args = parser.parse_args()
    asyncio.run({"sends": sends, "flood": flood}[args.command](args))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ops/bench/noisy_neighbour.py: the noisy-neighbour benchmark against a running `pushrelay serve`
(Ops/bench/bench-noisy-neighbour.sh sets the relay up and runs it).

A victim tenant (familyportal, its own credential) measures its ack latency alone, then while an attacker tenant
(circl, its own credential) floods the relay each way a tenant can within the limits, in one run, one flood at a time, in this order:

  a job-backlog       256 SENDs of 100 devices each, pipelined on 2 connections (25,600 notifications, paced at
                      circl's 500/s); measured once every one is answered (the backlog exists)
  b send-wait         256 SEND(wait)s of 100 devices each kept in flight (2 connections x 128)
  c big-sends         one connection of SENDs to 10,000 users each, one after another (8 with --quick, else 32);
                      measured once every one is answered
  d heavy-reads       3 connections x 64 QUERY_DELIVERIES over all time (limit 1,000) kept in flight, paced at the
                      credential's documented rate (1,000 tokens/s, burst 2,000; such a query costs 10)
  e registers         3 connections x 64 REGISTER_DEVICE (new tokens) kept in flight, paced the same way
  i idle-connections  2,000 connections that never say HELLO, each opened again when the relay closes it (run
                      before f-h, whose work and memory outlast them on a relay that does not bound them)
  f inflating-frames  128 pipelined SEND(wait)s (100 devices) on one connection whose zstd bodies (~350 bytes)
                      inflate to max_decompressed_bytes (4 MiB) through one unknown field, kept in flight
  g inflating-pings   2 connections x 128 pipelined PINGs of ~155 bytes that inflate to 4 MiB each, kept in flight
  h loc-args          64 pipelined SENDs with ~2.1 million empty alert.loc_args (4 MiB inflated, ~460 bytes on
                      the wire; refused), kept in flight

Every flood client conforms: it reads every answer, and a connection answered RATE_LIMITED (or UNAVAILABLE with
a retry_after_ms) sends nothing more until that time has passed. Each flood runs in its own process, so the
victim's timings do not share a Python interpreter with it, at niceness 10: in production an attacker's client
runs on its own machine, and on this one its Python would otherwise take the relay's cores from the relay and the
victim (what it sent is printed per phase).

The victim, in each phase: rounds of HELLO (a fresh connection each: connect + HELLO until HELLO_OK), then on one
long-lived connection --pings PINGs, REGISTER_DEVICE (a new device), SEND (no wait) to one user and SEND(wait)
to one registered device (the relay's in-process APNs simulator answers it); one request at a time, the rounds
spread over the phase's window. The victim is measured alone before the first flood and again after the last;
the baseline is both alone phases' samples together. A phase: the relay's idle CPU taken (0.5 s), the flood started and given its warm-up,
the victim's rounds while it runs (up to --rounds in the window; past it only up to a minimum, and never past a
hard cap), the flood stopped, then the drain: the attacker's unfinished jobs cancelled (CANCEL_JOB, found in
PostgreSQL), and a wait until no page of an unfinished job is open and the relay and PostgreSQL each use less than
25% of a core (within a cap). During the phase the relay's VmRSS is sampled every 100 ms (its peak from the flood's
start to its stop), and the CPU of the relay and of PostgreSQL (postmaster and children) is taken over the
victim's rounds as a share of one core.

  mode      rounds  PINGs a round  window  hard cap  warm-up  request timeout  SEND(wait) timeout  drain cap
  --quick   15      3              6 s     15 s      1.5 s    5 s              5 s                 20 s
  full      300     5              40 s    150 s     2 s      15 s             20 s                120 s

Output: a line per phase as it ends, then the table: per phase each victim operation's p50/p99 in ms and the
p99's ratio to alone (xN), the relay's RSS peak and the phase's bound, the relay's and PostgreSQL's CPU, and
whether the target held; a phase that began on a relay still busy with the previous flood's work is marked `*`.
Then a line per phase on the victim's rounds, the relay before the phase, what the attacker sent and got (answers
by code, the first message of each code), the drain, and what missed. p50/p99 are nearest-rank percentiles over
the phase's samples (with fewer than 100 samples the p99 is the largest); a request that failed (an ERROR, a
timeout, no connection) counts with the time it took and always misses the target.

Target: during every flood, each victim operation's p99 at most 3 x its p99 alone (--ratio), no victim
request failing, SEND(wait) under 1 s (also alone), and the relay's RSS peak within the bound: the alone phase's
peak + 22 MiB per attacker connection that said HELLO (README's Limits: about 6 MiB of buffers plus at most 16 MiB
of request bodies held per connection) + 64 KiB per idle connection (README's target per idle connection) + a slack (--rss-slack-mib, 32 MiB: the fan-out's working set
and the allocator; an assumption, not a stated bound).

Exit status: 0 when the run completed, targets met or not; 1 with --check when a phase missed the target; 2 when the
relay died, did not answer a HELLO within 120 s of the last flood, or the harness failed (a flood that could not
start or report, the victim unable to work alone, a drain that could not cancel).

Stdlib only, plus the pushrelay_client package (its pushrelay_pb2) and zstandard; the frame helpers (frame, Conn,
Answer) come from Ops/scenarios/hostile_clients.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "Ops", "scenarios"))
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts

import zstandard  # noqa: E402
from hostile_clients import (  # noqa: E402
    CANCEL_JOB, ERROR, GOODBYE, PING, QUERY_DELIVERIES, REGISTER_DEVICE, SEND, FLAG_ZSTD, Answer, Conn,
    code_name, frame, proc_state, rss_kib, split_address, varint)
from pushrelay_client.frames import HEADER  # noqa: E402
from pushrelay_client import pushrelay_pb2 as pb  # noqa: E402

MIB = 1024 * 1024
INT64_MAX = 2**63 - 1
CLK_TCK = os.sysconf("SC_CLK_TCK")
TEMPLATE = {"circle_id": "7", "channel_id": "3"}
OPS = ["HELLO", "PING", "REGISTER", "SEND", "SEND(wait)"]
CONNECTION_BOUND_MIB = 22.0  # README's Limits: 6 MiB of buffers + 16 MiB of request bodies held, per connection
IDLE_BOUND_KIB = 64.0        # README's headline target: relay memory per idle connection
SEND_WAIT_LIMIT_MS = 1000.0  # the victim's SEND(wait) to one device under 1 s
RECOVERY_SECONDS = 120.0     # the relay must answer a HELLO again within this after the last flood
ATTACKER_NICE = 10           # the flood processes' niceness (see start_flood)
ALONE_NAMES = {"-": "alone", "=": "alone (end)"}  # the victim alone: before the first flood, after the last
BUSY_PERCENT = 25.0          # a relay or PostgreSQL above this share of a core is not drained yet


def say(text: str = "") -> None:
    print(text, flush=True)


def random_token() -> str:
    return "%064x" % random.getrandbits(256)


def padded(message_bytes: bytes, total: int, number: int = 9999) -> bytes:
    """`message_bytes` plus one length-delimited unknown field `number` of zero bytes, `total` bytes in all."""
    tag = varint((number << 3) | 2)
    for length in range(total - len(message_bytes) - len(tag) - 1, 0, -1):
        size = len(message_bytes) + len(tag) + len(varint(length)) + length
        if size == total:
            return message_bytes + tag + varint(length) + bytes(length)
        if size < total:
            break
    raise ValueError(f"cannot pad {len(message_bytes)} bytes to exactly {total}")


def compress(body: bytes) -> bytes:
    # One-shot compression declares the content size, as the relay requires.
    return zstandard.ZstdCompressor(level=3, write_content_size=True).compress(body)


# --- the floods (each in its own process: `noisy_neighbour.py --flood KIND ...`) ----------------------------


class FloodSpec:
    def __init__(self, key: str, name: str, what: str, conns: int = 0, depth: int = 0, total: Optional[int] = None,
                 paced: bool = False, idle: int = 0) -> None:
        self.key, self.name, self.what = key, name, what
        self.conns, self.depth, self.total, self.paced, self.idle = conns, depth, total, paced, idle


def flood_specs(quick: bool) -> List[FloodSpec]:
    return [
        FloodSpec("a", "job-backlog", "256 SENDs of 100 devices (2 conns, pipelined)", conns=2, depth=128, total=256),
        FloodSpec("b", "send-wait", "256 SEND(wait)s of 100 devices in flight (2 x 128)", conns=2, depth=128),
        FloodSpec("c", "big-sends", f"SENDs to 10,000 users, one at a time ({8 if quick else 32})", conns=1,
                  depth=1, total=8 if quick else 32),
        FloodSpec("d", "heavy-reads", "3 x 64 QUERY_DELIVERIES all time, limit 1,000, paced", conns=3, depth=64,
                  paced=True),
        FloodSpec("e", "registers", "3 x 64 REGISTER_DEVICE in flight, paced", conns=3, depth=64, paced=True),
        # The idle connections before the inflating floods, whose work and memory outlast them on a relay that
        # does not bound them (the next phase then starts on a busy relay, and says so).
        FloodSpec("i", "idle-connections", "2,000 connections before HELLO", idle=2000),
        FloodSpec("f", "inflating-frames", "128 SEND(wait)s inflating to 4 MiB (1 conn)", conns=1, depth=128),
        FloodSpec("g", "inflating-pings", "2 x 128 PINGs inflating to 4 MiB", conns=2, depth=128),
        FloodSpec("h", "loc-args", "64 SENDs with ~2.1M empty loc_args (1 conn)", conns=1, depth=64),
    ]


STOP = False


def _stop(_signum, _frame) -> None:
    global STOP
    STOP = True


class Pacer:
    """A token bucket at the credential's documented rate: a request takes its documented cost."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst, self.tokens, self.at = rate, burst, burst, time.monotonic()

    def take(self, cost: float, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False


class FloodStats:
    def __init__(self) -> None:
        self.sent = 0
        self.answers: Dict[str, int] = {}
        self.connection_errors: Dict[str, int] = {}
        self.closed = 0
        self.reconnects = 0
        self.goodbyes = 0
        self.bytes_out = 0
        self.bytes_in = 0
        self.connections = 0
        self.established = 0
        self.connect_failures = 0
        self.note = ""
        self.first_errors: Dict[str, str] = {}  # code -> the first message with it

    def answer(self, code: str) -> None:
        self.answers[code] = self.answers.get(code, 0) + 1


class FloodConn:
    def __init__(self, index: int) -> None:
        self.index = index
        self.sock: Optional[socket.socket] = None
        self.out = bytearray()
        self.inb = bytearray()
        self.in_flight = 0
        self.next_rid = 1
        self.paused_until = 0.0
        self.reconnect_at = 0.0
        self.events = 0

    def rid(self) -> int:
        rid = self.next_rid
        self.next_rid = self.next_rid + 1 if self.next_rid < 0xFFFFFFF0 else 1
        return rid


class Flood:
    """Connections that said HELLO, each keeping `depth` requests in flight (at most `total` in all)."""

    def __init__(self, spec: FloodSpec, args) -> None:
        self.spec = spec
        self.args = args
        self.address = split_address(args.address)
        self.stats = FloodStats()
        self.pacer = Pacer(args.rate, args.burst) if spec.paced else None
        self.users = [f"{args.users_prefix}{i:05d}" for i in range(args.users)]
        self.max_decompressed = 4_194_304
        self.counter = 0
        self.bodies: List[Tuple[int, bytes, int, float]] = []  # kind, body, flags, cost

    def hello(self, conn: FloodConn) -> None:
        c = Conn(self.address, timeout=15)
        answer = c.hello(self.args.tenant, self.args.credential, f"noisy-{self.spec.name}-{conn.index}", timeout=15)
        if answer.status != "ok":
            c.close()
            raise OSError(f"HELLO -> {answer}")
        self.max_decompressed = answer.msg.max_decompressed_bytes or self.max_decompressed
        c.sock.setblocking(False)
        # Bytes the HELLO's reader took past HELLO_OK (none in practice) stay the flood's to parse.
        conn.sock, conn.inb, conn.out = c.sock, bytearray(c.decoder._buffer), bytearray()
        conn.in_flight, conn.paused_until = 0, 0.0

    # The requests of each kind: (kind, body, flags, cost in rate-limit tokens as Protocol/README.md states them).
    def prepare(self) -> None:
        key = self.spec.key
        if key in ("a", "b", "f"):
            wait = key != "a"
            for i in range(32):
                start = (i * 100) % len(self.users)
                users = (self.users + self.users)[start:start + 100]
                send = pb.Send(notification_type="message", user_ids=users, template_values=TEMPLATE,
                               alert=pb.Alert(title="noisy", body=f"flood {key} {i}"), wait=wait)
                body = send.SerializeToString(deterministic=True)
                if key == "f":
                    raw = padded(body, self.max_decompressed)
                    wire = compress(raw)
                    self.bodies.append((SEND, wire, FLAG_ZSTD, 1 + len(raw) // 65536))
                    self.stats.note = f"each SEND {len(wire)} bytes on the wire, {len(raw):,} inflated"
                else:
                    self.bodies.append((SEND, body, 0, 1 + len(body) // 65536))
                if key == "f" and i >= 3:
                    break
        elif key == "c":
            send = pb.Send(notification_type="message", user_ids=self.users, template_values=TEMPLATE,
                           alert=pb.Alert(title="noisy", body="everyone"))
            body = send.SerializeToString(deterministic=True)
            self.bodies.append((SEND, compress(body), FLAG_ZSTD, 1 + len(body) // 65536))
        elif key == "d":
            query = pb.QueryDeliveries(from_ms=0, to_ms=INT64_MAX, limit=1000)
            self.bodies.append((QUERY_DELIVERIES, query.SerializeToString(), 0, 10))
        elif key == "e":
            pass  # made per request (a new token each)
        elif key == "g":
            raw = padded(pb.Ping(nonce=7).SerializeToString(), self.max_decompressed)
            wire = compress(raw)
            self.bodies.append((PING, wire, FLAG_ZSTD, 0))
            self.stats.note = f"each PING {len(wire)} bytes on the wire, {len(raw):,} inflated"
        elif key == "h":
            base = pb.Send(notification_type="message", user_ids=[self.users[0]], template_values=TEMPLATE)
            head = base.SerializeToString(deterministic=True)
            title = b"\x0a\x05noisy"  # Alert.title
            # Send.alert (field 7) holding Alert.loc_args (field 10) empty, as many as fit in max_decompressed.
            budget = self.max_decompressed - len(head) - 1 - 5 - len(title)
            count = budget // 2
            alert = title + b"\x52\x00" * count
            raw = head + b"\x3a" + varint(len(alert)) + alert
            self.bodies.append((SEND, compress(raw), FLAG_ZSTD, 1 + len(raw) // 65536))
            self.stats.note = f"{count:,} loc_args per SEND, {len(raw):,} bytes inflated, {len(compress(raw))} on the wire"
        for _kind, body, _flags, _cost in self.bodies:
            if len(body) > 1_000_000:
                raise ValueError(f"a flood frame of {len(body)} bytes")

    def next_request(self) -> Tuple[int, bytes, int, float]:
        self.counter += 1
        if self.spec.key == "e":
            register = pb.RegisterDevice(user_id=f"nn-r{random.randrange(100000):05d}", token=random_token(),
                                         platform="ios", environment=pb.PRODUCTION)
            return REGISTER_DEVICE, register.SerializeToString(), 0, 1
        return self.bodies[self.counter % len(self.bodies)]

    def fill(self, conn: FloodConn, now: float) -> None:
        spec = self.spec
        while conn.in_flight < spec.depth and now >= conn.paused_until and len(conn.out) < 4 * MIB:
            if spec.total is not None and self.stats.sent >= spec.total:
                return
            kind, body, flags, cost = self.next_request()
            if self.pacer is not None and not self.pacer.take(cost, now):
                self.counter -= 1
                return
            data = frame(kind, conn.rid(), body, flags=flags)
            conn.out += data
            conn.in_flight += 1
            self.stats.sent += 1
            self.stats.bytes_out += len(data)

    def lost(self, sel: selectors.BaseSelector, conn: FloodConn, now: float) -> None:
        if conn.sock is not None:
            try:
                sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            conn.sock.close()
        conn.sock, conn.events, conn.in_flight = None, 0, 0
        conn.reconnect_at = now + 0.5
        self.stats.closed += 1

    def parse(self, conn: FloodConn, now: float) -> None:
        buf = conn.inb
        offset = 0
        while len(buf) - offset >= HEADER.size:
            length, _version, _flags, kind, rid = HEADER.unpack_from(buf, offset)
            if len(buf) - offset < HEADER.size + length:
                break
            body = bytes(buf[offset + HEADER.size:offset + HEADER.size + length]) if kind == ERROR else b""
            offset += HEADER.size + length
            if kind == ERROR:
                error = pb.Error()
                try:
                    error.ParseFromString(body)
                    code = code_name(error.code)
                except Exception:  # noqa: BLE001
                    code, error = "unparsable ERROR", pb.Error()
                if rid == 0:
                    self.stats.connection_errors[code] = self.stats.connection_errors.get(code, 0) + 1
                    continue
                conn.in_flight = max(0, conn.in_flight - 1)
                self.stats.answer(code)
                if code in ("RATE_LIMITED", "UNAVAILABLE") and error.retry_after_ms:
                    conn.paused_until = max(conn.paused_until, now + error.retry_after_ms / 1000)
                if code not in self.stats.first_errors:
                    self.stats.first_errors[code] = error.message[:120]
            elif kind == GOODBYE and rid == 0:
                self.stats.goodbyes += 1
            elif kind & 0x8000:
                conn.in_flight = max(0, conn.in_flight - 1)
                self.stats.answer("ok")
        del buf[:offset]

    def run(self) -> int:
        conns = [FloodConn(i) for i in range(self.spec.conns)]
        for conn in conns:
            self.hello(conn)
            self.stats.connections += 1
        self.prepare()
        sel = selectors.DefaultSelector()
        ready_said = False
        started = time.monotonic()
        while not STOP:
            now = time.monotonic()
            for conn in conns:
                if conn.sock is None:
                    if now >= conn.reconnect_at:
                        try:
                            self.hello(conn)
                            self.stats.reconnects += 1
                        except OSError as error:
                            conn.reconnect_at = now + 0.5
                            self.stats.first_errors.setdefault("reconnect", str(error)[:120])
                    continue
                self.fill(conn, now)
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
                if conn.events == 0:
                    sel.register(conn.sock, events, conn)
                elif events != conn.events:
                    sel.modify(conn.sock, events, conn)
                conn.events = events
            # In full swing: a flood with a total (a backlog) once every request of it is answered (the backlog
            # exists), any other once its first requests are on their way.
            answered = sum(self.stats.answers.values())
            if not ready_said and (self.spec.total is None or answered >= self.spec.total or
                                   time.monotonic() - started > 60):
                say("READY")
                ready_said = True
            for key, mask in sel.select(0.02):
                conn = key.data
                now = time.monotonic()
                if mask & selectors.EVENT_WRITE and conn.sock is not None and conn.out:
                    try:
                        sent = conn.sock.send(conn.out)
                        del conn.out[:sent]
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        self.lost(sel, conn, now)
                        continue
                if mask & selectors.EVENT_READ and conn.sock is not None:
                    while True:
                        try:
                            data = conn.sock.recv(1 << 20)
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:
                            data = b""
                        if not data:
                            self.parse(conn, now)
                            self.lost(sel, conn, now)
                            break
                        self.stats.bytes_in += len(data)
                        conn.inb += data
                        if len(data) < (1 << 20):
                            break
                    if conn.sock is not None:
                        self.parse(conn, now)
        for conn in conns:
            if conn.sock is not None:
                conn.sock.close()
        return 0


class IdleFlood:
    """`spec.idle` connections that never say HELLO; one closed by the relay is opened again."""

    def __init__(self, spec: FloodSpec, args) -> None:
        self.spec = spec
        self.address = split_address(args.address)
        self.stats = FloodStats()

    def run(self) -> int:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.spec.idle
        if soft < wanted + 256:
            if hard != resource.RLIM_INFINITY:
                wanted = min(wanted, hard - 256)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        if wanted < self.spec.idle:
            self.stats.note = f"only {wanted} connections: this process may open {hard} files"
        sel = selectors.DefaultSelector()
        state: Dict[int, bytearray] = {}
        to_open = wanted
        started = time.monotonic()
        ready_said = False

        def open_one() -> None:
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except OSError:
                self.stats.connect_failures += 1
                return
            sock.setblocking(False)
            err = sock.connect_ex(self.address)
            if err not in (0, 115, 11):  # EINPROGRESS, EAGAIN
                sock.close()
                self.stats.connect_failures += 1
                return
            self.stats.connections += 1
            state[sock.fileno()] = bytearray()
            sel.register(sock, selectors.EVENT_WRITE, "connecting")

        def close(sock: socket.socket) -> None:
            nonlocal to_open
            try:
                sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            buf = state.pop(sock.fileno(), bytearray())
            if len(buf) >= HEADER.size:
                length, _v, _f, kind, _rid = HEADER.unpack_from(buf)
                if kind == ERROR and len(buf) >= HEADER.size + length:
                    error = pb.Error()
                    try:
                        error.ParseFromString(bytes(buf[HEADER.size:HEADER.size + length]))
                        code = code_name(error.code)
                    except Exception:  # noqa: BLE001
                        code = "unparsable ERROR"
                    self.stats.connection_errors[code] = self.stats.connection_errors.get(code, 0) + 1
            sock.close()
            self.stats.closed += 1
            to_open += 1

        while not STOP:
            # Open what is missing, at most 500 per turn (a relay that closes at once must not make a hot loop).
            for _ in range(min(to_open, 500)):
                open_one()
                to_open -= 1
            if not ready_said and (self.stats.established >= 0.9 * wanted or
                                   time.monotonic() - started > 5):
                say("READY")
                ready_said = True
            for key, mask in sel.select(0.05):
                sock = key.fileobj
                if key.data == "connecting":
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self.stats.connect_failures += 1
                        close(sock)
                        continue
                    self.stats.established += 1
                    sel.modify(sock, selectors.EVENT_READ, "open")
                    continue
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if data:
                    self.stats.bytes_in += len(data)
                    state[sock.fileno()] += data
                else:
                    close(sock)
        self.stats.sent = self.stats.connections
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        return 0


def flood_main(args) -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    spec = {s.key: s for s in flood_specs(args.quick)}[args.flood]
    runner = IdleFlood(spec, args) if spec.idle else Flood(spec, args)
    try:
        rc = runner.run()
    except Exception as error:  # noqa: BLE001
        say(f"FLOOD-ERROR {error.__class__.__name__}: {error}")
        return 3
    say("STATS " + json.dumps(runner.stats.__dict__))
    return rc


# --- measuring the relay -------------------------------------------------------------------------------


def cpu_ticks(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def postgres_ticks(pid_file: str) -> Dict[int, int]:
    """CPU ticks of the postmaster and each of its children, by pid."""
    out: Dict[int, int] = {}
    try:
        with open(pid_file) as handle:
            postmaster = int(handle.readline().strip())
    except (OSError, ValueError):
        return out
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(name) == postmaster or int(fields[1]) == postmaster:
            out[int(name)] = int(fields[11]) + int(fields[12])
    return out


class RssSampler(threading.Thread):
    """The relay's VmRSS every 100 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: List[Tuple[float, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            value = rss_kib(self.pid)
            if value is not None:
                self.samples.append((time.monotonic(), value))
            self.stopping.wait(0.1)

    def peak(self, start: float, end: float) -> int:
        values = [v for t, v in self.samples if start <= t <= end]
        return max(values) if values else (rss_kib(self.pid) or 0)


class Window:
    """CPU of the relay and of PostgreSQL over a stretch of wall time, as a share of one core."""

    def __init__(self, relay_pid: int, pg_pid_file: str) -> None:
        self.relay_pid, self.pg_pid_file = relay_pid, pg_pid_file
        self.t0 = time.monotonic()
        self.relay0 = cpu_ticks(relay_pid) or 0
        self.pg0 = postgres_ticks(pg_pid_file)

    def close(self) -> Tuple[float, float, float]:
        wall = max(1e-6, time.monotonic() - self.t0)
        relay = ((cpu_ticks(self.relay_pid) or self.relay0) - self.relay0) / CLK_TCK / wall * 100
        pg1 = postgres_ticks(self.pg_pid_file)
        pg = sum(v - self.pg0.get(pid, 0) for pid, v in pg1.items()) / CLK_TCK / wall * 100
        return relay, pg, wall


def relay_cpu_now(pid: int, seconds: float = 0.5) -> float:
    before = cpu_ticks(pid) or 0
    time.sleep(seconds)
    return ((cpu_ticks(pid) or before) - before) / CLK_TCK / seconds * 100


# --- the victim ----------------------------------------------------------------------------------------


class Sample:
    __slots__ = ("ms", "status")

    def __init__(self, ms: float, status: str) -> None:
        self.ms, self.status = ms, status


class Victim:
    """familyportal: a fresh connection per HELLO sample, one long-lived connection for the rest."""

    def __init__(self, address: Tuple[str, int], tenant: str, credential: str, timeout: float,
                 wait_timeout: float) -> None:
        self.address, self.tenant, self.credential = address, tenant, credential
        self.timeout, self.wait_timeout = timeout, wait_timeout
        self.conn: Optional[Conn] = None
        self.pool: List[str] = []
        self.next_user = 0
        self.registered = 0
        self.reconnects = 0
        self.outcomes: Dict[str, int] = {}

    def connect(self) -> Optional[str]:
        try:
            conn = Conn(self.address, timeout=self.timeout, nodelay=True)
        except OSError as error:
            return f"connect: {error}"
        answer = conn.hello(self.tenant, self.credential, "noisy-victim", timeout=self.timeout)
        if answer.status != "ok":
            conn.close()
            return f"HELLO -> {answer}"
        self.conn = conn
        return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, kind: int, message, timeout: float) -> Tuple[Sample, Optional[Answer]]:
        started = time.perf_counter()
        if self.conn is None:
            # The long-lived connection was lost (a timeout closes it): the request waits for a new one, and a
            # request that cannot get one failed after that long.
            failed = self.connect()
            self.reconnects += 1
            if failed is not None:
                return Sample((time.perf_counter() - started) * 1000, f"no connection ({failed[:60]})"), None
            started = time.perf_counter()
        answer = self.conn.call(kind, message, timeout=timeout)
        ms = (time.perf_counter() - started) * 1000
        if answer.status == "ok":
            return Sample(ms, "ok"), answer
        if answer.status in ("closed", "timeout", "odd") or (answer.status == "error" and answer.rid == 0):
            self.close()
        status = answer.code if answer.status == "error" else answer.status
        return Sample(ms, status), answer

    def hello(self) -> Sample:
        started = time.perf_counter()
        try:
            conn = Conn(self.address, timeout=self.timeout, nodelay=True)
        except socket.timeout:
            return Sample((time.perf_counter() - started) * 1000, "timeout")
        except OSError as error:
            return Sample((time.perf_counter() - started) * 1000, f"connect failed ({error.__class__.__name__})")
        try:
            left = max(0.1, self.timeout - (time.perf_counter() - started))
            answer = conn.hello(self.tenant, self.credential, "noisy-victim-hello", timeout=left)
            ms = (time.perf_counter() - started) * 1000
        finally:
            conn.close()
        if answer.status == "ok":
            return Sample(ms, "ok")
        return Sample(ms, answer.code if answer.status == "error" else answer.status)

    def ping(self) -> Sample:
        nonce = random.getrandbits(63)
        sample, answer = self.call(PING, pb.Ping(nonce=nonce), self.timeout)
        if sample.status == "ok" and answer.msg.nonce != nonce:
            sample.status = "wrong nonce"
        return sample

    def register(self, user: str) -> Sample:
        sample, _ = self.call(REGISTER_DEVICE, pb.RegisterDevice(
            user_id=user, token=random_token(), platform="ios", environment=pb.PRODUCTION, topics=["chat"]),
            self.timeout)
        return sample

    def user(self) -> str:
        user = self.pool[self.next_user % len(self.pool)]
        self.next_user += 1
        return user

    def send(self, wait: bool) -> Sample:
        send = pb.Send(notification_type="chat_message", user_ids=[self.user()],
                       alert=pb.Alert(title="Grandma", body="Lunch on Sunday?"), wait=wait)
        sample, answer = self.call(SEND, send, self.wait_timeout if wait else self.timeout)
        if sample.status == "ok" and wait:
            outcomes = [o.outcome + (f" ({o.reason})" if o.reason else "") for o in answer.msg.outcomes]
            for outcome in outcomes:
                self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if outcomes != ["delivered"]:
                sample.status = "outcome " + ",".join(outcomes or ["none"])
        return sample

    def setup(self, pool: int) -> None:
        """The users SEND goes to, one device each (familyportal caps chat_message at 120 per user and hour)."""
        for i in range(pool):
            user = f"fp-v{i:03d}"
            for _attempt in range(5):
                sample = self.register(user)
                if sample.status == "ok":
                    break
                time.sleep(0.5)
            else:
                raise SystemExit(f"noisy-neighbour: setup: REGISTER_DEVICE {user} -> {sample.status}")
            self.pool.append(user)

    def round(self, seq: str, results: Dict[str, List[Sample]], pings: int,
              stop: Callable[[], bool] = lambda: False) -> None:
        """One request of each kind (`pings` PINGs), one at a time; `stop` is asked before each (the hard cap)."""
        steps = [("HELLO", self.hello)] + [("PING", self.ping)] * pings + [
            ("REGISTER", lambda: self.register(f"fp-r{seq}")), ("SEND", lambda: self.send(False)),
            ("SEND(wait)", lambda: self.send(True))]
        for op, run in steps:
            if stop():
                return
            results[op].append(run())


# --- the run -------------------------------------------------------------------------------------------


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


class Phase:
    def __init__(self, key: str, name: str, what: str) -> None:
        self.key, self.name, self.what = key, name, what
        self.samples: Dict[str, List[Sample]] = {op: [] for op in OPS}
        self.rss_peak_kib = 0
        self.rss_bound_kib = 0.0
        self.cpu = 0.0
        self.pg_cpu = 0.0
        self.wall = 0.0
        self.drain_s = 0.0
        self.drain_note = ""
        self.attacker: Dict = {}
        self.attacker_conns = 0
        self.idle_conns = 0
        self.misses: List[str] = []
        self.held = True
        self.rounds = 0
        self.capped = False
        self.cpu_before = 0.0
        self.pg_cpu_before = 0.0
        self.busy_before = False
        self.rss_start_kib = 0

    def p(self, op: str, q: float) -> float:
        return percentile([s.ms for s in self.samples[op]], q)

    def failed(self, op: str) -> List[Sample]:
        return [s for s in self.samples[op] if s.status != "ok"]


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.address = split_address(args.address)
        self.relay_pid = args.relay_pid
        self.sampler = RssSampler(self.relay_pid)
        self.phases: List[Phase] = []
        self.quick = args.quick
        self.rounds = args.rounds or (15 if self.quick else 300)
        self.pings = args.pings or (3 if self.quick else 5)
        self.min_rounds = 3 if self.quick else 5
        # The rounds are spread over the window (one every window/rounds seconds); past it, rounds go on only up
        # to min_rounds, and never past the hard cap (a flood that makes every request time out).
        self.window = args.window or (6.0 if self.quick else 40.0)
        self.hard_cap = 15.0 if self.quick else 150.0
        self.warmup = args.warmup if args.warmup is not None else (1.5 if self.quick else 2.0)
        self.drain_cap = 20.0 if self.quick else 120.0
        self.victim = Victim(self.address, args.victim_tenant, args.victim_credential,
                             5.0 if self.quick else 15.0, 5.0 if self.quick else 20.0)
        self.harness_errors: List[str] = []
        self.relay_dead = ""
        self.pg_pid_file = args.pg_pid_file
        self.psql_failed = False
        self.recovery = ""

    # -- helpers --
    def relay_alive(self) -> bool:
        return proc_state(self.relay_pid) not in ("", "Z", "X")

    def psql(self, sql: str) -> Optional[str]:
        if not self.args.psql:
            return None
        try:
            done = subprocess.run(["psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", self.args.psql, "-c", sql],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            if not self.psql_failed:
                self.psql_failed = True
                say(f"noisy-neighbour: psql failed ({done.stderr.strip()[:200]}); draining by CPU only")
            return None
        return done.stdout.strip()

    def cancel_jobs(self, ids: List[str]) -> Tuple[int, int]:
        """CANCEL_JOB for each of `ids` as the attacker, up to 100 in flight: (cancelled, other answers)."""
        cancelled = other = 0
        conn = Conn(self.address, timeout=15)
        try:
            hello = conn.hello(self.args.attacker_tenant, self.args.attacker_credential, "noisy-drain", timeout=15)
            if hello.status != "ok":
                self.harness_errors.append(f"drain: the attacker's HELLO -> {hello}")
                return 0, 0
            todo = list(ids)
            for _attempt in range(10):
                if not todo:
                    break
                retry: List[str] = []
                wait_ms = 0
                for i in range(0, len(todo), 100):
                    pending: Dict[int, str] = {}
                    for job_id in todo[i:i + 100]:
                        rid = conn.rid()
                        conn.send(frame(CANCEL_JOB, rid, pb.CancelJob(job_id=job_id).SerializeToString()))
                        pending[rid] = job_id
                    deadline = time.monotonic() + 20
                    while pending and time.monotonic() < deadline:
                        got = conn.read_frame(max(0.0, deadline - time.monotonic()))
                        if got is None:
                            break
                        kind, rid, body = got.kind, got.request_id, getattr(got, "body", b"")
                        if rid not in pending:
                            continue
                        job_id = pending.pop(rid)
                        if kind == ERROR:
                            error = pb.Error()
                            error.ParseFromString(body)
                            if error.code in (pb.RATE_LIMITED, pb.UNAVAILABLE):
                                retry.append(job_id)
                                wait_ms = max(wait_ms, error.retry_after_ms)
                            else:
                                other += 1
                        else:
                            cancelled += 1
                    retry += list(pending.values())
                todo = retry
                if todo:
                    time.sleep(max(0.1, wait_ms / 1000))
        except OSError as error:  # Closed is an Exception: caught below
            self.harness_errors.append(f"drain: CANCEL_JOB: {error}")
        except Exception as error:  # noqa: BLE001
            self.harness_errors.append(f"drain: CANCEL_JOB: {error.__class__.__name__}: {error}")
        finally:
            conn.close()
        return cancelled, other

    def drain(self, phase: Phase) -> None:
        """The attacker's unfinished jobs cancelled; then until no page of an unfinished job is open and the relay and
        PostgreSQL each use less than a quarter of a core (within the cap)."""
        started = time.monotonic()
        cancelled = other = 0
        for _pass in range(3):
            ids = self.psql(f"SELECT id FROM jobs WHERE tenant_id = '{self.args.attacker_tenant}' "
                            "AND finished_at IS NULL")
            if not ids:
                break
            done, refused = self.cancel_jobs(ids.split())
            cancelled, other = cancelled + done, other + refused
            time.sleep(0.3)
        unsettled = self.settle(started + self.drain_cap)
        phase.drain_s = time.monotonic() - started
        phase.drain_note = f"{cancelled} attacker jobs cancelled" + (f", {other} not cancellable" if other else "")
        if unsettled:
            phase.drain_note += f"; NOT drained within the {self.drain_cap:g}s cap: {unsettled}"

    def settle(self, deadline: float) -> str:
        """Waits until no page of an unfinished job is open and the relay and PostgreSQL are quiet; "" when they
        are by `deadline`, else what was still going on."""
        open_pages: Optional[str] = None
        cpu = pg_cpu = 0.0
        while True:
            open_pages = self.psql("SELECT count(*) FROM job_pages p JOIN jobs j ON j.id = p.job_id "
                                   "WHERE p.state IN ('pending', 'leased') AND j.finished_at IS NULL")
            window = Window(self.relay_pid, self.pg_pid_file)
            time.sleep(0.5)
            cpu, pg_cpu, _wall = window.close()
            if open_pages in (None, "0") and cpu < BUSY_PERCENT and pg_cpu < BUSY_PERCENT:
                return ""
            if time.monotonic() >= deadline:
                return (f"relay CPU {cpu:.0f}%, db {pg_cpu:.0f}%, "
                        f"{open_pages if open_pages is not None else '?'} open pages")

    def take_rounds(self, phase: Phase) -> None:
        started = time.monotonic()
        interval = self.window / self.rounds

        def over_cap() -> bool:
            return time.monotonic() - started > self.hard_cap

        rounds = 0
        while rounds < self.rounds and not over_cap():
            elapsed = time.monotonic() - started
            if elapsed > self.window and rounds >= self.min_rounds:
                break
            if elapsed < rounds * interval:
                time.sleep(rounds * interval - elapsed)
            self.victim.round(f"{phase.key}{rounds:03d}", phase.samples, self.pings, over_cap)
            rounds += 1
            phase.rounds = rounds
            if not self.relay_alive():
                self.relay_dead = f"the relay (pid {self.relay_pid}) died during phase {phase.name}"
                return
        phase.rounds = rounds
        phase.capped = over_cap()

    def start_flood(self, spec: FloodSpec) -> subprocess.Popen:
        argv = [sys.executable, os.path.abspath(__file__), "--flood", spec.key, "--address", self.args.address,
                "--attacker-tenant", self.args.attacker_tenant, "--attacker-credential", self.args.attacker_credential,
                "--users-prefix", self.args.users_prefix, "--users", str(self.args.users)]
        if self.quick:
            argv.append("--quick")
        # At a lower CPU priority: in production the attacker's client runs on its own machine, and here its
        # Python would otherwise take the relay's cores (2 on this machine) from it and from the victim.
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: os.nice(ATTACKER_NICE))
        line = child.stdout.readline()  # READY, or FLOOD-ERROR and the end (the child says READY within 60 s)
        if not line.startswith("READY"):
            child.kill()
            rest, _ = child.communicate()
            raise RuntimeError(f"flood {spec.name} did not start: {(line + rest).strip()[:300] or 'no output'}")
        return child

    def stop_flood(self, child: subprocess.Popen, spec: FloodSpec) -> Dict:
        child.send_signal(signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            out, _ = child.communicate()
        for line in out.splitlines():
            if line.startswith("STATS "):
                return json.loads(line[6:])
        raise RuntimeError(f"flood {spec.name} ended without its figures (exit {child.returncode}): {out[-300:]}")

    def run_phase(self, spec: Optional[FloodSpec], alone_key: str = "-") -> Phase:
        phase = Phase(spec.key if spec else alone_key, spec.name if spec else ALONE_NAMES[alone_key],
                      spec.what if spec else "the victim alone")
        say(f"noisy-neighbour: phase {phase.key} {phase.name}: {phase.what}")
        before = Window(self.relay_pid, self.pg_pid_file)
        time.sleep(0.5)
        phase.cpu_before, phase.pg_cpu_before, _wall = before.close()
        phase.busy_before = max(phase.cpu_before, phase.pg_cpu_before) > BUSY_PERCENT
        phase.rss_start_kib = rss_kib(self.relay_pid) or 0
        flood_started = time.monotonic()
        child = self.start_flood(spec) if spec else None
        try:
            if spec:
                time.sleep(self.warmup)
            window = Window(self.relay_pid, self.pg_pid_file)
            self.take_rounds(phase)
            phase.cpu, phase.pg_cpu, phase.wall = window.close()
        finally:
            if child is not None:
                try:
                    phase.attacker = self.stop_flood(child, spec)
                except RuntimeError as error:
                    self.harness_errors.append(str(error))
        phase.rss_peak_kib = self.sampler.peak(flood_started, time.monotonic())
        if spec:
            phase.attacker_conns = phase.attacker.get("connections", 0) if not spec.idle else 0
            phase.idle_conns = spec.idle
        if not self.relay_alive():
            self.relay_dead = self.relay_dead or f"the relay (pid {self.relay_pid}) died during phase {phase.name}"
            return phase
        self.drain(phase)
        return phase

    def judge(self, alone: Phase, phase: Phase) -> None:
        """`alone` is the baseline (both alone phases' samples); an alone phase is judged on failures only."""
        args = self.args
        for op in OPS:
            failed = phase.failed(op)
            if failed:
                kinds: Dict[str, int] = {}
                for s in failed:
                    kinds[s.status] = kinds.get(s.status, 0) + 1
                phase.misses.append(f"{op}: {len(failed)}/{len(phase.samples[op])} failed (" +
                                    ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())) + ")")
            if not phase.samples[op]:
                phase.misses.append(f"{op}: no sample")
                continue
            if phase.key not in ALONE_NAMES:
                base = max(alone.p(op, 99), args.floor_ms)
                ratio = phase.p(op, 99) / base if base > 0 else math.inf
                if ratio > args.ratio:
                    phase.misses.append(f"{op} p99 {phase.p(op, 99):.1f} ms = {ratio:.1f} x alone")
        if phase.p("SEND(wait)", 99) >= SEND_WAIT_LIMIT_MS:
            phase.misses.append(f"SEND(wait) p99 {phase.p('SEND(wait)', 99):.0f} ms >= {SEND_WAIT_LIMIT_MS:.0f} ms")
        if phase.key not in ALONE_NAMES:
            phase.rss_bound_kib = (self.phases[0].rss_peak_kib + args.rss_slack_mib * 1024 +
                                   phase.attacker_conns * CONNECTION_BOUND_MIB * 1024 +
                                   phase.idle_conns * IDLE_BOUND_KIB)
            if phase.rss_peak_kib > phase.rss_bound_kib:
                phase.misses.append(f"RSS peak {phase.rss_peak_kib / 1024:.0f} MiB over its bound "
                                    f"{phase.rss_bound_kib / 1024:.0f} MiB")
        phase.held = not phase.misses

    def baseline(self) -> Phase:
        """Every alone phase's samples together: what each flood's p99 is compared with."""
        pooled = Phase("-", "alone", "the victim alone")
        for phase in self.phases:
            if phase.key in ALONE_NAMES:
                for op in OPS:
                    pooled.samples[op] += phase.samples[op]
        return pooled

    # -- the report --
    def cell(self, alone: Phase, phase: Phase, op: str) -> str:
        if not phase.samples[op]:
            return "-"
        p50, p99 = phase.p(op, 50), phase.p(op, 99)
        mark = "!" if phase.failed(op) else ""
        if phase.key in ALONE_NAMES:
            return f"{fmt_ms(p50)}/{fmt_ms(p99)}{mark}"
        base = max(alone.p(op, 99), self.args.floor_ms)
        ratio = p99 / base if base > 0 else math.inf
        return f"{fmt_ms(p50)}/{fmt_ms(p99)}{mark} x{fmt_ratio(ratio)}"

    def report(self, header: List[str]) -> List[str]:
        alone = self.baseline()
        lines = list(header)
        widths = [20] + [21] * len(OPS) + [16, 6, 7, 6]
        titles = ["phase"] + [f"{op} p50/p99 xN" for op in OPS] + ["RSS peak/bound", "CPU%", "db CPU%", "target"]
        lines.append("  ".join(t.ljust(w) for t, w in zip(titles, widths)).rstrip())
        for phase in self.phases:
            name = (f"{phase.key} {phase.name}" if phase.key not in ALONE_NAMES else phase.name) + (
                "*" if phase.busy_before else "")
            rss = f"{phase.rss_peak_kib / 1024:.0f}" + (f"/{phase.rss_bound_kib / 1024:.0f} MiB"
                                                         if phase.rss_bound_kib else " MiB")
            cells = [name] + [self.cell(alone, phase, op) for op in OPS] + [
                rss, f"{phase.cpu:.0f}", f"{phase.pg_cpu:.0f}", "held" if phase.held else "MISSED"]
            lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        if any(p.busy_before for p in self.phases):
            lines.append(f"* the relay or PostgreSQL still used more than {BUSY_PERCENT:g}% of a core when the phase "
                         "began (the previous flood's work outlasted its drain): the row is not the flood's alone")
        lines.append("")
        lines.append("per phase: victim samples, the attacker's answers, the misses")
        for phase in self.phases:
            name = f"{phase.key} {phase.name}" if phase.key not in ALONE_NAMES else phase.name
            parts = [f"{phase.rounds} victim rounds in {phase.wall:.1f}s" +
                     (f" (stopped at the {self.hard_cap:g}s cap)" if phase.capped else "")
                     + f"; before it the relay used {phase.cpu_before:.0f}% CPU, db {phase.pg_cpu_before:.0f}%, "
                     f"RSS {phase.rss_start_kib / 1024:.0f} MiB"]
            if phase.attacker:
                a = phase.attacker
                answers = ", ".join(f"{k} {v}" for k, v in sorted(a.get("answers", {}).items(), key=lambda kv: -kv[1]))
                conn_errors = ", ".join(f"{k} {v}" for k, v in a.get("connection_errors", {}).items())
                if phase.idle_conns:
                    parts.append(f"attacker: {a.get('connections', 0)} connections opened, {a.get('established', 0)} "
                                 f"established, {a.get('closed', 0)} closed by the relay"
                                 + (f" ({conn_errors})" if conn_errors else "")
                                 + (f", {a.get('connect_failures')} connects failed" if a.get("connect_failures") else ""))
                else:
                    parts.append(f"attacker: {a.get('sent', 0)} requests on {a.get('connections', 0)} conns "
                                 f"({a.get('bytes_out', 0) / 1024:.0f} KiB sent, {a.get('bytes_in', 0) / 1024:.0f} KiB "
                                 f"read), answers: {answers or 'none'}"
                                 + (f"; connection errors: {conn_errors}" if conn_errors else "")
                                 + (f"; closed {a['closed']}, reconnected {a['reconnects']}" if a.get("closed") else ""))
                if a.get("note"):
                    parts.append(a["note"])
                for code, message in a.get("first_errors", {}).items():
                    parts.append(f"first {code}: {message!r}")
            if phase.drain_note:
                parts.append(f"drained in {phase.drain_s:.1f}s ({phase.drain_note})")
            lines.append(f"  {name}: " + "; ".join(parts))
            if phase.misses:
                lines.append(f"    missed: " + "; ".join(phase.misses))
        return lines

    def run(self) -> int:
        args = self.args
        self.sampler.start()
        say(f"noisy-neighbour: victim {args.victim_tenant}, attacker {args.attacker_tenant}, relay pid {self.relay_pid} "
            f"at {args.address}; {'quick' if self.quick else 'full'}: up to {self.rounds} rounds per phase "
            f"(at least {self.min_rounds}, {self.window:g}s window), warm-up {self.warmup:g}s")
        self.victim.setup(args.pool)
        warm: Dict[str, List[Sample]] = {op: [] for op in OPS}
        for i in range(5):
            self.victim.round(f"w{i}", warm, self.pings)  # first connections, pools and caches: not measured
        self.settle(time.monotonic() + 20)
        specs = flood_specs(self.quick)
        if args.only:
            specs = [s for s in specs if s.key in args.only.split(",") or s.name in args.only.split(",")]
        # The victim alone before the first flood and again after the last: the baseline is both together, so
        # that neither a cold start nor a relay grown over the run sets it alone.
        plan: List[Tuple[Optional[FloodSpec], str]] = [(None, "-")] + [(s, "") for s in specs] + [(None, "=")]
        for spec, alone_key in plan:
            if self.relay_dead:
                break
            try:
                phase = self.run_phase(spec, alone_key)
            except (RuntimeError, OSError) as error:
                self.harness_errors.append(f"phase {spec.name if spec else ALONE_NAMES[alone_key]}: {error}")
                if not self.relay_alive():
                    self.relay_dead = f"the relay (pid {self.relay_pid}) died"
                break
            self.phases.append(phase)
            say(f"noisy-neighbour:   {phase.name}: " + ", ".join(
                f"{op} {fmt_ms(phase.p(op, 50))}/{fmt_ms(phase.p(op, 99))}" for op in OPS)
                + f" ms; RSS peak {phase.rss_peak_kib / 1024:.0f} MiB, CPU {phase.cpu:.0f}%, db {phase.pg_cpu:.0f}%")
            if spec is None and any(len(phase.failed(op)) == len(phase.samples[op]) for op in OPS):
                self.harness_errors.append(f"the victim could not work {phase.name}")
                break
        baseline = self.baseline()
        for phase in self.phases:
            self.judge(baseline, phase)
        held_phases = sum(1 for phase in self.phases if phase.held)
        self.sampler.stopping.set()
        if not self.relay_dead and self.relay_alive():
            # Alive; it must also answer again once the last flood's work is done (a busy relay is a missed
            # target, shown above; a relay that never answers again is broken).
            began = time.monotonic()
            while True:
                ok = self.victim.hello()
                if ok.status == "ok" or time.monotonic() > began + RECOVERY_SECONDS or not self.relay_alive():
                    break
                time.sleep(1)
            self.recovery = f"the relay answered a fresh HELLO {time.monotonic() - began:.1f}s after the last drain"
            if ok.status != "ok":
                self.relay_dead = (f"the relay did not answer a HELLO within {RECOVERY_SECONDS:g}s after the last "
                                   f"flood ({ok.status})")
        elif not self.relay_dead:
            self.relay_dead = f"the relay (pid {self.relay_pid}) died"
        self.victim.close()

        header = [f"# noisy-neighbour benchmark: {args.label}".rstrip(),
                  f"# victim {args.victim_tenant}, attacker {args.attacker_tenant}; "
                  f"{'--quick' if self.quick else 'full'}: up to {self.rounds} rounds per phase, at least "
                  f"{self.min_rounds}, window {self.window:g}s after a {self.warmup:g}s warm-up",
                  "# cells: p50/p99 ms (nearest rank: with fewer than 100 samples the p99 is the largest) and xN = "
                  "p99 / p99 alone (both alone phases' samples); ! = a request failed (ERROR, timeout)",
                  f"# target per flood: every p99 <= {args.ratio:g} x alone"
                  + (f" (alone taken as at least {args.floor_ms:g} ms)" if args.floor_ms else "")
                  + f", no failed request, SEND(wait) p99 < {SEND_WAIT_LIMIT_MS:.0f} ms, RSS peak <= bound "
                  f"(alone peak + {args.rss_slack_mib:g} MiB + {CONNECTION_BOUND_MIB:g} MiB per attacker connection "
                  f"+ {IDLE_BOUND_KIB:g} KiB per idle one)",
                  "# CPU% = relay (its in-process APNs simulator included), db CPU% = PostgreSQL, as % of one core "
                  "during the victim's rounds",
                  f"# victim rounds: HELLO on a fresh connection; {self.pings} PINGs, REGISTER (a new device), SEND to "
                  "one user, SEND(wait) to one device on one long-lived connection; the attacker's processes at "
                  f"niceness {ATTACKER_NICE}",
                  "# floods (the attacker's own credential, within the documented limits, RATE_LIMITED honoured): "
                  + "; ".join(f"{s.key} {s.what}" for s in specs), ""]
        lines = self.report(header) if self.phases else list(header)
        missed = [p for p in self.phases if not p.held]
        lines.append("")
        if self.recovery:
            lines.append(f"noisy-neighbour: {self.recovery}")
        lines.append(f"noisy-neighbour: {len(self.phases)} phases measured, {held_phases} held the target, "
                     f"{len(missed)} missed" + (f" ({', '.join(p.name for p in missed)})" if missed else ""))
        for error in self.harness_errors:
            lines.append(f"noisy-neighbour: HARNESS ERROR: {error}")
        if self.relay_dead:
            lines.append(f"noisy-neighbour: RELAY FAILURE: {self.relay_dead}")
        say("")
        for line in lines:
            say(line)
        if args.results:
            with open(args.results, "w") as handle:
                handle.write("\n".join(lines) + "\n")
            say(f"noisy-neighbour: written to {args.results}")
        if self.relay_dead or self.harness_errors:
            return 2
        if args.check and (missed or len(self.phases) < len(plan)):
            return 1
        return 0


def fmt_ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value >= 1000:
        return f"{value / 1000:.1f}s"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}"


def fmt_ratio(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return "inf"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="host:port of the relay")
    parser.add_argument("--relay-pid", type=int, default=0, help="the relay's pid (RSS, CPU, liveness)")
    parser.add_argument("--pg-pid-file", default="", help="the embedded PostgreSQL's postmaster.pid (its CPU)")
    parser.add_argument("--psql", default="", help="psql connection string of the relay's database (the drain)")
    parser.add_argument("--victim-tenant", default="familyportal")
    parser.add_argument("--victim-credential", default="")
    parser.add_argument("--attacker-tenant", default="circl")
    parser.add_argument("--attacker-credential", required=True)
    parser.add_argument("--users-prefix", default="nn-u", help="the attacker's users: PREFIX00000 ... (one device each)")
    parser.add_argument("--users", type=int, default=10000)
    parser.add_argument("--pool", type=int, default=128, help="victim users SEND goes to (one device each)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and shorter phases (CI's log)")
    parser.add_argument("--rounds", type=int, default=0, help="victim rounds per phase (default 15 quick, 300 full)")
    parser.add_argument("--pings", type=int, default=0, help="victim PINGs per round (default 3 quick, 5 full)")
    parser.add_argument("--window", type=float, default=0, help="seconds of rounds per phase (default 8 / 40)")
    parser.add_argument("--warmup", type=float, default=None, help="seconds between a flood's start and the rounds")
    parser.add_argument("--only", default="", help="comma-separated floods (a..i or names) after the alone phase")
    parser.add_argument("--ratio", type=float, default=3.0, help="target: p99 at most this times alone")
    parser.add_argument("--floor-ms", type=float, default=0.0, help="alone p99 taken as at least this (default 0)")
    parser.add_argument("--rss-slack-mib", type=float, default=32.0)
    parser.add_argument("--results", default="", help="also write the report to this file")
    parser.add_argument("--label", default="", help="what was measured (commit, build, machine), for the report")
    parser.add_argument("--check", action="store_true", help="exit 1 when a phase missed the target")
    parser.add_argument("--flood", default="", help=argparse.SUPPRESS)  # internal: run one flood (a child)
    parser.add_argument("--rate", type=float, default=1000.0, help=argparse.SUPPRESS)
    parser.add_argument("--burst", type=float, default=2000.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood:
        args.tenant, args.credential = args.attacker_tenant, args.attacker_credential
        return flood_main(args)
    if not args.victim_credential or not args.relay_pid:
        parser.error("--victim-credential and --relay-pid are required")
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Ops/scenarios/hostile_clients.py: hostile clients against a running `pushrelay serve` (Ops/scenarios/hostile-clients.sh runs it).

Every attack speaks frames over TCP with the installed pushrelay_client package's frames module (encode_frame for
honest frames, encode_header under the hand-made ones, FrameDecoder for what the relay sends; the bodies from its
pushrelay_pb2) and returns held / not held with a one-line detail;
after each attack the relay must still be up: its process alive and a fresh connection's HELLO + PING
answered. The rule for every attack: the relay answers with an ERROR frame of the stated code or a valid
answer, and never crashes.

  integer extremes   0, 1, -1, INT64_MIN/MAX, UINT32_MAX, UINT64_MAX (as the type allows; raw varints
                     beyond it), NaN/inf for doubles, in every integer field of every request kind
  control chars      NUL, LF, CR, ESC[31m, DEL in every string field of every request kind
  frames             reserved flags, wrong version, unknown kind, bodies that are not protobuf, empty
                     bodies, 1-byte writes, an oversized header, request id 0, GOODBYE with a bad body
  zstd liars         declared size 0 with data, skippable frames, declared size over the limit, no
                     declared size, garbage; the connection must answer a PING after each
  floods             100 MiB of PINGs after HELLO and 50 MiB before HELLO, never read: relay RSS growth,
                     a well-behaved client (its own credential) served meanwhile, the flooder's connection
                     closed, or after HELLO throttled: read only at its credential's request rate
  inflating bodies   pipelined SENDs and PINGs whose zstd bodies inflate to 4 MiB, from 160 bytes (refused for
                     their ratio) and within the ratio (charged, held to the per-connection budget); SENDs of
                     millions of empty loc_args: the answers, relay RSS growth and CPU seconds
  revoke             a credential revoked (admin CLI) while its connection is open
  log forging        newlines, ESC and `key=value` in HELLO's tenant and client_name; a credential sent as the tenant

A relay that dies is restarted (same `serve` arguments, --serve-args) so later attacks still run; every
death fails the run. At the end: every SEND answered SEND_OK must reach COMPLETED, FAILED or CANCELLED
within 60 s (sends deliberately scheduled far ahead are cancelled right after SEND_OK).

The last line is `hostile: N passed, N failed` (the attacks plus the final checks); the exit status is 0
only when every attack held, the relay never died, and every accepted job finished.

Arguments: see --help. Stdlib only, plus the pushrelay_client package (and its zstandard dependency, used to check
the hand-made zstd frames and to compress the bodies the package would not: those that inflate beyond the ratio).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import select
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import zstandard
from pushrelay_client import (
    FLAG_ZSTD,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    FrameError,
    FrameTooLarge,
    InvalidBody,
    Kind,
    encode_frame,
    encode_header,
)
from pushrelay_client import pushrelay_pb2 as pb

# --- constants ---------------------------------------------------------------------------------------

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
NEAR_FAR_MS = 9_300_000_000_000_000  # 9.3e15 ms: year ~296,000 (the earlier report's crash value)
MIB = 1024 * 1024

# The kinds, from the client package: its Kind is made from pushrelay.proto's FrameKind.
HELLO, PING, GOODBYE = Kind.HELLO, Kind.PING, Kind.GOODBYE
REGISTER_DEVICE, UNREGISTER_DEVICE, LIST_DEVICES = Kind.REGISTER_DEVICE, Kind.UNREGISTER_DEVICE, Kind.LIST_DEVICES
SEND, JOB_STATUS, QUERY_DELIVERIES, CANCEL_JOB = Kind.SEND, Kind.JOB_STATUS, Kind.QUERY_DELIVERIES, Kind.CANCEL_JOB
LIST_NOTIFICATION_TYPES = Kind.LIST_NOTIFICATION_TYPES
SET_PREFERENCES, GET_PREFERENCES, SET_MUTE, CLEAR_MUTE, LIST_MUTES, SET_PRESENCE = (
    Kind.SET_PREFERENCES, Kind.GET_PREFERENCES, Kind.SET_MUTE, Kind.CLEAR_MUTE, Kind.LIST_MUTES, Kind.SET_PRESENCE)
SUBSCRIBE_RESULTS, UNSUBSCRIBE_RESULTS = Kind.SUBSCRIBE_RESULTS, Kind.UNSUBSCRIBE_RESULTS
ERROR = Kind.ERROR

# Every request kind by its name as the relay's errors and metrics write it ("register_device").
KIND_NAMES = {kind: kind.name.lower() for kind in Kind if kind.is_request}
# Every request kind with a body type, in the order the frame attacks walk them (HELLO is pre-HELLO only).
REQUEST_KINDS = [k for k in KIND_NAMES if k not in (HELLO, GOODBYE)]

FINISHED_STATES = {pb.COMPLETED, pb.FAILED, pb.CANCELLED}

# Control characters of attack 2, each put inside an otherwise valid value.
CONTROL = [("NUL", "\x00"), ("LF", "\n"), ("CR", "\r"), ("ESC", "\x1b[31m"), ("DEL", "\x7f")]

FORGED_PREFIX = b"2026-01-01T00:00:00 critical"
# A quoted logfmt value: what it holds is one field's value, never a field.
QUOTED_VALUE = re.compile(rb'"(?:[^"\\]|\\.)*"')

VERBOSE = False  # --verbose: one line per case


def code_name(code: int) -> str:
    try:
        return pb.ErrorCode.Name(code)
    except ValueError:
        return f"code {code}"


def short(text, limit: int = 90) -> str:
    text = repr(text) if not isinstance(text, str) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def varint(value: int) -> bytes:
    """A protobuf varint of value (negative: two's complement in 64 bits, 10 bytes)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def raw_varint_field(number: int, value: int) -> bytes:
    """Field `number` as a varint of any 64-bit value (appended to a body: the last value of a field wins)."""
    return varint(number << 3) + varint(value)


# --- frames and a raw connection ---------------------------------------------------------------------


def frame(kind: int, rid: int, body: bytes = b"", flags: int = 0, version: int = PROTOCOL_VERSION,
          length: Optional[int] = None) -> bytes:
    """A hand-made frame: the package's header (any flags, version or declared length) before raw body bytes."""
    return encode_header(len(body) if length is None else length, kind, rid, flags=flags, version=version) + body


def body_of(message) -> bytes:
    return message if isinstance(message, (bytes, bytearray)) else message.SerializeToString(deterministic=True)


def request_frame(kind: int, rid: int, message, flags: int = 0, version: int = PROTOCOL_VERSION) -> bytes:
    """`message` (a protobuf message or raw body bytes) as a frame: the package's encode_frame when it is an honest
    frame (the kind's own message, no flags, this version), else made by hand (the same bytes encode_frame would
    write, for what it would refuse)."""
    if flags == 0 and version == PROTOCOL_VERSION and isinstance(message, MESSAGE_TYPES.get(kind, ())):
        return encode_frame(kind, rid, message)
    return frame(kind, rid, body_of(message), flags=flags, version=version)


def relay_decoder() -> FrameDecoder:
    """The package's decoder for what the relay sends; its limits are generous (64 MiB), as the relay's answers
    are not what is under test: a frame declaring more ends the connection (Closed)."""
    return FrameDecoder(max_frame_bytes=64 * MIB, max_decompressed_bytes=64 * MIB)


class Answer:
    """What a request got: ok (its answer kind), error (an ERROR frame), closed, timeout, or odd."""

    def __init__(self, status: str, kind: int = 0, rid: int = 0, msg=None, note: str = "") -> None:
        self.status, self.kind, self.rid, self.msg, self.note = status, kind, rid, msg, note

    @property
    def code(self) -> str:
        return code_name(self.msg.code) if self.status == "error" else ""

    def __str__(self) -> str:
        if self.status == "ok":
            return f"{KIND_NAMES.get(self.kind & 0x7FFF, hex(self.kind))}_ok"
        if self.status == "error":
            extra = f" field={self.msg.field!r}" if self.msg.field else ""
            return f"ERROR {self.code}{extra} ({short(self.msg.message, 70)})"
        return f"{self.status}{' (' + self.note + ')' if self.note else ''}"


class Closed(Exception):
    pass


class Conn:
    """One TCP connection speaking raw frames; reads only when asked."""

    def __init__(self, address: Tuple[str, int], timeout: float = 5.0, rcvbuf: int = 0, nodelay: bool = False) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        sock.connect(address)
        self.sock = sock
        self.address = address
        self.decoder = relay_decoder()
        self.next_rid = 1
        self.eof = False
        self.goodbye = False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def rid(self) -> int:
        rid = self.next_rid
        self.next_rid += 1
        return rid

    def send(self, data: bytes) -> None:
        self.sock.settimeout(10)
        try:
            self.sock.sendall(data)
        except (OSError, socket.timeout) as error:
            raise Closed(f"write failed: {error.__class__.__name__}") from None

    def read_frame(self, timeout: float):
        """The next frame the relay sent (the package's Frame, its body decompressed and parsed), or the FrameError
        of a frame the package's decoder refuses (its kind and request id are known); None after `timeout` s; Closed
        on EOF, reset, or a header declaring more than 64 MiB."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.decoder.next_frame()
            except FrameTooLarge as error:
                raise Closed(f"the relay sent a frame header declaring too much: {error}") from None
            except FrameError as error:
                return error
            if got is not None:
                return got
            if self.eof:
                raise Closed("connection closed by the relay")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(262144)
            except socket.timeout:
                return None
            except OSError as error:
                self.eof = True
                raise Closed(f"connection reset ({error.__class__.__name__})") from None
            if not data:
                self.eof = True
            else:
                self.decoder.feed(data)

    def wait_for(self, rid: int, request_kind: int, timeout: float) -> Answer:
        """The answer to request `rid` (or a connection-level ERROR with id 0)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.read_frame(max(0.0, deadline - time.monotonic()))
            except Closed as closed:
                return Answer("closed", note=str(closed))
            if got is None:
                return Answer("timeout", note=f"no answer within {timeout:g} s")
            kind, frid = got.kind, got.request_id
            expected = request_kind | 0x8000
            if isinstance(got, FrameError):
                if kind == ERROR and isinstance(got, InvalidBody) and frid in (rid, 0):
                    return Answer("odd", kind, frid, note="ERROR frame with an unparsable body")
                if frid != rid:
                    continue
                if kind == expected and isinstance(got, InvalidBody):
                    return Answer("odd", kind, frid, note="answer body does not parse")
                return Answer("odd", kind, frid, note=f"a frame the client package refuses: {got}")
            if kind == ERROR and (frid == rid or frid == 0):
                return Answer("error", kind, frid, got.message)
            if kind == GOODBYE and frid == 0:
                self.goodbye = True
                continue
            if frid != rid:
                continue  # another request's answer, a result event
            if kind != expected:
                return Answer("odd", kind, frid, note=f"answer kind {kind:#06x}, expected {expected:#06x}")
            return Answer("ok", kind, frid, got.message)

    def call(self, kind: int, message, rid: Optional[int] = None, timeout: float = 8.0, flags: int = 0,
             version: int = 1) -> Answer:
        rid = self.rid() if rid is None else rid
        try:
            self.send(request_frame(kind, rid, message, flags=flags, version=version))
        except Closed as closed:
            return Answer("closed", note=str(closed))
        return self.wait_for(rid, kind, timeout)

    def hello(self, tenant: str, credential: str, client_name: str = "hostile-clients", min_version: int = 1,
              max_version: int = 1, timeout: float = 10.0) -> Answer:
        hello = pb.Hello(min_version=min_version, max_version=max_version, tenant=tenant, credential=credential,
                         client_name=client_name)
        return self.call(HELLO, hello, timeout=timeout)

    def drained_until_eof(self, timeout: float) -> bool:
        """Reads (and drops) frames until EOF; True when the connection closed within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.read_frame(min(0.5, max(0.0, deadline - time.monotonic()))) is None:
                    continue
            except Closed:
                return True
        return False


# --- the relay: liveness, restarts, RSS ---------------------------------------------------------------


def proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def rss_kib(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def split_address(text: str) -> Tuple[str, int]:
    host, port = text.strip().rsplit(":", 1)
    return host.strip("[]"), int(port)


MAX_RESTARTS = 5
ATTACK_LIMIT = 60.0  # seconds of requests per case-list attack; the rest of its cases are skipped (not held)


class Relay:
    """The relay under attack: its pid, address and logs; restarts it when it died (at most MAX_RESTARTS
    times; after a failed restart it is `down` and the remaining attacks are skipped)."""

    def __init__(self, args) -> None:
        self.pid = args.relay_pid
        self.process: Optional[subprocess.Popen] = None  # set for a relay this script restarted
        self.address = split_address(args.address)
        self.logs = [args.relay_log]
        self.tenant = args.tenant
        self.credential = args.credential
        self.pid_file = args.pid_file
        self.serve_args: List[str] = []
        if args.serve_args:
            # NUL-separated: an argument may be empty (--metrics-listen "").
            with open(args.serve_args, "rb") as handle:
                self.serve_args = [a.decode() for a in handle.read().split(b"\0")[:-1]]
        self.deaths: List[str] = []
        self.generation = 1
        self.down = False
        self.lock = threading.Lock()

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return proc_state(self.pid) not in ("", "Z", "X")

    def healthy(self, timeout: float = 5.0) -> Tuple[bool, str]:
        """A fresh connection's HELLO + PING."""
        try:
            conn = Conn(self.address, timeout=timeout)
        except OSError as error:
            return False, f"connect failed: {error}"
        try:
            hello = conn.hello(self.tenant, self.credential, "hostile-health", timeout=timeout)
            if hello.status != "ok":
                return False, f"HELLO -> {hello}"
            nonce = random.getrandbits(63)
            pong = conn.call(PING, pb.Ping(nonce=nonce), timeout=timeout)
            if pong.status != "ok" or pong.msg.nonce != nonce:
                return False, f"PING -> {pong}"
            return True, "HELLO + PING answered"
        finally:
            conn.close()

    def crash_reason(self) -> str:
        """The exit status when known, and the most telling line at the end of the log (a Swift trap says
        `Fatal error`)."""
        status = ""
        if self.process is not None and self.process.poll() is not None:
            code = self.process.returncode
            status = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
        try:
            with open(self.logs[-1], "rb") as handle:
                handle.seek(max(0, os.path.getsize(self.logs[-1]) - 65536))
                lines = handle.read().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        line = ""
        for marker in ("Fatal error", "fatal error", "panic", "Segmentation", "Illegal instruction", "Killed",
                       "Error:"):
            hits = [text for text in lines if marker in text]
            if hits:
                line = hits[-1].strip()
                break
        if not line:
            line = f"no crash message; last log line: {lines[-1].strip() if lines else '(empty log)'}"
        return short(f"{status + '; ' if status else ''}{line}", 200)

    def ensure(self, during: str) -> Optional[str]:
        """None when the relay is up; otherwise records the death, restarts it and says what happened."""
        with self.lock:
            if self.down:
                return "the relay is down (not restarted)"
            if self.alive():
                ok, why = self.healthy()
                if ok:
                    return None
                # Alive but not answering: give it a moment (a flood may still be draining).
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and self.alive():
                    time.sleep(1)
                    ok, why = self.healthy()
                    if ok:
                        return None
                if self.alive():
                    reason = f"relay pid {self.pid} alive but not answering HELLO + PING for 15 s ({why}); killed"
                    try:
                        os.kill(self.pid, 9)
                    except OSError:
                        pass
                    time.sleep(0.5)
                else:
                    reason = f"relay pid {self.pid} died: {self.crash_reason()}"
            else:
                reason = f"relay pid {self.pid} died: {self.crash_reason()}"
            self.deaths.append(f"during {during}: {reason}")
            say(f"  !! {reason}")
            if len(self.deaths) > MAX_RESTARTS:
                self.down = True
                return reason + f"; not restarted (already restarted {MAX_RESTARTS} times)"
            restarted = self.restart()
            if not restarted:
                self.down = True
            return reason + ("; restarted" if restarted else "; RESTART FAILED (remaining attacks skipped)")

    def restart(self) -> bool:
        if not self.serve_args:
            say("  !! no --serve-args: cannot restart the relay")
            return False
        self.generation += 1
        folder = os.path.dirname(self.logs[0]) or "."
        ready = os.path.join(folder, f"ready-{self.generation}")
        log = os.path.join(folder, f"relay-{self.generation}.log")
        argv = list(self.serve_args)
        if "--ready-file" in argv:
            argv[argv.index("--ready-file") + 1] = ready
        else:
            argv += ["--ready-file", ready]
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.process = process
        self.pid = process.pid
        self.logs.append(log)
        if self.pid_file:
            with open(self.pid_file, "w") as handle:
                handle.write(f"{self.pid}\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                say(f"  !! the restarted relay exited at once: {self.crash_reason()} (log {log})")
                return False
            try:
                with open(ready) as handle:
                    text = handle.read().strip()
                if re.search(r":\d+$", text):
                    time.sleep(0.1)
                    with open(ready) as handle:
                        if handle.read().strip() == text:
                            self.address = split_address(text)
                            say(f"  .. relay restarted: pid {self.pid} at {text} (log {log})")
                            return True
            except OSError:
                pass
            time.sleep(0.1)
        say("  !! the restarted relay wrote no ready file within 60 s")
        return False

    def log_bytes(self) -> List[Tuple[str, bytes]]:
        out = []
        for path in self.logs:
            try:
                with open(path, "rb") as handle:
                    out.append((path, handle.read()))
            except OSError:
                pass
        return out


class Sampler(threading.Thread):
    """The relay's VmRSS every 100 ms: (monotonic time, pid, KiB)."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(daemon=True)
        self.relay = relay
        self.samples: List[Tuple[float, int, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            pid = self.relay.pid
            value = rss_kib(pid)
            if value is not None:
                self.samples.append((time.monotonic(), pid, value))
            self.stopping.wait(0.1)

    def now(self) -> Optional[int]:
        return rss_kib(self.relay.pid)

    def baseline(self, seconds: float = 0.6) -> int:
        """The median RSS of the current relay over the last `seconds` (sampled now if none)."""
        end = time.monotonic()
        values = [v for t, p, v in self.samples if t >= end - seconds and p == self.relay.pid]
        if not values:
            time.sleep(seconds)
            values = [v for t, p, v in self.samples if t >= end - 0.1 and p == self.relay.pid]
        return int(statistics.median(values)) if values else (self.now() or 0)

    def peak(self, start: float, end: Optional[float] = None, pid: Optional[int] = None) -> int:
        end = time.monotonic() if end is None else end
        values = [v for t, p, v in self.samples if start <= t <= end and (pid is None or p == pid)]
        return max(values) if values else 0


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


# --- the context shared by the attacks ---------------------------------------------------------------


def printable(text: str) -> str:
    """Control characters (a relay may echo ours back) as escapes: one report line stays one line."""
    return "".join(c if c >= " " and c != "\x7f" else repr(c)[1:-1] for c in text)


def say(text: str) -> None:
    print(printable(text), flush=True)


class Session:
    """A connection that says HELLO when needed and reconnects after a close; retries RATE_LIMITED."""

    def __init__(self, ctx: "Context", credential: Optional[str] = None, name: str = "hostile-clients") -> None:
        self.ctx = ctx
        self.credential = credential or ctx.args.credential
        self.name = name
        self.conn: Optional[Conn] = None

    def connect(self) -> Optional[Answer]:
        try:
            self.conn = Conn(self.ctx.relay.address)
        except OSError as error:
            self.conn = None
            return Answer("closed", note=f"connect failed: {error}")
        hello = self.conn.hello(self.ctx.args.tenant, self.credential, self.name)
        if hello.status != "ok":
            self.close()
            return hello
        return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, kind: int, message, timeout: float = 8.0, flags: int = 0) -> Answer:
        for _attempt in range(4):
            if self.conn is None:
                failed = self.connect()
                if failed is not None:
                    return Answer(failed.status if failed.status != "ok" else "closed", failed.kind, failed.rid,
                                  failed.msg, f"reconnect: {failed}")
            answer = self.conn.call(kind, message, timeout=timeout, flags=flags)
            if answer.status == "error" and answer.code == "RATE_LIMITED":
                time.sleep(min(2.0, max(0.05, answer.msg.retry_after_ms / 1000)))
                continue
            if answer.status in ("closed", "timeout", "odd") or (answer.status == "error" and answer.rid == 0):
                self.close()
            return answer
        return answer


class Context:
    def __init__(self, args) -> None:
        self.args = args
        self.relay = Relay(args)
        self.sampler = Sampler(self.relay)
        self.jobs: List[Dict] = []  # every SEND answered SEND_OK: job_id, label
        self.token1 = "".join(random.choice("0123456789abcdef") for _ in range(64))
        self.token2 = "".join(random.choice("0123456789abcdef") for _ in range(64))
        self.session = Session(self)
        self.stall_timeout = args.write_stall_timeout if args.write_stall_timeout > 0 else 5
        self.max_frame_bytes = 1_048_576
        self.max_decompressed_bytes = 4_194_304
        self.attack_deadline = time.monotonic() + ATTACK_LIMIT  # set again for each attack

    def track_send(self, label: str, answer: Answer, send_at_ms: int = 0) -> Optional[str]:
        """Records a SEND_OK's job; cancels it when it was scheduled far ahead. Returns a problem or None."""
        job_id = answer.msg.job_id
        if not job_id:
            return "SEND_OK without a job id"
        self.jobs.append({"job_id": job_id, "label": label})
        if send_at_ms > int(time.time() * 1000) + 30_000:
            cancel = self.session.call(CANCEL_JOB, pb.CancelJob(job_id=job_id))
            if cancel.status != "ok":
                return f"accepted (job {job_id[:8]}…), scheduled far ahead; CANCEL_JOB -> {cancel}"
        return None


# --- judging answers ---------------------------------------------------------------------------------


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def field_matches(field: str, names: Sequence[str]) -> bool:
    got = norm(field)
    return bool(got) and any(norm(name) in got for name in names if name)


def judge(answer: Answer, request_kind: int, *, ok: bool = True, codes: Sequence[str] = (),
          fields: Sequence[str] = (), ok_check: Optional[Callable[[Answer], Optional[str]]] = None) -> Tuple[bool, str]:
    """held?, what happened. `ok`: a valid answer is allowed; `codes`: the ERROR codes allowed; `fields`: with
    INVALID_ARGUMENT, `field` must name one of these."""
    if answer.status == "ok":
        if not ok:
            return False, f"accepted ({answer})"
        if ok_check is not None:
            problem = ok_check(answer)
            if problem:
                return False, problem
        return True, str(answer)
    if answer.status == "error" and answer.code in codes:
        if answer.code == "INVALID_ARGUMENT" and fields and not field_matches(answer.msg.field, fields):
            return False, f"INVALID_ARGUMENT names field {answer.msg.field!r}, not {'/'.join(fields)}"
        return True, str(answer)
    return False, str(answer)


class Tally:
    """The cases of one attack: counts and the first few not held."""

    def __init__(self) -> None:
        self.total = 0
        self.bad: List[str] = []
        self.notes: List[str] = []

    def add(self, held: bool, label: str, text: str) -> None:
        if VERBOSE:
            say(f"    case {label}: {'held' if held else 'NOT HELD'} -> {text}")
        self.total += 1
        if not held:
            self.bad.append(f"{label} -> {text}")

    def result(self, what: str = "cases") -> Tuple[bool, str]:
        notes = ("; " + "; ".join(self.notes)) if self.notes else ""
        if not self.bad:
            return True, f"{self.total} {what}, all held{notes}"
        shown = "; ".join(self.bad[:4])
        more = f"; +{len(self.bad) - 4} more" if len(self.bad) > 4 else ""
        return False, f"{len(self.bad)}/{self.total} {what} not held: {shown}{more}{notes}"


def after_failure(ctx: Context, tally: Tally, label: str, answer: Answer) -> None:
    """After a case lost its connection: was it the relay dying? Then restart it and say so."""
    if answer.status in ("closed", "timeout", "odd"):
        died = ctx.relay.ensure(label)
        if died:
            tally.notes.append(f"{label} killed the relay ({died})")


def run_cases(ctx: Context, tally: Tally, cases) -> None:
    """cases: (label, kind, body, judge kwargs, send_at_ms or None). Sends each on the shared session; every
    SEND_OK's job is tracked (also one accepted where a refusal was expected)."""
    for index, (label, kind, body, expect, send_at) in enumerate(cases):
        if time.monotonic() > ctx.attack_deadline:
            tally.add(False, f"{len(cases) - index} remaining cases", f"skipped: the attack's {ATTACK_LIMIT:g}s limit")
            break
        answer = ctx.session.call(kind, body)
        problem = None
        if kind == SEND and answer.status == "ok":
            problem = ctx.track_send(label, answer, send_at or 0)
        check = expect.pop("ok_check", None)

        def ok_check(ans: Answer, problem=problem, check=check) -> Optional[str]:
            return problem or (check(ans) if check is not None else None)

        held, text = judge(answer, kind, ok_check=ok_check, **expect)
        tally.add(held, label, text)
        if not held:
            after_failure(ctx, tally, label, answer)


# --- base messages -----------------------------------------------------------------------------------

USER1, USER_OK, USER3 = "hostile-u1", "ok-user", "hostile-u3"
TEMPLATE = {"circle_id": "1", "channel_id": "2"}


def base_send(ctx: Context) -> pb.Send:
    send = pb.Send(notification_type="message", user_ids=[USER1], alert=pb.Alert(title="hostile", body="clients"))
    for key, value in TEMPLATE.items():
        send.template_values[key] = value
    return send


def base_register(ctx: Context) -> pb.RegisterDevice:
    return pb.RegisterDevice(user_id="hostile-u2", token=ctx.token2, platform="ios", environment=pb.PRODUCTION,
                             device_id="dev-1", app_version="1.0", locale="de-CH", time_zone="Europe/Zurich")


# --- 1. integer extremes -----------------------------------------------------------------------------

I64_VALUES = [("0", 0), ("1", 1), ("-1", -1), ("INT64_MIN", INT64_MIN), ("INT64_MAX", INT64_MAX),
              ("UINT32_MAX", UINT32_MAX)]
U32_VALUES = [("0", 0), ("1", 1), ("UINT32_MAX", UINT32_MAX)]
DOUBLE_VALUES = [("NaN", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("-1", -1.0), ("2", 2.0), ("0", 0.0),
                 ("1", 1.0), ("0.5", 0.5), ("-0.0", -0.0), ("5e-324", 5e-324), ("1.8e308", 1.8e308)]


def with_raw(message, number: int, value: int) -> bytes:
    return body_of(message) + raw_varint_field(number, value)


def attack_int_crash_frames(ctx: Context) -> Tuple[bool, str]:
    """The crash frames of the earlier report, each on the shared session."""
    tally = Tally()
    cases = []
    for name, value in [("INT64_MAX", INT64_MAX), ("INT64_MIN", INT64_MIN), ("9.3e15", NEAR_FAR_MS)]:
        cases.append((f"set_mute.until_ms={name}", SET_MUTE,
                      pb.SetMute(user_id=USER3, thread_id="th-1", until_ms=value),
                      dict(codes=["INVALID_ARGUMENT"], fields=["until_ms"]), None))
    for name, value in [("INT64_MAX", INT64_MAX), ("INT64_MIN", INT64_MIN)]:
        send = base_send(ctx)
        send.send_at_ms = value
        cases.append((f"send.send_at_ms={name}", SEND, send, dict(codes=["INVALID_ARGUMENT"], fields=["send_at_ms"]),
                      value))
    cases.append(("query_deliveries from_ms=0 to_ms=INT64_MAX", QUERY_DELIVERIES,
                  pb.QueryDeliveries(from_ms=0, to_ms=INT64_MAX), dict(codes=[]), None))  # must be a DeliveryList
    run_cases(ctx, tally, cases)
    return tally.result("frames")


def attack_int_send(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    cases = []
    expect = lambda field: dict(codes=["INVALID_ARGUMENT"], fields=[field])  # noqa: E731
    for name, value in U32_VALUES:
        send = base_send(ctx)
        send.badge = value
        cases.append((f"send.badge={name}", SEND, send, expect("badge"), None))
    cases.append(("send.badge=UINT64_MAX(raw)", SEND, with_raw(base_send(ctx), 8, UINT64_MAX), expect("badge"), None))
    for name, value in I64_VALUES:
        send = base_send(ctx)
        send.expiration = value
        cases.append((f"send.expiration={name}", SEND, send, expect("expiration"), None))
    for name, value in U32_VALUES + [("5", 5), ("10", 10)]:
        send = base_send(ctx)
        send.priority = value
        cases.append((f"send.priority={name}", SEND, send, expect("priority"), None))
    cases.append(("send.priority=UINT64_MAX(raw)", SEND, with_raw(base_send(ctx), 20, UINT64_MAX), expect("priority"),
                  None))
    for name, value in I64_VALUES + [("9.3e15", NEAR_FAR_MS)]:
        send = base_send(ctx)
        send.send_at_ms = value
        cases.append((f"send.send_at_ms={name}", SEND, send, expect("send_at_ms"), value))
    for name, value in DOUBLE_VALUES:
        send = base_send(ctx)
        send.relevance_score = value
        cases.append((f"send.relevance_score={name}", SEND, send, expect("relevance_score"), None))
    run_cases(ctx, tally, cases)
    return tally.result("sends")


def attack_int_set_mute(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    now_ms = int(time.time() * 1000)
    cases = []
    for name, value in I64_VALUES + [("9.3e15", NEAR_FAR_MS), ("now+60s", now_ms + 60_000)]:
        cases.append((f"set_mute.until_ms={name}", SET_MUTE,
                      pb.SetMute(user_id=USER3, thread_id="th-1", until_ms=value),
                      dict(codes=["INVALID_ARGUMENT"], fields=["until_ms"]), None))
        cases.append((f"set_mute(scope).until_ms={name}", SET_MUTE,
                      pb.SetMute(user_id=USER3, scope="scope-1", until_ms=value),
                      dict(codes=["INVALID_ARGUMENT"], fields=["until_ms"]), None))
    run_cases(ctx, tally, cases)
    cleared = ctx.session.call(LIST_MUTES, pb.ListMutes(user_id=USER3))
    held, text = judge(cleared, LIST_MUTES)
    tally.add(held, "list_mutes after the extremes", text)
    return tally.result("frames")


def attack_int_query_deliveries(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    cases = []
    range_fields = ["from_ms", "to_ms"]
    for name, value in I64_VALUES:
        cases.append((f"query_deliveries from_ms={name} to_ms=INT64_MAX", QUERY_DELIVERIES,
                       pb.QueryDeliveries(from_ms=value, to_ms=INT64_MAX),
                       dict(codes=["INVALID_ARGUMENT"], fields=range_fields), None))
        if value != 0:
            cases.append((f"query_deliveries from_ms=0 to_ms={name}", QUERY_DELIVERIES,
                           pb.QueryDeliveries(from_ms=0, to_ms=value),
                           dict(codes=["INVALID_ARGUMENT"], fields=range_fields), None))
    cases.append(("query_deliveries from_ms=INT64_MAX to_ms=INT64_MIN", QUERY_DELIVERIES,
                  pb.QueryDeliveries(from_ms=INT64_MAX, to_ms=INT64_MIN),
                  dict(codes=["INVALID_ARGUMENT"], fields=range_fields), None))
    cases.append(("query_deliveries from_ms=INT64_MIN to_ms=INT64_MAX limit=UINT32_MAX", QUERY_DELIVERIES,
                  pb.QueryDeliveries(from_ms=INT64_MIN, to_ms=INT64_MAX, limit=UINT32_MAX),
                  dict(codes=["INVALID_ARGUMENT"], fields=range_fields + ["limit"]), None))

    def at_most_1000(answer: Answer) -> Optional[str]:
        count = len(answer.msg.deliveries)
        return None if count <= 1000 else f"{count} deliveries, over the documented 1000"

    for name, value in U32_VALUES + [("1000", 1000), ("1001", 1001)]:
        cases.append((f"query_deliveries user_id limit={name}", QUERY_DELIVERIES,
                       pb.QueryDeliveries(user_id=USER1, limit=value),
                       dict(codes=["INVALID_ARGUMENT"], fields=["limit"], ok_check=at_most_1000), None))
    cases.append(("query_deliveries user_id limit=UINT64_MAX(raw)", QUERY_DELIVERIES,
                  with_raw(pb.QueryDeliveries(user_id=USER1), 6, UINT64_MAX),
                  dict(codes=["INVALID_ARGUMENT"], fields=["limit"], ok_check=at_most_1000), None))
    run_cases(ctx, tally, cases)
    return tally.result("queries")


def attack_int_small_kinds(ctx: Context) -> Tuple[bool, str]:
    """PING nonce, SET_PRESENCE seconds, UNSUBSCRIBE_RESULTS id, REGISTER_DEVICE environment."""
    tally = Tally()
    cases = []
    for name, value in [("0", 0), ("1", 1), ("UINT32_MAX", UINT32_MAX), ("INT64_MAX", INT64_MAX),
                        ("UINT64_MAX", UINT64_MAX)]:
        def echo(answer: Answer, value=value) -> Optional[str]:
            return None if answer.msg.nonce == value else f"PONG nonce {answer.msg.nonce}, sent {value}"
        cases.append((f"ping.nonce={name}", PING, pb.Ping(nonce=value), dict(codes=[], ok_check=echo), None))
    cases.append(("ping.nonce=-1(raw 10-byte varint)", PING, raw_varint_field(1, -1),
                  dict(codes=[], ok_check=lambda a: None if a.msg.nonce == UINT64_MAX else f"nonce {a.msg.nonce}"),
                  None))
    for name, value in U32_VALUES + [("60", 60)]:
        cases.append((f"set_presence.seconds={name}", SET_PRESENCE,
                      pb.SetPresence(user_id=USER3, thread_id="th-1", seconds=value),
                      dict(codes=["INVALID_ARGUMENT"], fields=["seconds"]), None))
    cases.append(("set_presence.seconds=UINT64_MAX(raw)", SET_PRESENCE,
                  with_raw(pb.SetPresence(user_id=USER3, thread_id="th-1"), 3, UINT64_MAX),
                  dict(codes=["INVALID_ARGUMENT"], fields=["seconds"]), None))
    for name, value in U32_VALUES:
        cases.append((f"unsubscribe_results.subscription_request_id={name}", UNSUBSCRIBE_RESULTS,
                      pb.UnsubscribeResults(subscription_request_id=value),
                      dict(codes=["INVALID_ARGUMENT", "NOT_FOUND"], fields=["subscription_request_id"]), None))
    cases.append(("unsubscribe_results.subscription_request_id=UINT64_MAX(raw)", UNSUBSCRIBE_RESULTS,
                  raw_varint_field(1, UINT64_MAX),
                  dict(codes=["INVALID_ARGUMENT", "NOT_FOUND"], fields=["subscription_request_id"]), None))
    for name, value in [("0", 0), ("1", 1), ("2", 2), ("3", 3), ("-1", -1), ("INT32_MAX", INT32_MAX),
                        ("INT32_MIN", INT32_MIN)]:
        body = body_of(base_register(ctx)) + raw_varint_field(4, value)
        cases.append((f"register_device.environment={name}", REGISTER_DEVICE, body,
                      dict(codes=["INVALID_ARGUMENT"], fields=["environment"]), None))
    # A last valid registration, so hostile-u2's device is sane again.
    cases.append(("register_device (valid again)", REGISTER_DEVICE, base_register(ctx), dict(codes=[]), None))
    run_cases(ctx, tally, cases)
    return tally.result("frames")


def attack_int_hello(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    ranges = [(0, 0), (0, 1), (1, 1), (1, UINT32_MAX), (0, UINT32_MAX), (UINT32_MAX, UINT32_MAX), (UINT32_MAX, 1),
              (2, 1), (2, 2), (UINT32_MAX, 0)]
    cases = [(f"hello {lo}..{hi}", body_of(pb.Hello(min_version=lo, max_version=hi, tenant=ctx.args.tenant,
                                                      credential=ctx.args.credential)), lo <= 1 <= hi)
             for lo, hi in ranges]
    cases.append(("hello 1..UINT64_MAX(raw)", body_of(pb.Hello(min_version=1, tenant=ctx.args.tenant,
                                                               credential=ctx.args.credential))
                  + raw_varint_field(2, UINT64_MAX), True))
    for label, body, speaks_1 in cases:
        try:
            conn = Conn(ctx.relay.address)
        except OSError as error:
            tally.add(False, label, f"connect failed: {error}")
            continue
        answer = conn.call(HELLO, body)
        if speaks_1:
            held, text = judge(answer, HELLO, codes=["INVALID_ARGUMENT"], fields=["version"],
                               ok_check=lambda a: None if a.msg.version == 1 else f"HELLO_OK version {a.msg.version}")
        else:
            held, text = judge(answer, HELLO, ok=False, codes=["UNSUPPORTED_VERSION", "INVALID_ARGUMENT"],
                               fields=["version"])
        tally.add(held, label, text)
        conn.close()
        if not held:
            after_failure(ctx, tally, label, answer)
    return tally.result("HELLOs")


# --- 2. control characters in strings ----------------------------------------------------------------


def ctl_cases(ctx: Context, bad: str, tag: str):
    """(label, kind, message, mode, fields): mode strict (INVALID_ARGUMENT only), text (also accepted), id
    (INVALID_ARGUMENT or NOT_FOUND)."""
    v = lambda base, cut=None: base[:cut] + bad + base[cut:] if cut is not None else base + bad + "x"  # noqa: E731
    out = []

    def add(label, kind, message, mode="strict", fields=None):
        out.append((f"{label}={tag}", kind, message, mode, fields or [label.rsplit(".", 1)[-1].split("[")[0]]))

    for field, value in [("user_id", v("hostile-u2")), ("token", v(ctx.token2, 32)), ("platform", v("i", 1)),
                         ("device_id", v("dev-1")), ("app_version", v("1.0")), ("locale", v("de-CH", 2)),
                         ("time_zone", v("Europe/Zurich", 7))]:
        message = base_register(ctx)
        setattr(message, field, value)
        add(f"register_device.{field}", REGISTER_DEVICE, message)
    message = base_register(ctx)
    message.topics.append(v("chat"))
    add("register_device.topics[0]", REGISTER_DEVICE, message)

    add("unregister_device.token", UNREGISTER_DEVICE, pb.UnregisterDevice(token=v(ctx.token2, 32)))
    add("unregister_device.user_id", UNREGISTER_DEVICE,
        pb.UnregisterDevice(user_id=v("hostile-nobody"), platform="ios"))
    add("unregister_device.platform", UNREGISTER_DEVICE,
        pb.UnregisterDevice(user_id="hostile-nobody", platform=v("i", 1)))
    add("list_devices.user_id", LIST_DEVICES, pb.ListDevices(user_id=v(USER1)))

    def send_with(mutate) -> pb.Send:
        send = base_send(ctx)
        mutate(send)
        return send

    for field, value in [("notification_type", v("mess", 4)), ("idempotency_key", v("hostile-key")),
                         ("sound", v("default")), ("thread_id", v("thread")), ("category", v("cat")),
                         ("interruption_level", v("active", 3)), ("collapse_id", v("coll")), ("scope", v("scope")),
                         ("send_at_local", v("2030-11-22T00:00", 10))]:
        add(f"send.{field}", SEND, send_with(lambda s, f=field, x=value: setattr(s, f, x)))
    add("send.user_ids[0]", SEND, send_with(lambda s: s.user_ids.__setitem__(0, v(USER1))))
    add("send.exclude_user_ids[0]", SEND, send_with(lambda s: s.exclude_user_ids.append(v("other"))))
    add("send.template_values[value]", SEND, send_with(lambda s: s.template_values.__setitem__("circle_id", v("1"))),
        fields=["template_values", "circle_id"])
    add("send.template_values[key]", SEND, send_with(lambda s: s.template_values.__setitem__(v("extra"), "1")),
        fields=["template_values"])

    def to_topic(s):
        del s.user_ids[:]
        s.topic = v("chat")

    def to_token(s):
        del s.user_ids[:]
        s.tokens.add(token=v(ctx.token1, 32))

    add("send.topic", SEND, send_with(to_topic))
    add("send.tokens[0].token", SEND, send_with(to_token), fields=["tokens", "token"])
    add("send.custom_json", SEND, send_with(lambda s: setattr(s, "custom_json", '{"k":"' + v("a") + '"}')),
        mode="text")
    for field in ("title", "subtitle", "body", "launch_image", "title_loc_key", "subtitle_loc_key", "loc_key"):
        add(f"send.alert.{field}", SEND, send_with(lambda s, f=field: setattr(s.alert, f, v("text"))), mode="text")
    for field in ("title_loc_args", "subtitle_loc_args", "loc_args"):
        add(f"send.alert.{field}[0]", SEND, send_with(lambda s, f=field: getattr(s.alert, f).append(v("arg"))),
            mode="text")

    add("job_status.job_id", JOB_STATUS, pb.JobStatus(job_id=v("01890000-0000-7000-8000-000000000000", 8)), mode="id")
    add("cancel_job.job_id", CANCEL_JOB, pb.CancelJob(job_id=v("01890000-0000-7000-8000-000000000000", 8)), mode="id")
    add("query_deliveries.job_id", QUERY_DELIVERIES,
        pb.QueryDeliveries(job_id=v("01890000-0000-7000-8000-000000000000", 8)), mode="id")
    add("query_deliveries.user_id", QUERY_DELIVERIES, pb.QueryDeliveries(user_id=v(USER1)))
    add("query_deliveries.token", QUERY_DELIVERIES, pb.QueryDeliveries(token=v(ctx.token1, 32)))
    add("set_preferences.user_id", SET_PREFERENCES,
        pb.SetPreferences(user_id=v(USER3), preferences=[pb.TypePreference(notification_type="message", enabled=True)]))
    add("set_preferences.preferences[0].notification_type", SET_PREFERENCES,
        pb.SetPreferences(user_id=USER3,
                          preferences=[pb.TypePreference(notification_type=v("mess", 4), enabled=False)]),
        fields=["preferences", "notification_type"])
    add("get_preferences.user_id", GET_PREFERENCES, pb.GetPreferences(user_id=v(USER3)))
    add("set_mute.user_id", SET_MUTE, pb.SetMute(user_id=v(USER3), thread_id="th-1"))
    add("set_mute.thread_id", SET_MUTE, pb.SetMute(user_id=USER3, thread_id=v("th-1")))
    add("set_mute.scope", SET_MUTE, pb.SetMute(user_id=USER3, scope=v("scope-1")))
    add("clear_mute.user_id", CLEAR_MUTE, pb.ClearMute(user_id=v(USER3), thread_id="th-1"))
    add("clear_mute.thread_id", CLEAR_MUTE, pb.ClearMute(user_id=USER3, thread_id=v("th-1")))
    add("clear_mute.scope", CLEAR_MUTE, pb.ClearMute(user_id=USER3, scope=v("scope-1")))
    add("list_mutes.user_id", LIST_MUTES, pb.ListMutes(user_id=v(USER3)))
    add("set_presence.user_id", SET_PRESENCE, pb.SetPresence(user_id=v(USER3), thread_id="th-1", seconds=30))
    add("set_presence.thread_id", SET_PRESENCE, pb.SetPresence(user_id=USER3, thread_id=v("th-1"), seconds=30))
    return out


CTL_GROUPS = {
    "devices": (REGISTER_DEVICE, UNREGISTER_DEVICE, LIST_DEVICES),
    "send": (SEND,),
    "jobs-deliveries": (JOB_STATUS, CANCEL_JOB, QUERY_DELIVERIES),
    "policy": (SET_PREFERENCES, GET_PREFERENCES, SET_MUTE, CLEAR_MUTE, LIST_MUTES, SET_PRESENCE),
}


def attack_ctl(group: str):
    kinds = CTL_GROUPS[group]

    def attack(ctx: Context) -> Tuple[bool, str]:
        tally = Tally()
        cases = []
        for tag, bad in CONTROL:
            for label, kind, message, mode, fields in ctl_cases(ctx, bad, tag):
                if kind not in kinds:
                    continue
                codes = ["INVALID_ARGUMENT"] + (["NOT_FOUND"] if mode == "id" else [])
                cases.append((label, kind, message, dict(ok=(mode == "text"), codes=codes, fields=fields), None))
        run_cases(ctx, tally, cases)
        return tally.result("frames")

    return attack


def attack_ctl_hello(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    for tag, bad in CONTROL:
        for field in ("tenant", "credential", "client_name"):
            hello = pb.Hello(min_version=1, max_version=1, tenant=ctx.args.tenant, credential=ctx.args.credential,
                             client_name="hostile-ctl")
            value = getattr(hello, field)
            cut = len(value) // 2
            setattr(hello, field, value[:cut] + bad + value[cut:])
            label = f"hello.{field}={tag}"
            try:
                conn = Conn(ctx.relay.address)
            except OSError as error:
                tally.add(False, label, f"connect failed: {error}")
                continue
            answer = conn.call(HELLO, hello)
            if field == "client_name":  # free text for the logs: accepted (and logged safely) or refused
                held, text = judge(answer, HELLO, codes=["INVALID_ARGUMENT"], fields=["client_name"])
            else:
                held, text = judge(answer, HELLO, ok=False, codes=["AUTHENTICATION_FAILED", "INVALID_ARGUMENT"],
                                   fields=[field])
            tally.add(held, label, text)
            conn.close()
            if not held:
                after_failure(ctx, tally, label, answer)
    return tally.result("HELLOs")


def attack_ctl_goodbye(ctx: Context) -> Tuple[bool, str]:
    """GOODBYE with control characters in its reason: refused INVALID_ARGUMENT and then the connection closes (a
    GOODBYE closes even when refused, Protocol/README.md), or taken (closed at once); nothing else, no silence."""
    tally = Tally()
    for tag, bad in CONTROL:
        label = f"goodbye.reason={tag}"
        session = Session(ctx, name="hostile-goodbye")
        failed = session.connect()
        if failed is not None:
            tally.add(False, label, f"HELLO -> {failed}")
            continue
        conn = session.conn
        rid = conn.rid()
        held, outcome = False, "no answer and still open 5 s after GOODBYE"
        try:
            conn.send(encode_frame(GOODBYE, rid, pb.Goodbye(reason="bye" + bad + "x")))
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                got = conn.read_frame(max(0.0, deadline - time.monotonic()))
                if got is None:
                    break
                if isinstance(got, Frame) and got.kind == ERROR and got.request_id in (rid, 0):
                    error = got.message
                    outcome = f"ERROR {code_name(error.code)}"
                    if code_name(error.code) == "INVALID_ARGUMENT":
                        closed, why = closes_soon(conn)
                        held = closed
                        outcome = f"refused INVALID_ARGUMENT, {why if why else 'then closed'}"
                    break
        except Closed:
            held, outcome = True, "taken: connection closed"
        tally.add(held, label, outcome)
        session.close()
    return tally.result("GOODBYEs")


def attack_ctl_send_mixed(ctx: Context) -> Tuple[bool, str]:
    """SEND to ["nul\\x00x", "ok-user"]: refused INVALID_ARGUMENT, or accepted and its job COMPLETED."""
    send = base_send(ctx)
    del send.user_ids[:]
    send.user_ids.extend(["nul\x00x", USER_OK])
    answer = ctx.session.call(SEND, send)
    if answer.status == "error" and answer.code == "INVALID_ARGUMENT":
        if not field_matches(answer.msg.field, ["user_ids"]):
            return False, f"INVALID_ARGUMENT names field {answer.msg.field!r}, not user_ids"
        return True, f"refused: {answer}"
    if answer.status != "ok":
        tally = Tally()
        after_failure(ctx, tally, "send mixed", answer)
        return False, f"{answer}{'; ' + '; '.join(tally.notes) if tally.notes else ''}"
    problem = ctx.track_send("send mixed nul user", answer)
    if problem:
        return False, problem
    job_id = answer.msg.job_id
    deadline = time.monotonic() + 30
    state = None
    while time.monotonic() < deadline:
        status = ctx.session.call(JOB_STATUS, pb.JobStatus(job_id=job_id))
        if status.status == "ok":
            state = status.msg.state
            if state in FINISHED_STATES:
                break
        time.sleep(0.5)
    name = pb.JobState.Name(state) if state is not None else "unknown"
    if state == pb.COMPLETED:
        return True, f"accepted, job {job_id[:8]}… COMPLETED"
    return False, f"accepted, job {job_id[:8]}… ended {name}, not COMPLETED"


# --- 3. malformed frames -----------------------------------------------------------------------------


def fresh(ctx: Context, hello: bool = True, **kw) -> Conn:
    conn = Conn(ctx.relay.address, **kw)
    if hello:
        answer = conn.hello(ctx.args.tenant, ctx.args.credential, "hostile-frames")
        if answer.status != "ok":
            conn.close()
            raise Closed(f"HELLO -> {answer}")
    return conn


def closes_soon(conn: Conn, seconds: float = 5) -> Tuple[bool, str]:
    """Whether the relay closes the connection within `seconds` (frames before the close are read and dropped)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if conn.read_frame(max(0.0, deadline - time.monotonic())) is None:
                break
    except Closed:
        return True, ""
    return False, f"still open {seconds:g} s later"


def still_usable(conn: Conn) -> Tuple[bool, str]:
    nonce = random.getrandbits(62)
    answer = conn.call(PING, pb.Ping(nonce=nonce), timeout=5)
    if answer.status == "ok" and answer.msg.nonce == nonce:
        return True, ""
    return False, f"then PING -> {answer}"


def raw_case(ctx: Context, tally: Tally, conn: Conn, label: str, data: bytes, rid: int, kind: int, codes: Sequence[str],
             ok: bool = False, usable_after: bool = True) -> Conn:
    """Writes raw bytes, expects an ERROR of `codes` (or a valid answer when ok) for `rid`, then a PONG."""
    try:
        conn.send(data)
        answer = conn.wait_for(rid, kind, 8)
    except Closed as closed:
        answer = Answer("closed", note=str(closed))
    if kind == SEND and answer.status == "ok":
        ctx.track_send(label, answer)
    held, text = judge(answer, kind, ok=ok, codes=codes)
    if held and usable_after:
        usable, why = still_usable(conn)
        if not usable:
            held, text = False, f"{text}, {why}"
    tally.add(held, label, text)
    if not held:
        after_failure(ctx, tally, label, answer)
        conn.close()
        conn = fresh(ctx)
    return conn


def attack_reserved_flags(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    for flags in (0x02, 0x04, 0x80, 0xFE, 0x03, 0xFF):
        rid = conn.rid()
        conn = raw_case(ctx, tally, conn, f"ping flags={flags:#04x}", request_frame(PING, rid, pb.Ping(nonce=1),
                        flags=flags), rid, PING, ["BAD_FRAME"])
    conn.close()
    conn = fresh(ctx, hello=False)
    conn = raw_case(ctx, tally, conn, "hello flags=0x40 (before HELLO)",
                    request_frame(HELLO, 1, pb.Hello(min_version=1, max_version=1, tenant=ctx.args.tenant,
                                                     credential=ctx.args.credential), flags=0x40),
                    1, HELLO, ["BAD_FRAME"], usable_after=False)
    conn.close()
    return tally.result("frames")


def attack_wrong_version(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    for version in (0, 2, 0x7F, 0xFF):
        rid = conn.rid()
        conn = raw_case(ctx, tally, conn, f"ping version={version}", request_frame(PING, rid, pb.Ping(nonce=1),
                        version=version), rid, PING, ["UNSUPPORTED_VERSION"])
    conn.close()
    # Before HELLO: a HELLO frame of version 2 is refused and skipped; a proper HELLO still works after it.
    conn = fresh(ctx, hello=False)
    hello = pb.Hello(min_version=1, max_version=2, tenant=ctx.args.tenant, credential=ctx.args.credential)
    try:
        conn.send(request_frame(HELLO, 1, hello, version=2))
        answer = conn.wait_for(1, HELLO, 8)
    except Closed as closed:
        answer = Answer("closed", note=str(closed))
    held, text = judge(answer, HELLO, ok=False, codes=["UNSUPPORTED_VERSION"])
    if held:
        again = conn.hello(ctx.args.tenant, ctx.args.credential)
        if again.status != "ok":
            held, text = False, f"{text}, then a version-1 HELLO -> {again}"
    tally.add(held, "hello frame version=2 (before HELLO)", text)
    conn.close()
    return tally.result("frames")


def attack_unknown_kind(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    for kind in (0x0000, 0x0004, 0x0013, 0x0042, 0x3FFF, 0x4000, 0x4040, 0x7FFF, 0x8002, 0x8020, 0xFFFE,
                 0xFFFF):
        rid = conn.rid()
        conn = raw_case(ctx, tally, conn, f"kind {kind:#06x}", frame(kind, rid, b"\x08\x01"), rid, kind,
                        ["UNKNOWN_KIND"])
    conn.close()
    conn = fresh(ctx, hello=False)
    conn = raw_case(ctx, tally, conn, "kind 0x3fff before HELLO", frame(0x3FFF, 9, b""), 9, 0x3FFF,
                    ["HELLO_REQUIRED", "UNKNOWN_KIND"], usable_after=False)
    conn.close()
    return tally.result("frames")


NOT_PROTOBUF = [
    ("truncated-length", b"\x0a\xff\xff\xff\xff\x0f"),  # field 1, length-delimited, declares 4 GiB
    ("varint-11-bytes", b"\x08" + b"\xff" * 10 + b"\x01"),
    ("bad-wire-type-7", b"\x0f\x00"),
    ("field-number-0", b"\x00\x01"),
    ("truncated-fixed64", b"\x09\x01\x02"),
    ("invalid-utf8-string", b"\x0a\x02\xff\xfe"),
]


def attack_not_protobuf(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    for kind in REQUEST_KINDS:
        for name, body in NOT_PROTOBUF:
            if kind in (PING, UNSUBSCRIBE_RESULTS, SUBSCRIBE_RESULTS, LIST_NOTIFICATION_TYPES) \
                    and name == "invalid-utf8-string":
                continue  # field 1 is not a string there (LIST_NOTIFICATION_TYPES has none: it is ignored)
            rid = conn.rid()
            conn = raw_case(ctx, tally, conn, f"{KIND_NAMES[kind]} body={name}", frame(kind, rid, body), rid, kind,
                            ["INVALID_BODY"] + (["INVALID_ARGUMENT"] if name == "invalid-utf8-string" else []))
    conn.close()
    conn = fresh(ctx, hello=False)
    conn = raw_case(ctx, tally, conn, "hello body=truncated-length (before HELLO)",
                    frame(HELLO, 1, NOT_PROTOBUF[0][1]), 1, HELLO, ["INVALID_BODY"], usable_after=False)
    again = conn.hello(ctx.args.tenant, ctx.args.credential)
    tally.add(again.status == "ok", "a valid HELLO after the bad one", str(again))
    conn.close()
    return tally.result("frames")


def attack_empty_bodies(ctx: Context) -> Tuple[bool, str]:
    """Every request kind with an empty body (the all-defaults message): a valid answer or an ERROR naming why."""
    tally = Tally()
    conn = fresh(ctx)
    for kind in REQUEST_KINDS:
        rid = conn.rid()
        codes = ["INVALID_ARGUMENT", "NOT_FOUND"]
        conn = raw_case(ctx, tally, conn, f"{KIND_NAMES[kind]} empty body", frame(kind, rid, b""), rid, kind, codes,
                        ok=True)
    conn.close()
    return tally.result("frames")


def attack_one_byte_writes(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = Conn(ctx.relay.address, nodelay=True)
    hello = encode_frame(HELLO, 1, pb.Hello(min_version=1, max_version=1, tenant=ctx.args.tenant,
                                            credential=ctx.args.credential, client_name="one-byte"))
    stream = hello + encode_frame(PING, 2, pb.Ping(nonce=77)) + encode_frame(LIST_DEVICES, 3, pb.ListDevices(
        user_id=USER1)) + encode_frame(PING, 4, pb.Ping())
    try:
        for index in range(len(stream)):
            conn.send(stream[index:index + 1])
            time.sleep(0.001)
        answers = [conn.wait_for(1, HELLO, 8), conn.wait_for(2, PING, 8), conn.wait_for(3, LIST_DEVICES, 8),
                   conn.wait_for(4, PING, 8)]
    except Closed as closed:
        answers = [Answer("closed", note=str(closed))]
    for label, answer in zip(("HELLO", "PING", "LIST_DEVICES", "PING(empty)"), answers):
        tally.add(answer.status == "ok", f"{label} written 1 byte at a time", str(answer))
    conn.close()
    return tally.result(f"frames ({len(stream)} one-byte writes)")


def attack_frame_too_large(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    for label, hello, length in [("after HELLO: max_frame_bytes+1", True, ctx.max_frame_bytes + 1),
                                 ("after HELLO: 0xFFFFFFFF", True, 0xFFFFFFFF),
                                 ("before HELLO: 0x7FFFFFFF", False, 0x7FFFFFFF)]:
        conn = fresh(ctx, hello=hello)
        try:
            conn.send(frame(SEND, 5, b"\x00" * 64, length=length))
            answer = conn.wait_for(5, SEND, 8)
        except Closed as closed:
            answer = Answer("closed", note=str(closed))
        held, text = judge(answer, SEND, ok=False, codes=["FRAME_TOO_LARGE"])
        if held:
            if conn.drained_until_eof(5):
                text += ", then closed"
            else:
                held, text = False, f"{text}, but the connection stayed open 5 s"
        tally.add(held, label, text)
        conn.close()
        if not held:
            after_failure(ctx, tally, label, answer)
    return tally.result("headers")


def attack_request_id_zero(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    for kind, body in ((PING, pb.Ping(nonce=3)), (LIST_DEVICES, pb.ListDevices(user_id=USER1)), (SEND, base_send(ctx))):
        conn = raw_case(ctx, tally, conn, f"{KIND_NAMES[kind]} request id 0", encode_frame(kind, 0, body), 0, kind,
                        ["INVALID_ARGUMENT"])
    conn.close()
    return tally.result("frames")


def attack_goodbye_invalid_body(ctx: Context) -> Tuple[bool, str]:
    tally = Tally()
    conn = fresh(ctx)
    rid = conn.rid()
    try:
        conn.send(frame(GOODBYE, rid, NOT_PROTOBUF[0][1]))
        answer = conn.wait_for(rid, GOODBYE, 6)
    except Closed as closed:
        answer = Answer("closed", note=str(closed))
    held, text = judge(answer, GOODBYE, ok=False, codes=["INVALID_BODY"])
    if held:
        # A GOODBYE closes the connection even when its body is refused.
        closed, why = closes_soon(conn)
        if not closed:
            held, text = False, f"{text}, {why}"
    tally.add(held, "goodbye with an invalid body", text)
    conn.close()
    if not held:
        after_failure(ctx, tally, "goodbye invalid body", answer)
    return tally.result("frames")


# --- 4. zstd liars (hand-made frames) ----------------------------------------------------------------

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_header(declared: Optional[int], window_log: int = 20) -> bytes:
    """Magic + frame header: single segment with a content size field sized for `declared`, or (None) no size."""
    if declared is None:
        return ZSTD_MAGIC + bytes([0x00, (window_log - 10) << 3])  # Window_Descriptor, no FCS
    if declared < 256:
        return ZSTD_MAGIC + bytes([0x20, declared])
    if declared < 65536 + 256:
        return ZSTD_MAGIC + bytes([0x60]) + struct.pack("<H", declared - 256)
    if declared < 2**32:
        return ZSTD_MAGIC + bytes([0xA0]) + struct.pack("<I", declared)
    return ZSTD_MAGIC + bytes([0xE0]) + struct.pack("<Q", declared)


def raw_block(data: bytes, last: bool = True) -> bytes:
    return struct.pack("<I", (len(data) << 3) | int(last))[:3] + data


def rle_blocks(total: int, byte: int = 0) -> bytes:
    out = bytearray()
    while total > 0:
        size = min(total, 128 * 1024)
        total -= size
        out += struct.pack("<I", (size << 3) | (1 << 1) | int(total == 0))[:3] + bytes([byte])
    return bytes(out)


def honest_zstd(content: bytes) -> bytes:
    return zstd_header(len(content)) + raw_block(content)


def skippable(payload: bytes, declared: Optional[int] = None, magic_low: int = 0) -> bytes:
    return struct.pack("<II", 0x184D2A50 + magic_low, len(payload) if declared is None else declared) + payload


def zstd_selftest() -> str:
    """Cross-checks the hand-made honest frame with the zstandard package."""
    content = body_of(pb.Ping(nonce=4242))
    made = honest_zstd(content)
    if zstandard.ZstdDecompressor().decompress(made) != content:
        raise RuntimeError("hand-made zstd frame does not decompress to its content")
    if zstandard.get_frame_parameters(zstd_header(5 * MIB) + rle_blocks(5 * MIB)).content_size != 5 * MIB:
        raise RuntimeError("hand-made zstd header does not declare its size")
    return "hand-made zstd frames cross-checked with zstandard"


def zstd_attack(variants):
    def attack(ctx: Context) -> Tuple[bool, str]:
        tally = Tally()
        conn = fresh(ctx)
        # Control: an honest compressed PING (the package's) is answered.
        rid = conn.rid()
        conn = raw_case(ctx, tally, conn, "honest zstd PING (control)",
                        encode_frame(PING, rid, pb.Ping(nonce=9), compress=True), rid, PING, [], ok=True)
        for label, body, kind in variants(ctx):
            rid = conn.rid()
            conn = raw_case(ctx, tally, conn, label, frame(kind, rid, body, flags=FLAG_ZSTD), rid, kind,
                            ["BAD_COMPRESSION", "DECOMPRESSED_TOO_LARGE"])
        conn.close()
        return tally.result("frames")

    return attack


def ping_body(nonce: int = 5) -> bytes:
    return body_of(pb.Ping(nonce=nonce))


def variants_size_zero(ctx):
    data = ping_body(123456)
    return [("declares 0, carries a raw block", zstd_header(0) + raw_block(data), PING),
            ("declares 0, carries 1 MiB RLE", zstd_header(0) + rle_blocks(MIB, 0x08), PING),
            ("declares 1, carries 4 bytes", zstd_header(1) + raw_block(data), PING),
            ("declares 200, carries 4 bytes", zstd_header(200) + raw_block(data), PING),
            ("declares 16, carries 3 MiB RLE (bomb under a small size)", zstd_header(16) + rle_blocks(3 * MIB), PING)]


def variants_skippable(ctx):
    real = honest_zstd(ping_body(77))
    return [("skippable frame (8 bytes) before the real frame", skippable(b"hostile!") + real, PING),
            ("skippable frame (magic 0x184D2A5F) before the real frame", skippable(b"x" * 16, magic_low=15) + real,
             PING),
            ("skippable frame alone", skippable(ping_body()), PING),
            ("skippable frame declaring 0xFFFFFFFF bytes", skippable(b"abc", declared=0xFFFFFFFF), PING),
            ("real frame, then a skippable frame", real + skippable(b"trailer!"), PING),
            ("two real frames back to back", real + honest_zstd(ping_body(78)), PING)]


def variants_over_max(ctx):
    limit = ctx.max_decompressed_bytes
    return [("declares max_decompressed_bytes+1", zstd_header(limit + 1) + raw_block(ping_body()), PING),
            ("declares 5 MiB, carries 5 MiB RLE (honest bomb)", zstd_header(5 * MIB) + rle_blocks(5 * MIB), PING),
            ("declares 2^32", zstd_header(2**32) + raw_block(ping_body()), PING),
            ("declares 2^63", zstd_header(2**63) + raw_block(ping_body()), PING),
            ("declares 2^64-2 (ZSTD_CONTENTSIZE_ERROR)", zstd_header(2**64 - 2) + raw_block(ping_body()), PING),
            ("declares 2^64-1 (ZSTD_CONTENTSIZE_UNKNOWN)", zstd_header(2**64 - 1) + raw_block(ping_body()), PING)]


def variants_no_size(ctx):
    return [("no content size, raw block", zstd_header(None, 10) + raw_block(ping_body()), PING),
            ("no content size, 1 MiB RLE", zstd_header(None, 20) + rle_blocks(MIB, 0x08), PING),
            ("no content size, SEND body", zstd_header(None, 10) + raw_block(body_of(base_send(ctx))), SEND)]


def variants_garbage(ctx):
    rng = random.Random(7)
    honest = honest_zstd(ping_body(11))
    return [("64 random bytes", bytes(rng.getrandbits(8) for _ in range(64)), PING),
            ("magic only", ZSTD_MAGIC, PING),
            ("magic + truncated header", ZSTD_MAGIC + b"\xe0\x01", PING),
            ("honest frame minus its last 2 bytes", honest[:-2], PING),
            ("reserved header bit set", ZSTD_MAGIC + bytes([0x28, len(ping_body())]) + raw_block(ping_body()), PING),
            ("checksum flag, no checksum", ZSTD_MAGIC + bytes([0x24, len(ping_body())]) + raw_block(ping_body()),
             PING),
            ("reserved block type 3", zstd_header(4) + struct.pack("<I", (4 << 3) | (3 << 1) | 1)[:3] + b"abcd", PING),
            ("empty body with the zstd flag", b"", PING)]


# --- 5./6. floods ------------------------------------------------------------------------------------


def tcp_state(sock: socket.socket) -> int:
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return 7


def relay_side(relay_port: int, client_port: int) -> Optional[Tuple[int, int]]:
    """The relay's socket of the connection from /proc/net/tcp: (bytes it has not read yet, bytes the peer has
    not acknowledged), or None once no process holds it any more (gone, or orphaned with inode 0)."""
    try:
        with open("/proc/net/tcp") as handle:
            next(handle)
            for line in handle:
                parts = line.split()
                local, remote, queues, inode = parts[1], parts[2], parts[4], parts[9]
                if int(local.split(":")[1], 16) == relay_port and int(remote.split(":")[1], 16) == client_port:
                    if inode != "0":
                        tx, rx = queues.split(":")
                        return int(rx, 16), int(tx, 16)
    except (OSError, StopIteration, IndexError, ValueError):
        return (0, 0)
    return None


class Prober(threading.Thread):
    """A well-behaved client meanwhile, on its own credential (a flood spends its own credential's request limit):
    PING and LIST_DEVICES every 0.5 s, each timed (a debug relay on a loaded 2-core machine answers in seconds, not
    milliseconds: the limit is generous)."""

    def __init__(self, ctx: Context, limit: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.ctx = ctx
        self.limit = limit
        self.stopping = threading.Event()
        self.latencies: List[float] = []
        self.failures: List[str] = []

    def run(self) -> None:
        session = Session(self.ctx, credential=self.ctx.args.probe_credential or None, name="hostile-probe")
        while not self.stopping.is_set():
            for kind, message in ((PING, pb.Ping(nonce=1)), (LIST_DEVICES, pb.ListDevices(user_id=USER1))):
                started = time.monotonic()
                answer = session.call(kind, message, timeout=self.limit + 3)
                took = time.monotonic() - started
                if answer.status == "ok":
                    self.latencies.append(took)
                    if took > self.limit:
                        self.failures.append(f"{KIND_NAMES[kind]} took {took:.1f}s")
                else:
                    self.failures.append(f"{KIND_NAMES[kind]} -> {answer}")
            self.stopping.wait(0.5)
        session.close()

    def summary(self) -> str:
        worst = max(self.latencies) if self.latencies else 0.0
        fails = f", {len(self.failures)} late/failed ({'; '.join(self.failures[:2])})" if self.failures else ""
        return f"well-behaved client: {len(self.latencies)} answers, slowest {worst:.2f}s{fails}"


def flood_attack(total_bytes: int, with_hello: bool, max_seconds: float):
    def attack(ctx: Context) -> Tuple[bool, str]:
        bound_kib = 16 * 1024
        abort_kib = 1024 * 1024  # stop flooding once the relay grew 1 GiB: the answer is clear by then
        close_bound = ctx.stall_timeout + 10
        conn = Conn(ctx.relay.address, rcvbuf=65536)
        if with_hello:
            answer = conn.hello(ctx.args.tenant, ctx.args.credential, "hostile-flood")
            if answer.status != "ok":
                conn.close()
                return False, f"HELLO -> {answer}"
        relay_port = ctx.relay.address[1]
        client_port = conn.sock.getsockname()[1]
        one = encode_frame(PING, 7, pb.Ping(nonce=UINT64_MAX))
        chunk = one * (MIB // len(one))
        view = memoryview(chunk)
        probe = Prober(ctx)
        probe.start()
        time.sleep(0.6)
        before = ctx.sampler.baseline()
        started = time.monotonic()
        sock = conn.sock
        sock.setblocking(False)
        sent = offset = 0
        last_progress = started
        closed_at: Optional[float] = None
        close_how = ""
        stop_why = ""
        while True:
            now = time.monotonic()
            if sent >= total_bytes:
                stop_why = f"all {total_bytes // MIB} MiB written"
                break
            if now - started > max_seconds:
                stop_why = f"flooded for {max_seconds:g}s"
                break
            current = ctx.sampler.now() or 0
            if current - before > abort_kib:
                stop_why = f"aborted: relay RSS grew {mib(current - before)}"
                break
            if not ctx.relay.alive():
                stop_why = "the relay died"
                break
            _r, writable, _x = select.select([], [sock], [], 0.2)
            if writable:
                try:
                    count = sock.send(view[offset:offset + min(len(chunk) - offset, total_bytes - sent)])
                except BlockingIOError:
                    continue
                except OSError as error:
                    closed_at, close_how = time.monotonic(), f"write failed ({error.__class__.__name__})"
                    stop_why = "the relay closed the connection while it was flooded"
                    break
                sent += count
                offset = (offset + count) % len(chunk)
                last_progress = time.monotonic()
            elif now - last_progress > 2.0:
                stop_why = "the relay stopped reading (writes blocked 2 s)"
                break
        # The relay's answers stop flowing once its kernel send buffer is full (its socket's send queue in
        # /proc/net/tcp stops changing: we read nothing); from then on they pile up in the relay, and it should
        # close the connection within the write-stall timeout (+ slack). Watch until it does (it drops its
        # socket: RST, or FIN behind the unread answers), at most close_bound + 5 s after the last change.
        last_tx: Optional[int] = None
        tx_changed = last_progress
        watch_cpu_start = cpu_seconds(ctx.relay.pid)
        hard_stop = started + max_seconds + close_bound + 30
        while closed_at is None and ctx.relay.alive():
            now = time.monotonic()
            side = relay_side(relay_port, client_port)
            if side is None:
                closed_at, close_how = now, "relay released its socket"
                break
            if side[1] != last_tx:
                last_tx, tx_changed = side[1], now
            state = tcp_state(sock)
            if state != 1:  # not ESTABLISHED: CLOSE_WAIT (FIN) or CLOSE (RST)
                closed_at, close_how = now, f"tcp state {state}"
                break
            if now > max(last_progress, tx_changed) + close_bound + 5 or now > hard_stop:
                break
            # After HELLO the flood spends its credential's tokens: past them the relay reads it only as tokens come
            # back, answering at that rate. Watched for as long as a stall would take, then judged by its CPU.
            if with_hello and now > last_progress + close_bound + 5:
                break
            time.sleep(0.2)
        reference = max(last_progress, tx_changed)
        finished = time.monotonic()
        watch_cpu = (cpu_seconds(ctx.relay.pid) - watch_cpu_start) / max(finished - last_progress, 0.001)
        probe.stopping.set()
        probe.join(10)
        peak = ctx.sampler.peak(started, finished)
        conn.close()
        growth = max(0, peak - before)
        parts = [f"wrote {sent / MIB:.1f} MiB in {last_progress - started:.1f}s ({stop_why})",
                 f"relay RSS {mib(before)} -> peak {mib(peak)}: growth {mib(growth)} (bound {mib(bound_kib)})"]
        held = growth <= bound_kib
        if closed_at is None and with_hello and watch_cpu <= 0.3:
            parts.append(f"throttled: the relay reads the flood only at its credential's request rate (relay CPU "
                         f"{watch_cpu:.2f} s/s for {finished - last_progress:.1f}s after the writes blocked); open")
        elif closed_at is None:
            held = False
            parts.append(f"connection NOT closed by the relay: still open {finished - reference:.1f}s after its "
                         f"answers stopped flowing, {finished - started:.1f}s after the flood began "
                         f"(bound {close_bound}s; relay CPU {watch_cpu:.2f} s/s)")
        else:
            delay = max(0.0, closed_at - reference)
            parts.append(f"closed by the relay {delay:.1f}s after its answers stopped flowing, "
                         f"{closed_at - started:.1f}s after the flood began ({close_how}; bound {close_bound}s)")
            if delay > close_bound:
                held = False
        parts.append(probe.summary())
        if probe.failures:
            held = False
        return held, "; ".join(parts)

    return attack


# --- 6b. inflating bodies ----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU seconds so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def inflating(message, inflated: int, random_bytes: int) -> bytes:
    """A hand-made zstd body: `message` with an undeclared field (number 1000) that makes it `inflated` bytes long,
    `random_bytes` random bytes (one raw block: what the frame carries) then zeros (RLE blocks of 4 bytes)."""
    head = body_of(message)
    length = inflated - len(head) - 2 - len(varint(inflated))
    prefix = head + b"\xc2\x3e" + varint(length) + os.urandom(random_bytes)
    total = len(prefix) + length - random_bytes
    return zstd_header(total) + raw_block(prefix, last=False) + rle_blocks(total - len(prefix))


def loc_args_body(count: int) -> bytes:
    """A SEND to hostile-u1 whose alert holds `count` empty loc_args (two bytes each)."""
    alert = b"\x52\x00" * count
    return body_of(pb.Send(notification_type="message", user_ids=[USER1])) + b"\x3a" + varint(len(alert)) + alert


def pipelined(ctx: Context, frames: List[bytes], timeout: float) -> Tuple[Dict[str, int], str]:
    """Writes `frames` at once on a fresh connection (from a thread: the relay may stop reading) and reads their
    answers: how many of each outcome ("ok" or the ERROR code), and what went wrong ("" when every one came)."""
    try:
        conn = fresh(ctx, timeout=10)
    except (Closed, OSError) as error:
        return {}, f"connect: {error}"
    writer_sock = conn.sock.dup()
    writer_sock.settimeout(timeout)
    data = b"".join(frames)

    def write() -> None:
        try:
            writer_sock.sendall(data)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    outcomes: Dict[str, int] = {}
    problem = ""
    deadline = time.monotonic() + timeout
    for _ in frames:
        try:
            got = conn.read_frame(max(0.0, deadline - time.monotonic()))
        except Closed as closed:
            problem = f"closed after {sum(outcomes.values())} answers: {closed}"
            break
        if got is None:
            problem = f"{len(frames) - sum(outcomes.values())} answers missing after {timeout:g}s"
            break
        outcome = "ok"
        if isinstance(got, FrameError):
            outcome = f"unreadable ({got})"
        elif got.kind == ERROR:
            error = got.message
            outcome = code_name(error.code) + (f" ({error.field})" if error.field else "")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    writer_sock.close()
    writer.join(5)
    conn.close()
    return outcomes, problem


def inflate_attack(make: Callable[[Context], List[List[bytes]]], allowed: Sequence[str], bound_kib: int,
                   probe: bool = False):
    """Each list of frames from `make` pipelined on its own connection, all at once: every answer must be one of
    `allowed` ("ok" or a code), the relay's RSS must grow at most `bound_kib`, and (with `probe`) a well-behaved
    client is served meanwhile. The detail gives the outcomes, the RSS and the relay's CPU seconds."""

    def attack(ctx: Context) -> Tuple[bool, str]:
        connections = make(ctx)
        prober = Prober(ctx) if probe else None
        if prober:
            prober.start()
        time.sleep(0.6)
        before = ctx.sampler.baseline()
        cpu_before = cpu_seconds(ctx.relay.pid)
        started = time.monotonic()
        results: List[Tuple[Dict[str, int], str]] = [({}, "")] * len(connections)

        def run(index: int) -> None:
            results[index] = pipelined(ctx, connections[index], timeout=60)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(connections))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(70)
        took = time.monotonic() - started
        time.sleep(0.3)
        cpu = cpu_seconds(ctx.relay.pid) - cpu_before
        peak = ctx.sampler.peak(started, time.monotonic())
        if prober:
            prober.stopping.set()
            prober.join(10)
        outcomes: Dict[str, int] = {}
        problems = [problem for _o, problem in results if problem]
        for counts, _problem in results:
            for outcome, count in counts.items():
                outcomes[outcome] = outcomes.get(outcome, 0) + count
        unexpected = [o for o in outcomes if o.split(" ")[0] not in allowed]
        growth = max(0, peak - before)
        sent = sum(len(f) for frames in connections for f in frames)
        inflated = sum(len(frames) for frames in connections)
        parts = [f"{inflated} frames, {sent / 1024:.0f} KiB sent on {len(connections)} connections in {took:.1f}s",
                 "answers " + ", ".join(f"{o} x{n}" for o, n in sorted(outcomes.items())),
                 f"relay RSS {mib(before)} -> peak {mib(peak)}: growth {mib(growth)} (bound {mib(bound_kib)})",
                 f"relay CPU {cpu:.2f}s"]
        held = not problems and not unexpected and growth <= bound_kib
        if problems:
            parts.append("; ".join(problems[:2]))
        if unexpected:
            parts.append("unexpected: " + ", ".join(unexpected))
        if prober:
            parts.append(prober.summary())
            held = held and not prober.failures
        return held, "; ".join(parts)

    return attack


def frames_of(kind: int, bodies: Sequence[bytes], flags: int = FLAG_ZSTD) -> List[bytes]:
    return [frame(kind, 10 + index, body, flags=flags) for index, body in enumerate(bodies)]


def tiny_inflating_sends(ctx: Context) -> List[List[bytes]]:
    """The report's attack: 128 pipelined SENDs of about 160 bytes, each declaring 4 MiB (refused for its ratio)."""
    body = inflating(base_send(ctx), ctx.max_decompressed_bytes, 0)
    return [frames_of(SEND, [body] * 128)]


def inflating_sends(ctx: Context) -> List[List[bytes]]:
    """4 connections of 32 pipelined SENDs that inflate to 4 MiB within the ratio (16.5 KiB each as sent): charged
    65 tokens each, held to 16 MiB per connection while in flight."""
    send = base_send(ctx)
    send.idempotency_key = "hostile-inflating-sends"
    body = inflating(send, ctx.max_decompressed_bytes, 16_900)
    return [frames_of(SEND, [body] * 32) for _ in range(4)]


def inflating_pings(ctx: Context) -> List[List[bytes]]:
    """256 PINGs of about 160 bytes declaring 4 MiB (refused for their ratio), then 256 that inflate to 4 MiB
    within it (charged 64 tokens each: RATE_LIMITED once the burst is spent, before decompressing)."""
    tiny = inflating(pb.Ping(nonce=1), ctx.max_decompressed_bytes, 0)
    within = inflating(pb.Ping(nonce=2), ctx.max_decompressed_bytes, 16_900)
    return [frames_of(PING, [tiny] * 256 + [within] * 256)]


def loc_args_bombs(ctx: Context) -> List[List[bytes]]:
    """64 SENDs of 2.1 million empty loc_args in about 400 bytes of zstd (refused for their ratio), and 8 of
    500,000 sent as they are (1 MB each: refused at the 257th entry, before decoding)."""
    # By hand: the package's encode_frame would send this body uncompressed, as it inflates beyond the ratio.
    compressed = zstandard.ZstdCompressor().compress(loc_args_body(2_100_000))
    plain = loc_args_body(500_000)
    return [frames_of(SEND, [compressed] * 64), frames_of(SEND, [plain] * 8, flags=0)]


# --- 7. revoke on an open connection -----------------------------------------------------------------


def admin(ctx: Context, *argv: str, timeout: float = 60) -> Tuple[int, str]:
    command = [ctx.args.bin, "admin", *argv, "--data-dir", ctx.args.data_dir]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:g}s"
    return done.returncode, done.stdout.decode("utf-8", "replace")


def attack_revoke(ctx: Context) -> Tuple[bool, str]:
    rc, out = admin(ctx, "credential", "issue", ctx.args.tenant, "--name", "hostile-revoke")
    secret = re.search(r"prk_[A-Za-z0-9_-]+", out)
    ident = re.search(r"issued credential (\S+)", out)
    if rc != 0 or not secret or not ident:
        return False, f"credential issue failed (exit {rc}): {short(out.strip(), 120)}"
    secret, ident = secret.group(0), ident.group(1)
    session = Session(ctx, credential=secret, name="hostile-revoke")
    first = session.call(LIST_DEVICES, pb.ListDevices(user_id=USER1))
    if first.status != "ok":
        return False, f"LIST_DEVICES with the fresh credential -> {first}"
    conn = session.conn
    command = [ctx.args.bin, "admin", "credential", "revoke", ctx.args.tenant, ident, "--data-dir", ctx.args.data_dir]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Keep the connection busy while the CLI runs (it connects to the same embedded PostgreSQL).
    refused_at: Optional[float] = None
    closed_at: Optional[float] = None
    answered_after = 0
    revoked_at: Optional[float] = None
    output = b""
    while True:
        now = time.monotonic()
        if revoked_at is None and process.poll() is not None:
            revoked_at = now
            output = process.stdout.read()
            if process.returncode != 0:
                conn.close()
                return False, f"credential revoke failed (exit {process.returncode}): {short(output.decode(), 120)}"
        if revoked_at is None and now - started > 60:
            process.kill()
            conn.close()
            return False, "credential revoke did not finish within 60 s"
        if revoked_at is not None and (now - revoked_at > 10 or closed_at is not None):
            break
        try:
            for kind, message in ((PING, pb.Ping(nonce=5)), (LIST_DEVICES, pb.ListDevices(user_id=USER1))):
                rid = conn.rid()
                conn.send(encode_frame(kind, rid, message))
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:
                got = conn.read_frame(max(0.0, deadline - time.monotonic()))
                if got is None:
                    break
                if isinstance(got, Frame) and got.kind == ERROR:
                    if code_name(got.message.code) == "AUTHENTICATION_FAILED" and refused_at is None:
                        refused_at = time.monotonic()
                elif revoked_at is not None and refused_at is None:
                    answered_after += 1
        except Closed:
            closed_at = time.monotonic()
            if revoked_at is None:  # closed before the revoke even committed: wait for the CLI, then judge
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    return False, "the connection closed before the revoke; the revoke CLI hung"
                revoked_at = time.monotonic()
                break
    conn.close()
    cli = f"revoke CLI took {revoked_at - started:.1f}s"
    if refused_at is None:
        refused = "no AUTHENTICATION_FAILED"
        held = False
    else:
        delay = max(0.0, refused_at - revoked_at)
        refused = f"AUTHENTICATION_FAILED {delay:.1f}s after the revoke committed"
        held = delay <= 5.0
    if closed_at is None:
        closing = f"connection still open {time.monotonic() - revoked_at:.0f}s after the revoke"
        held = False
    else:
        closing = f"closed {max(0.0, closed_at - revoked_at):.1f}s after it"
    # The revoked secret must not open a new connection either.
    retry = Conn(ctx.relay.address)
    again = retry.hello(ctx.args.tenant, secret)
    retry.close()
    if again.status != "error" or again.code != "AUTHENTICATION_FAILED":
        held = False
        closing += f"; a new HELLO with the revoked secret -> {again}"
    return held, f"{refused}; {closing}; {answered_after} requests answered after the revoke; {cli}"


# --- 8. log forging and secrets in logs ----------------------------------------------------------------


def scan_logs(ctx: Context, needles: Sequence[bytes] = ()) -> List[str]:
    """Forged lines, raw ESC bytes, and any of `needles`, in every relay log."""
    findings = []
    for path, data in ctx.relay.log_bytes():
        name = os.path.basename(path)
        for line in data.split(b"\n"):
            stripped = line.lstrip(b"\r")
            if stripped.startswith(FORGED_PREFIX):
                findings.append(f"{name}: forged line {short(stripped.decode('utf-8', 'replace'), 80)}")
            elif re.search(rb"(^| )forged=", QUOTED_VALUE.sub(b'""', line)):
                findings.append(f"{name}: forged field in {short(line.decode('utf-8', 'replace'), 80)}")
            elif b"\x1b" in line:
                findings.append(f"{name}: raw ESC in {short(line.decode('utf-8', 'replace'), 80)}")
            elif b"\r" in line.rstrip(b"\r"):
                findings.append(f"{name}: raw CR in {short(line.decode('utf-8', 'replace'), 80)}")
            for needle in needles:
                if needle and needle in line:
                    masked = line.replace(needle, b"<SECRET>").decode("utf-8", "replace")
                    findings.append(f"{name}: the secret appears in {short(masked, 80)}")
    return findings


def attack_log_forging(ctx: Context) -> Tuple[bool, str]:
    problems = []
    for forged_tenant in (ctx.args.tenant + "\n2026-01-01T00:00:00 critical : forged",
                          ctx.args.tenant + " request=c0/0 forged=X"):
        conn = Conn(ctx.relay.address)
        answer = conn.hello(forged_tenant, ctx.args.credential, "hostile-forge")
        conn.close()
        held, text = judge(answer, HELLO, ok=False, codes=["AUTHENTICATION_FAILED", "INVALID_ARGUMENT"],
                           fields=["tenant"])
        if not held:
            problems.append(f"forged tenant HELLO -> {text}")
    for name in ("hostile\n2026-01-01T00:00:00 critical : forged client", "hostile \x1b[31mred\x1b[0m client",
                 "hostile\r2026-01-01T00:00:00 critical : carriage", "hostile request=c0/0 forged=X client"):
        conn = Conn(ctx.relay.address)
        answer = conn.hello(ctx.args.tenant, ctx.args.credential, name)
        if answer.status == "ok":
            ping = conn.call(PING, pb.Ping(nonce=1))
            if ping.status != "ok":
                problems.append(f"PING after HELLO with client_name {name!r} -> {ping}")
        else:
            held, text = judge(answer, HELLO, ok=False, codes=["INVALID_ARGUMENT"], fields=["client_name"])
            if not held:
                problems.append(f"HELLO client_name {short(name, 30)} -> {text}")
        conn.close()
    time.sleep(1.0)
    findings = scan_logs(ctx)
    if findings:
        problems.append(f"{len(findings)} bad log lines, e.g. {findings[0]}" + (
            f"; {findings[1]}" if len(findings) > 1 else ""))
    if problems:
        return False, "; ".join(problems)
    return True, "forged tenants refused; no forged line or field, raw ESC or CR in the relay log"


def attack_credential_as_tenant(ctx: Context) -> Tuple[bool, str]:
    secret = ctx.args.credential
    conn = Conn(ctx.relay.address)
    answer = conn.hello(secret, ctx.args.tenant, "hostile-swap")
    conn.close()
    problems = []
    held, text = judge(answer, HELLO, ok=False, codes=["AUTHENTICATION_FAILED", "INVALID_ARGUMENT"])
    if not held:
        problems.append(f"HELLO tenant=<secret> credential={ctx.args.tenant} -> {text}")
    if answer.status == "error":
        hidden = secret[12:]
        if secret in answer.msg.message or (len(hidden) >= 16 and hidden in answer.msg.message) \
                or secret in answer.msg.field:
            problems.append("the secret appears in the ERROR message")
    time.sleep(1.0)
    needles = [secret.encode()] + ([secret[12:].encode()] if len(secret) >= 28 else [])
    findings = [f for f in scan_logs(ctx, needles) if "secret" in f]
    if findings:
        problems.append(f"{len(findings)} relay log lines carry the secret, e.g. {findings[0]}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{answer}; the secret is in neither the ERROR nor the relay log"


# --- driver ------------------------------------------------------------------------------------------

ATTACKS: List[Tuple[str, Callable[[Context], Tuple[bool, str]]]] = [
    ("int-crash-frames", attack_int_crash_frames),
    ("int-send", attack_int_send),
    ("int-set-mute", attack_int_set_mute),
    ("int-query-deliveries", attack_int_query_deliveries),
    ("int-ping-presence-unsubscribe-register", attack_int_small_kinds),
    ("int-hello-versions", attack_int_hello),
    ("ctl-hello", attack_ctl_hello),
    ("ctl-devices", attack_ctl("devices")),
    ("ctl-send", attack_ctl("send")),
    ("ctl-send-nul-user-mixed", attack_ctl_send_mixed),
    ("ctl-jobs-deliveries", attack_ctl("jobs-deliveries")),
    ("ctl-policy", attack_ctl("policy")),
    ("ctl-goodbye-reason", attack_ctl_goodbye),
    ("frame-reserved-flags", attack_reserved_flags),
    ("frame-wrong-version", attack_wrong_version),
    ("frame-unknown-kind", attack_unknown_kind),
    ("frame-not-protobuf", attack_not_protobuf),
    ("frame-empty-bodies", attack_empty_bodies),
    ("frame-one-byte-writes", attack_one_byte_writes),
    ("frame-too-large", attack_frame_too_large),
    ("frame-request-id-0", attack_request_id_zero),
    ("frame-goodbye-invalid-body", attack_goodbye_invalid_body),
    ("zstd-declared-size-lies", zstd_attack(variants_size_zero)),
    ("zstd-skippable-frames", zstd_attack(variants_skippable)),
    ("zstd-declared-over-max", zstd_attack(variants_over_max)),
    ("zstd-no-declared-size", zstd_attack(variants_no_size)),
    ("zstd-garbage", zstd_attack(variants_garbage)),
    ("flood-100MiB-pings-after-hello", flood_attack(100 * MIB, True, 30)),
    ("flood-50MiB-pings-before-hello", flood_attack(50 * MIB, False, 20)),
    ("inflate-128-tiny-sends-of-4MiB", inflate_attack(tiny_inflating_sends, ["DECOMPRESSED_TOO_LARGE"], 16 * 1024)),
    ("inflate-4x32-sends-of-4MiB-within-ratio",
     inflate_attack(inflating_sends, ["ok", "RATE_LIMITED"], 4 * 16 * 1024 + 32 * 1024)),
    ("inflate-512-pings-of-4MiB",
     inflate_attack(inflating_pings, ["ok", "DECOMPRESSED_TOO_LARGE", "RATE_LIMITED"], 16 * 1024, probe=True)),
    ("loc-args-bombs", inflate_attack(loc_args_bombs, ["DECOMPRESSED_TOO_LARGE", "INVALID_ARGUMENT"], 32 * 1024)),
    ("revoke-open-connection", attack_revoke),
    ("log-forging", attack_log_forging),
    ("credential-as-tenant", attack_credential_as_tenant),
]


def setup(ctx: Context) -> None:
    """Devices the sends go to, and the limits HELLO_OK states; fails loudly when the relay cannot do the basics."""
    conn = Conn(ctx.relay.address)
    hello = conn.hello(ctx.args.tenant, ctx.args.credential, "hostile-setup")
    if hello.status != "ok":
        raise SystemExit(f"hostile-clients: setup: HELLO -> {hello}")
    ctx.max_frame_bytes = hello.msg.max_frame_bytes or ctx.max_frame_bytes
    ctx.max_decompressed_bytes = hello.msg.max_decompressed_bytes or ctx.max_decompressed_bytes
    conn.close()
    for user, token in ((USER1, ctx.token1), (USER_OK, "".join(random.choice("0123456789abcdef") for _ in range(64)))):
        answer = ctx.session.call(REGISTER_DEVICE, pb.RegisterDevice(user_id=user, token=token, platform="ios",
                                                                     environment=pb.PRODUCTION))
        if answer.status != "ok":
            raise SystemExit(f"hostile-clients: setup: REGISTER_DEVICE {user} -> {answer}")
    answer = ctx.session.call(REGISTER_DEVICE, base_register(ctx))
    if answer.status != "ok":
        raise SystemExit(f"hostile-clients: setup: REGISTER_DEVICE hostile-u2 -> {answer}")
    answer = ctx.session.call(SEND, base_send(ctx))
    if answer.status != "ok":
        raise SystemExit(f"hostile-clients: setup: the base SEND -> {answer}")
    ctx.track_send("setup base send", answer)
    say(f"hostile-clients: relay pid {ctx.relay.pid} at {ctx.relay.address[0]}:{ctx.relay.address[1]}, "
        f"max_frame_bytes {ctx.max_frame_bytes}, max_decompressed_bytes {ctx.max_decompressed_bytes}, "
        f"write-stall-timeout {ctx.args.write_stall_timeout or 'not supported by this relay (expecting 5)'}; "
        f"{zstd_selftest()}")


def check_jobs(ctx: Context, timeout: float = 60) -> Tuple[int, int, List[str]]:
    pending = {job["job_id"]: job for job in ctx.jobs}
    states: Dict[str, str] = {}
    deadline = time.monotonic() + timeout
    session = Session(ctx, name="hostile-jobs")
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            answer = session.call(JOB_STATUS, pb.JobStatus(job_id=job_id), timeout=8)
            if answer.status == "ok":
                states[job_id] = pb.JobState.Name(answer.msg.state)
                if answer.msg.state in FINISHED_STATES:
                    del pending[job_id]
            else:
                states[job_id] = str(answer)
                if answer.status in ("closed", "timeout"):
                    ctx.relay.ensure("the job check")
        if pending:
            time.sleep(1)
    session.close()
    stuck = [f"{pending[j]['label']} (job {j[:8]}…: {states.get(j, 'never answered')})" for j in pending]
    return len(ctx.jobs), len(stuck), stuck


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="host:port of the relay")
    parser.add_argument("--tenant", default="circl")
    parser.add_argument("--credential", required=True, help="a prk_ secret of the tenant")
    parser.add_argument("--probe-credential", default="",
                        help="another prk_ secret of the tenant, for the well-behaved client (default: --credential)")
    parser.add_argument("--relay-pid", type=int, required=True)
    parser.add_argument("--relay-log", required=True, help="the relay's log file (stdout and stderr)")
    parser.add_argument("--bin", required=True, help="the pushrelay binary (for the admin CLI)")
    parser.add_argument("--data-dir", required=True, help="the embedded PostgreSQL data folder of the relay")
    parser.add_argument("--serve-args", default="", help="file: the relay's `serve` argv, one per line (restarts)")
    parser.add_argument("--pid-file", default="", help="file updated with the pid of a restarted relay")
    parser.add_argument("--write-stall-timeout", type=int, default=0,
                        help="the relay's --write-stall-timeout; 0: the relay has no such flag (5 s is expected)")
    parser.add_argument("--budget", type=float, default=200, help="seconds for the attacks; later ones are skipped")
    parser.add_argument("--only", default="", help="comma-separated attack names (debugging)")
    parser.add_argument("--verbose", action="store_true", help="print every case of every attack")
    args = parser.parse_args()
    global VERBOSE
    VERBOSE = args.verbose

    started = time.monotonic()
    ctx = Context(args)
    ctx.sampler.start()
    time.sleep(0.5)
    setup(ctx)
    time.sleep(0.5)
    rss_before = ctx.sampler.baseline()

    results: List[Tuple[str, bool, str]] = []
    selected = [a for a in ATTACKS if not args.only or a[0] in args.only.split(",")]
    for name, attack in selected:
        if time.monotonic() - started > args.budget:
            held, detail = False, f"skipped: the run's {args.budget:g}s budget was spent"
        elif ctx.relay.down:
            held, detail = False, "skipped: the relay is down (it died and could not be restarted)"
        else:
            attack_started = time.monotonic()
            ctx.attack_deadline = attack_started + ATTACK_LIMIT
            try:
                held, detail = attack(ctx)
            except Exception as error:  # noqa: BLE001  (a crash of the attack itself is reported, not raised)
                traceback.print_exc(file=sys.stderr)
                held, detail = False, f"the attack raised {error.__class__.__name__}: {short(str(error), 120)}"
            ctx.session.close()
            died = ctx.relay.ensure(name)
            if died:
                held = False
                detail += f"; afterwards: {died}"
            detail += f" [{time.monotonic() - attack_started:.1f}s]"
        results.append((name, held, detail))
        say(f"attack {name}: {'held' if held else 'NOT HELD'} ({detail})")

    say("hostile-clients: waiting for every accepted job to finish (60 s at most)")
    accepted, unfinished, stuck = check_jobs(ctx)
    time.sleep(1.0)
    rss_after = ctx.sampler.baseline()
    ctx.sampler.stopping.set()
    rss_peak = max((v for _t, _p, v in ctx.sampler.samples), default=0)
    alive_at_end = ctx.relay.alive()

    tried = len(results)
    held_count = sum(1 for _n, h, _d in results if h)
    failed_count = tried - held_count
    checks = [
        ("relay-never-died", not ctx.relay.deaths,
         "no death" if not ctx.relay.deaths else f"{len(ctx.relay.deaths)} deaths: " + "; ".join(ctx.relay.deaths[:3])),
        ("relay-up-at-end", alive_at_end, f"pid {ctx.relay.pid} {'alive' if alive_at_end else 'gone'}"),
        ("every-accepted-job-finished", unfinished == 0,
         f"{accepted} accepted, {accepted - unfinished} finished, {unfinished} not finished within 60 s"
         + (": " + "; ".join(stuck[:3]) if stuck else "")),
    ]
    say("")
    say(f"hostile-clients: {tried} attacks tried, {held_count} held, {failed_count} failed")
    for name, _held, _detail in results:
        if not _held:
            say(f"  not held: {name}")
    say(f"relay RSS: before {mib(rss_before)}, peak {mib(rss_peak)}, after {mib(rss_after)} "
        f"(per hostile connection bound checked in the floods: 16.0 MiB)")
    deaths = "" if not ctx.relay.deaths else " (" + "; ".join(ctx.relay.deaths) + ")"
    say(f"relay deaths: {len(ctx.relay.deaths)}{deaths}")
    say(f"every accepted job finished: {'yes' if unfinished == 0 else 'NO'} "
        f"({accepted} accepted, {unfinished} unfinished)")
    for name, ok, detail in checks:
        say(f"check {name}: {'ok' if ok else 'FAIL'} ({detail})")
    passed = held_count + sum(1 for _n, ok, _d in checks if ok)
    failed = failed_count + sum(1 for _n, ok, _d in checks if not ok)
    say(f"hostile: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes Protocol/vectors.json, the wire protocol's test vectors (Protocol/README.md, "Test vectors").

    python3 Protocol/python/tools/make_vectors.py [--output PATH]

The output is deterministic: every value below is fixed, bodies are serialized deterministically (map
entries sorted by key) and compressed at a fixed zstd level. (A compressed body's bytes depend on the
zstd library's version too; decoders check such vectors by their meaning, not their bytes.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import zstandard
from google.protobuf import json_format
from google.protobuf.message import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pushrelay_client import pb  # noqa: E402
from pushrelay_client.frames import (  # noqa: E402
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_ZSTD_LEVEL,
    FLAG_ZSTD,
    HEADER,
    PROTOCOL_VERSION,
    Kind,
    encode_frame,
    encode_header,
)

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "vectors.json"

# Realistic 64-hex-digit device tokens, fixed.
TOKEN_1 = hashlib.sha256(b"pushrelay vectors: device 1").hexdigest()
TOKEN_2 = hashlib.sha256(b"pushrelay vectors: device 2").hexdigest()
JOB_ID = "0b7d2c4e-5f61-4a8e-9c3d-2e1f0a9b8c7d"
CREATED_AT_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def header_fields(frame: bytes) -> Dict[str, int]:
    """The header of ``frame`` as the vector's ``header`` object."""
    length, version, flags, kind, request_id = HEADER.unpack_from(frame)
    return {"length": length, "version": version, "flags": flags, "kind": kind, "request_id": request_id}


def sorted_maps(message: Message, body: Dict[str, Any]) -> Dict[str, Any]:
    """``body`` (``message`` as protobuf JSON) with the entries of every map field sorted by key.

    ``json_format`` writes map entries in the map's iteration order, which differs between runs.
    """
    for field in message.DESCRIPTOR.fields:
        if field.name not in body or field.message_type is None:
            continue
        value = getattr(message, field.name)
        if field.message_type.GetOptions().map_entry:
            body[field.name] = dict(sorted(body[field.name].items()))
        elif isinstance(body[field.name], list):
            body[field.name] = [sorted_maps(item, entry) for item, entry in zip(value, body[field.name])]
        else:
            body[field.name] = sorted_maps(value, body[field.name])
    return body


def valid(
    name: str, description: str, kind: Kind, request_id: int, message: Message, compress: bool = False
) -> Dict[str, Any]:
    """A vector of a frame that decodes to ``message``."""
    frame = encode_frame(kind, request_id, message, compress, level=DEFAULT_ZSTD_LEVEL)
    return {
        "name": name,
        "description": description,
        "hex": frame.hex(),
        "header": header_fields(frame),
        "type": message.DESCRIPTOR.full_name,
        "body": sorted_maps(message, json_format.MessageToDict(message, preserving_proto_field_name=True)),
    }


def refused(name: str, description: str, frame: bytes, error: str) -> Dict[str, Any]:
    """A vector of a frame that must be refused with ``error``."""
    return {
        "name": name,
        "description": description,
        "hex": frame.hex(),
        "header": header_fields(frame),
        "error": error,
    }


def raw_frame(kind: Kind, request_id: int, body: bytes, *, flags: int = 0, version: int = PROTOCOL_VERSION) -> bytes:
    """A frame with exactly ``body`` (no checks), for the refused vectors."""
    return encode_header(len(body), kind, request_id, flags=flags, version=version) + body


def send_message() -> pb.Send:
    """The SEND of the send vectors: circl's chat message to two users, the sender excluded."""
    return pb.Send(
        notification_type="message",
        user_ids=["u-1001", "u-1002"],
        exclude_user_ids=["u-1003"],
        idempotency_key="msg-8841",
        alert=pb.Alert(title="Anna in Hiking Club", body="Who's in for Saturday?"),
        sound="default",
        template_values={"circle_id": "42", "channel_id": "7"},
        custom_json='{"message_id":"8841"}',
        mutable_content=True,
    )


def vectors() -> List[Dict[str, Any]]:
    """Every vector, valid ones first."""
    zstd = zstandard.ZstdCompressor(level=DEFAULT_ZSTD_LEVEL)
    ping_body = pb.Ping(nonce=0x0123456789ABCDEF).SerializeToString()
    bomb = zstd.compress(bytes(DEFAULT_MAX_DECOMPRESSED_BYTES + 1))
    unsized = zstandard.ZstdCompressor(level=DEFAULT_ZSTD_LEVEL, write_content_size=False).compress(ping_body)
    truncated = zstd.compress(ping_body)[:-3]
    return [
        valid(
            "hello",
            "HELLO: circl's backend opens a connection and can read zstd answers.",
            Kind.HELLO,
            1,
            pb.Hello(
                min_version=1,
                max_version=1,
                tenant="circl",
                credential="prk_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo",
                client_name="circl-django/4.2",
                accept_zstd=True,
            ),
        ),
        valid(
            "hello_ok",
            "HELLO_OK: version 1 and the default limits.",
            Kind.HELLO_OK,
            1,
            pb.HelloOk(
                version=1,
                tenant="circl",
                connection_id="conn-17",
                max_frame_bytes=DEFAULT_MAX_FRAME_BYTES,
                max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES,
                max_in_flight=128,
                max_recipients=10_000,
                idle_timeout_ms=300_000,
                server="pushrelay/1.0.0",
            ),
        ),
        valid("ping", "PING with a 64-bit nonce.", Kind.PING, 2, pb.Ping(nonce=0x0123456789ABCDEF)),
        valid("pong", "PONG echoing the PING's nonce.", Kind.PONG, 2, pb.Pong(nonce=0x0123456789ABCDEF)),
        valid(
            "goodbye_from_relay",
            "GOODBYE from the relay, request id 0: it is shutting down.",
            Kind.GOODBYE,
            0,
            pb.Goodbye(reason="shutting down"),
        ),
        valid(
            "register_device",
            "REGISTER_DEVICE: a production iPhone token for user u-1001.",
            Kind.REGISTER_DEVICE,
            3,
            pb.RegisterDevice(
                user_id="u-1001",
                token=TOKEN_1,
                platform="ios",
                environment=pb.PRODUCTION,
                device_id="9F1C2A40-6B7D-4E2A-8C11-5D0E3F7A9B21",
                app_version="3.14.0",
                locale="de-CH",
                time_zone="Europe/Zurich",
            ),
        ),
        valid(
            "send",
            "SEND of circl's message type to two users with alert, thread-id template values, an exclusion "
            "and an idempotency key.",
            Kind.SEND,
            4,
            send_message(),
        ),
        valid(
            "send_zstd",
            f"The same SEND with a zstd body (flag 0x01, level {DEFAULT_ZSTD_LEVEL}, content size declared).",
            Kind.SEND,
            5,
            send_message(),
            compress=True,
        ),
        valid(
            "send_ok",
            "SEND_OK: the job is accepted, not yet fanned out (so no device is counted yet).",
            Kind.SEND_OK,
            4,
            pb.SendResult(
                job_id=JOB_ID,
                job=pb.Job(
                    job_id=JOB_ID,
                    state=pb.ACCEPTED,
                    notification_type="message",
                    created_at_ms=CREATED_AT_MS,
                ),
            ),
        ),
        valid(
            "error_rate_limited",
            "ERROR answering request 6: RATE_LIMITED, a QUERY_DELIVERIES of 1,000 rows over the credential's request "
            "limit, retry after 100 ms.",
            Kind.ERROR,
            6,
            pb.Error(
                code=pb.RATE_LIMITED,
                message="this credential's request limit is reached (the frame costs 100 tokens)",
                retry_after_ms=100,
            ),
        ),
        valid(
            "subscribe_results_ok",
            "SUBSCRIBE_RESULTS_OK: an empty message, so an empty body (length 0).",
            Kind.SUBSCRIBE_RESULTS_OK,
            7,
            pb.Subscribed(),
        ),
        valid(
            "result_event_dead_token",
            "RESULT_EVENT on subscription 7: APNs declared a token dead (410 Unregistered).",
            Kind.RESULT_EVENT,
            7,
            pb.ResultEvent(
                dead_token=pb.DeadToken(
                    user_id="u-1002",
                    token=TOKEN_2,
                    reason="Unregistered",
                    invalidated_at_ms=CREATED_AT_MS - 3_600_000,
                    job_id=JOB_ID,
                )
            ),
        ),
        valid(
            "set_mute",
            "SET_MUTE: u-1001 mutes a channel's thread for an hour.",
            Kind.SET_MUTE,
            8,
            pb.SetMute(user_id="u-1001", thread_id="circle-42-channel-7", until_ms=CREATED_AT_MS + 3_600_000),
        ),
        valid(
            "query_deliveries",
            "QUERY_DELIVERIES of one job, at most 50 rows.",
            Kind.QUERY_DELIVERIES,
            9,
            pb.QueryDeliveries(job_id=JOB_ID, limit=50),
        ),
        refused(
            "frame_too_large",
            f"Only a header: it declares a {DEFAULT_MAX_FRAME_BYTES + 1}-byte body, one over max_frame_bytes. "
            "Refused as soon as the header is read (the body is never read; the connection closes).",
            encode_header(DEFAULT_MAX_FRAME_BYTES + 1, Kind.SEND, 10),
            "FRAME_TOO_LARGE",
        ),
        refused(
            "zstd_bomb",
            f"A small zstd body declaring {DEFAULT_MAX_DECOMPRESSED_BYTES + 1} bytes (zeros), one over "
            "max_decompressed_bytes: refused from the declared size, before decompressing.",
            raw_frame(Kind.SEND, 11, bomb, flags=FLAG_ZSTD),
            "DECOMPRESSED_TOO_LARGE",
        ),
        refused(
            "zstd_without_content_size",
            "A zstd body (a PING) whose frame does not declare its content size.",
            raw_frame(Kind.PING, 12, unsized, flags=FLAG_ZSTD),
            "DECOMPRESSED_TOO_LARGE",
        ),
        refused(
            "zstd_not_zstd",
            "Flag 0x01 set on a body that is plain protobuf (a PING), not a zstd frame.",
            raw_frame(Kind.PING, 13, ping_body, flags=FLAG_ZSTD),
            "BAD_COMPRESSION",
        ),
        refused(
            "zstd_truncated",
            "A zstd frame (a PING) missing its last 3 bytes: it declares its size but does not decompress.",
            raw_frame(Kind.PING, 14, truncated, flags=FLAG_ZSTD),
            "BAD_COMPRESSION",
        ),
        refused(
            "zstd_trailing_bytes",
            "A complete zstd frame (a PING) followed by 4 more bytes: the body must be exactly one zstd frame.",
            raw_frame(Kind.PING, 15, zstd.compress(ping_body) + b"\x00\x01\x02\x03", flags=FLAG_ZSTD),
            "BAD_COMPRESSION",
        ),
        refused(
            "reserved_flag",
            "A PING with reserved flag bit 1 (0x02) set.",
            raw_frame(Kind.PING, 16, ping_body, flags=0x02),
            "BAD_FRAME",
        ),
        refused(
            "version_2",
            "A PING with version 2 on a version-1 connection.",
            raw_frame(Kind.PING, 17, ping_body, version=2),
            "UNSUPPORTED_VERSION",
        ),
        refused(
            "truncated_varint",
            "A PING whose body ends inside the nonce's varint (08 ff ff).",
            raw_frame(Kind.PING, 18, b"\x08\xff\xff"),
            "INVALID_BODY",
        ),
        refused(
            "string_not_utf8",
            "A LIST_DEVICES whose user_id is not UTF-8 (ff fe): proto3 strings must be valid UTF-8.",
            raw_frame(Kind.LIST_DEVICES, 19, b"\x0a\x02\xff\xfe"),
            "INVALID_BODY",
        ),
    ]


def document() -> Dict[str, Any]:
    """The whole vectors.json object."""
    return {
        "version": 1,
        "limits": {
            "max_frame_bytes": DEFAULT_MAX_FRAME_BYTES,
            "max_decompressed_bytes": DEFAULT_MAX_DECOMPRESSED_BYTES,
        },
        "vectors": vectors(),
    }


def main() -> None:
    """Write the vectors file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="default: Protocol/vectors.json")
    arguments = parser.parse_args()
    content = document()
    arguments.output.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"make_vectors.py: wrote {len(content['vectors'])} vectors to {arguments.output}")


if __name__ == "__main__":
    main()

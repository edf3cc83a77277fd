"""The package's frame layer against Protocol/vectors.json, and a seeded fuzz of the decoder."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Dict, List

import pytest
import zstandard
from google.protobuf import json_format

from pushrelay_client import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ZSTD,
    MESSAGE_TYPES,
    ErrorCode,
    Frame,
    FrameDecoder,
    FrameError,
    Kind,
    encode_frame,
    encode_header,
    pb,
)
from pushrelay_client.errors import FRAME_ERRORS

VECTORS_PATH = Path(__file__).resolve().parents[2] / "vectors.json"
DOCUMENT: Dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
VALID: List[Dict[str, Any]] = [vector for vector in DOCUMENT["vectors"] if "error" not in vector]
REFUSED: List[Dict[str, Any]] = [vector for vector in DOCUMENT["vectors"] if "error" in vector]
TYPES_BY_NAME = {cls.DESCRIPTOR.full_name: cls for cls in MESSAGE_TYPES.values()}


def vector_id(vector: Dict[str, Any]) -> str:
    return str(vector["name"])


def decoder() -> FrameDecoder:
    limits = DOCUMENT["limits"]
    return FrameDecoder(
        max_frame_bytes=limits["max_frame_bytes"], max_decompressed_bytes=limits["max_decompressed_bytes"]
    )


def expected_message(vector: Dict[str, Any]) -> Any:
    return json_format.ParseDict(vector["body"], TYPES_BY_NAME[vector["type"]]())


def test_document_shape() -> None:
    assert DOCUMENT["version"] == 1
    assert DOCUMENT["limits"] == {
        "max_frame_bytes": DEFAULT_MAX_FRAME_BYTES,
        "max_decompressed_bytes": DEFAULT_MAX_DECOMPRESSED_BYTES,
    }
    assert len({vector_id(vector) for vector in DOCUMENT["vectors"]}) == len(DOCUMENT["vectors"])
    for vector in DOCUMENT["vectors"]:
        assert vector["hex"] == vector["hex"].lower()
        assert set(vector["header"]) == {"length", "version", "flags", "kind", "request_id"}
        assert ("error" in vector) != ("type" in vector and "body" in vector)
    assert {vector["error"] for vector in REFUSED} == {code.name for code in FRAME_ERRORS}
    assert any(vector["header"]["flags"] & FLAG_ZSTD for vector in VALID)


@pytest.mark.parametrize("vector", VALID, ids=vector_id)
def test_valid_vector_decodes(vector: Dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    frames = list(decoder().feed(data))
    assert len(frames) == 1
    frame = frames[0]
    header = vector["header"]
    assert header["length"] == len(data) - 12
    assert (frame.version, frame.flags, frame.kind, frame.request_id) == (
        header["version"],
        header["flags"],
        header["kind"],
        header["request_id"],
    )
    assert isinstance(frame.kind, Kind)
    assert frame.message is not None
    assert frame.message.DESCRIPTOR.full_name == vector["type"]
    assert MESSAGE_TYPES[frame.kind].DESCRIPTOR.full_name == vector["type"]
    assert frame.message == expected_message(vector)


@pytest.mark.parametrize("vector", VALID, ids=vector_id)
def test_valid_vector_decodes_byte_by_byte(vector: Dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    stream = decoder()
    frames: List[Frame] = []
    for index in range(len(data)):
        frames.extend(stream.feed(data[index : index + 1]))
        assert len(frames) == (1 if index == len(data) - 1 else 0)
    assert frames[0].message == expected_message(vector)
    assert stream.buffered == 0


@pytest.mark.parametrize("vector", [v for v in VALID if not v["header"]["flags"]], ids=vector_id)
def test_encode_frame_reproduces_uncompressed_vector(vector: Dict[str, Any]) -> None:
    header = vector["header"]
    frame = encode_frame(header["kind"], header["request_id"], expected_message(vector))
    assert frame.hex() == vector["hex"]


@pytest.mark.parametrize("vector", [v for v in VALID if v["header"]["flags"]], ids=vector_id)
def test_encode_frame_compressed_round_trip(vector: Dict[str, Any]) -> None:
    header = vector["header"]
    message = expected_message(vector)
    frame = encode_frame(header["kind"], header["request_id"], message, compress=True)
    assert frame[5] == FLAG_ZSTD
    assert zstandard.get_frame_parameters(frame[12:]).content_size == message.ByteSize()
    assert [decoded.message for decoded in decoder().feed(frame)] == [message]


@pytest.mark.parametrize("vector", REFUSED, ids=vector_id)
def test_refused_vector_raises_its_error(vector: Dict[str, Any]) -> None:
    stream = decoder()
    error_type = FRAME_ERRORS[ErrorCode[vector["error"]]]
    with pytest.raises(error_type) as caught:
        list(stream.feed(bytes.fromhex(vector["hex"])))
    assert caught.value.code.name == vector["error"]
    assert caught.value.kind == vector["header"]["kind"]
    assert caught.value.request_id == vector["header"]["request_id"]
    ping = encode_frame(Kind.PING, 99, pb.Ping(nonce=5))
    if caught.value.fatal:
        # The body is never read: nothing after it can be.
        with pytest.raises(error_type):
            list(stream.feed(ping))
    else:
        # The refused frame was skipped whole; the stream goes on.
        assert [frame.request_id for frame in stream.feed(ping)] == [99]


def test_one_stream_of_every_vector() -> None:
    """Every vector back to back (the fatal one last): frames and refusals come out in order."""
    ordered = [v for v in DOCUMENT["vectors"] if v.get("error") != "FRAME_TOO_LARGE"]
    ordered += [v for v in DOCUMENT["vectors"] if v.get("error") == "FRAME_TOO_LARGE"]
    stream = decoder()
    stream.feed(b"".join(bytes.fromhex(vector["hex"]) for vector in ordered))
    outcomes: List[str] = []
    while True:
        try:
            frame = stream.next_frame()
        except FrameError as error:
            outcomes.append(error.code.name)
            if error.fatal:
                break
            continue
        assert frame is not None
        outcomes.append(frame.message.DESCRIPTOR.full_name if frame.message is not None else "?")
    assert outcomes == [vector.get("error") or vector["type"] for vector in ordered]


def test_limits_are_inclusive() -> None:
    """A body of exactly max_frame_bytes, and a declared size of exactly max_decompressed_bytes, pass."""
    stream = FrameDecoder(max_frame_bytes=100, max_decompressed_bytes=1000)
    unknown_kind = 0x3FFE  # no message type: the body is returned as is
    frames = list(stream.feed(encode_header(100, unknown_kind, 1) + bytes(100)))
    assert frames[0].body == bytes(100) and frames[0].message is None and frames[0].kind == unknown_kind
    body = zstandard.ZstdCompressor().compress(bytes(1000))
    frames = list(stream.feed(encode_header(len(body), unknown_kind, 2, flags=FLAG_ZSTD) + body))
    assert frames[0].body == bytes(1000) and frames[0].compressed


def test_kinds_and_message_types() -> None:
    assert set(MESSAGE_TYPES) == set(Kind)
    for kind in Kind:
        if kind.is_request and kind is not Kind.GOODBYE:
            assert kind.answer == kind | 0x8000
            assert kind.answer in MESSAGE_TYPES
    assert {kind for kind in Kind if kind.is_request} >= {Kind.HELLO, Kind.SEND, Kind.UNSUBSCRIBE_RESULTS}
    assert not Kind.RESULT_EVENT.is_request and not Kind.ERROR.is_request


def test_kinds_are_the_protos_and_their_answers() -> None:
    """Kind holds every kind of pushrelay.proto's FrameKind, each answered request kind's answer, and nothing else."""
    proto = {value.name: value.number for value in pb.FrameKind.DESCRIPTOR.values if value.number != 0}
    assert {kind.name: kind.value for kind in Kind if not kind.value & 0x8000 or kind is Kind.ERROR} == proto
    answers = {kind.answer for kind in Kind if kind.is_request and kind is not Kind.GOODBYE}
    assert answers == {kind for kind in Kind if kind.value & 0x8000 and kind is not Kind.ERROR}
    assert Kind.PING.answer is Kind.PONG and Kind.SEND.answer is Kind.SEND_OK
    with pytest.raises(ValueError):
        Kind.GOODBYE.answer
    with pytest.raises(ValueError):
        Kind.SEND_OK.answer
    for name in proto:
        assert MESSAGE_TYPES[Kind[name]].DESCRIPTOR.name == "".join(word.capitalize() for word in name.split("_"))


def test_error_codes_match_the_proto() -> None:
    assert {code.name: code.value for code in ErrorCode} == {
        value.name: value.number for value in pb.ErrorCode.DESCRIPTOR.values
    }
    assert ErrorCode.from_wire(9999) is ErrorCode.INTERNAL


def test_encode_frame_checks_the_message_type() -> None:
    with pytest.raises(TypeError):
        encode_frame(Kind.PING, 1, pb.Pong(nonce=1))
    with pytest.raises(ValueError):
        encode_frame(Kind.PING, 1 << 32, pb.Ping())


def random_frame(rng: random.Random) -> bytes:
    """A frame that is plausible enough to reach every check: mutated vectors and random headers."""
    choice = rng.random()
    if choice < 0.4:
        data = bytearray(bytes.fromhex(rng.choice(DOCUMENT["vectors"])["hex"]))
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            if position < 12 and rng.random() < 0.7:
                continue  # mostly keep the header, so the body checks are reached
            data[position] = rng.randrange(256)
        return bytes(data)
    if choice < 0.7:
        kind = rng.choice(list(Kind)) if rng.random() < 0.8 else rng.randrange(0x10000)
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.3:
            compressor = zstandard.ZstdCompressor(write_content_size=rng.random() < 0.8)
            body = compressor.compress(body)
            if rng.random() < 0.5 and body:
                position = rng.randrange(len(body))
                body = body[:position] + bytes([rng.randrange(256)]) + body[position + 1 :]
        flags = rng.choice([0, 0, FLAG_ZSTD, FLAG_ZSTD, rng.randrange(256)])
        version = 1 if rng.random() < 0.9 else rng.randrange(256)
        return encode_header(len(body), kind, rng.randrange(1 << 32), flags=flags, version=version) + body
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))


def test_random_streams_raise_only_frame_errors() -> None:
    rng = random.Random(20240611)
    for _ in range(3000):
        data = b"".join(random_frame(rng) for _ in range(rng.randint(1, 5)))
        stream = FrameDecoder(max_frame_bytes=4096, max_decompressed_bytes=65536)
        position = 0
        while position < len(data):
            chunk = data[position : position + rng.randint(1, 64)]
            position += len(chunk)
            stream.feed(chunk)
            fatal = False
            while True:
                try:
                    if stream.next_frame() is None:
                        break
                except FrameError as error:
                    if error.fatal:
                        fatal = True
                        break
            if fatal:
                break

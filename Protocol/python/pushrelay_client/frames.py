"""Frames of the pushrelay wire protocol (Protocol/README.md, "Frames").

A frame is a 12-byte big-endian header (u32 body length, u8 version, u8 flags, u16 kind, u32 request
id) and a body: one protobuf message of the kind's type, zstd-compressed when flag ``0x01`` is set.
:func:`encode_frame` builds one; :class:`FrameDecoder` reads them from a byte stream with every limit
and refusal of the spec.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Dict, Iterator, List, Optional, Tuple, Type

import zstandard
from google.protobuf.message import DecodeError, Message

from . import pushrelay_pb2 as pb
from .errors import (
    BadCompression,
    BadFrame,
    DecompressedTooLarge,
    FrameTooLarge,
    InvalidBody,
    UnsupportedVersion,
)

PROTOCOL_VERSION = 1
"""The protocol version this package speaks."""

HEADER = struct.Struct(">IBBHI")
"""The frame header: body length, version, flags, kind, request id."""

HEADER_SIZE = HEADER.size

FLAG_ZSTD = 0x01
"""Flag bit 0: the body is one zstd frame. Bits 1-7 are reserved and must be 0."""

DEFAULT_MAX_FRAME_BYTES = 1_048_576
"""The relay's default ``max_frame_bytes``: largest body as sent."""

DEFAULT_MAX_DECOMPRESSED_BYTES = 4_194_304
"""The relay's default ``max_decompressed_bytes``: largest body after decompression."""

DEFAULT_ZSTD_LEVEL = 3
"""The zstd level :func:`encode_frame` compresses with."""

MAX_INFLATION_RATIO = 256
"""A zstd body may inflate to at most this many times its compressed size (beyond ``INFLATION_FLOOR_BYTES``)."""

INFLATION_FLOOR_BYTES = 16_384
"""A zstd body may always inflate to this many bytes, whatever its compressed size."""


def inflation_limit(compressed_bytes: int) -> int:
    """The most bytes a zstd body of ``compressed_bytes`` may inflate to (Protocol/README.md, "Compression")."""
    return max(INFLATION_FLOOR_BYTES, MAX_INFLATION_RATIO * compressed_bytes)

_ANSWER_BIT = 0x8000

_ANSWERS: Dict[str, Tuple[str, Type[Message]]] = {
    "HELLO": ("HELLO_OK", pb.HelloOk),
    "PING": ("PONG", pb.Pong),
    "REGISTER_DEVICE": ("REGISTER_DEVICE_OK", pb.RegisterDeviceResult),
    "UNREGISTER_DEVICE": ("UNREGISTER_DEVICE_OK", pb.UnregisterDeviceResult),
    "LIST_DEVICES": ("LIST_DEVICES_OK", pb.DeviceList),
    "SEND": ("SEND_OK", pb.SendResult),
    "JOB_STATUS": ("JOB_STATUS_OK", pb.Job),
    "QUERY_DELIVERIES": ("QUERY_DELIVERIES_OK", pb.DeliveryList),
    "CANCEL_JOB": ("CANCEL_JOB_OK", pb.Job),
    "LIST_NOTIFICATION_TYPES": ("LIST_NOTIFICATION_TYPES_OK", pb.NotificationTypeList),
    "SET_PREFERENCES": ("SET_PREFERENCES_OK", pb.Preferences),
    "GET_PREFERENCES": ("GET_PREFERENCES_OK", pb.Preferences),
    "SET_MUTE": ("SET_MUTE_OK", pb.Mute),
    "CLEAR_MUTE": ("CLEAR_MUTE_OK", pb.ClearMuteResult),
    "LIST_MUTES": ("LIST_MUTES_OK", pb.MuteList),
    "SET_PRESENCE": ("SET_PRESENCE_OK", pb.Presence),
    "SUBSCRIBE_RESULTS": ("SUBSCRIBE_RESULTS_OK", pb.Subscribed),
    "UNSUBSCRIBE_RESULTS": ("UNSUBSCRIBE_RESULTS_OK", pb.Subscribed),
}
"""What pushrelay.proto's ``FrameKind`` does not say: each request kind's answer, its name and its message
(Protocol/README.md, "Requests and answers"), by the request kind's name. GOODBYE is never answered."""


def _message_named_after(kind_name: str) -> Type[Message]:
    """The message a kind of pushrelay.proto's ``FrameKind`` carries: the one named after it (SEND: ``Send``)."""
    name = "".join(word.capitalize() for word in kind_name.split("_"))
    message = getattr(pb, name, None)
    if message is None:
        raise ImportError(f"pushrelay.proto's FrameKind {kind_name} has no message named {name}")
    return message


def _kinds_and_messages() -> List[Tuple[str, int, Type[Message]]]:
    """Every kind of pushrelay.proto's ``FrameKind`` with its message, each request kind followed by its answer."""
    kinds = []
    for value in pb.FrameKind.DESCRIPTOR.values:
        if value.number == pb.FRAME_KIND_UNSPECIFIED:
            continue
        kinds.append((value.name, value.number, _message_named_after(value.name)))
        if value.name in _ANSWERS:
            answer_name, answer_message = _ANSWERS[value.name]
            kinds.append((answer_name, value.number | _ANSWER_BIT, answer_message))
    return kinds


class _KindProperties(IntEnum):
    """What every frame kind tells; :class:`Kind` is made of it with the kinds of pushrelay.proto."""

    @property
    def is_request(self) -> bool:
        """True for the kinds a client sends as requests (``0x0001``-``0x3FFF``)."""
        return 0x0001 <= self.value <= 0x3FFF

    @property
    def answer(self) -> "_KindProperties":
        """The answer kind of a request kind (``K | 0x8000``); GOODBYE has none."""
        if self.is_request:
            try:
                return type(self)(self.value | _ANSWER_BIT)
            except ValueError:
                pass  # GOODBYE, never answered
        raise ValueError(f"{self.name} has no answer kind")


_KINDS = _kinds_and_messages()

Kind = _KindProperties("Kind", [(name, number) for name, number, _ in _KINDS], module=__name__, qualname="Kind")
Kind.__doc__ = """Frame kinds (Protocol/README.md, "Requests and answers"), made from pushrelay.proto's ``FrameKind``.

Requests are ``0x0001``-``0x3FFF``; the answer to request kind ``K`` is ``K | 0x8000``, named ``K_OK``
(``SEND_OK``; PING's is ``PONG``, and GOODBYE has none). ``RESULT_EVENT`` and ``ERROR`` come from the relay.
"""

MESSAGE_TYPES: Dict[int, Type[Message]] = {Kind[name]: message for name, _, message in _KINDS}
"""The protobuf message class of every :class:`Kind` (keys are Kind members)."""


def kind_of(value: int) -> int:
    """``value`` as a :class:`Kind` when it is one, else the plain integer (a kind this version lacks)."""
    try:
        return Kind(value)
    except ValueError:
        return value


@dataclass(frozen=True)
class Frame:
    """One decoded frame.

    Attributes:
        kind: a :class:`Kind`, or a plain integer for a kind this package does not know.
        request_id: the request id of the header.
        flags: the header's flags as received (``FLAG_ZSTD`` or 0).
        version: the header's version.
        body: the body after decompression.
        message: the body parsed as the kind's message; None for an unknown kind.
    """

    kind: int
    request_id: int
    flags: int
    version: int
    body: bytes
    message: Optional[Message]

    @property
    def compressed(self) -> bool:
        """True when the body arrived zstd-compressed."""
        return bool(self.flags & FLAG_ZSTD)


def encode_header(
    length: int, kind: int, request_id: int, *, flags: int = 0, version: int = PROTOCOL_VERSION
) -> bytes:
    """The 12-byte header for a body of ``length`` bytes (as sent)."""
    return HEADER.pack(length, version, flags, kind, request_id)


def encode_frame(
    kind: int,
    request_id: int,
    message: Message,
    compress: bool = False,
    *,
    version: int = PROTOCOL_VERSION,
    level: int = DEFAULT_ZSTD_LEVEL,
) -> bytes:
    """A whole frame: header and ``message`` serialized, zstd-compressed when ``compress``.

    The body is serialized deterministically (map entries sorted by key), so equal messages give
    equal bytes. A compressed body is one zstd frame that declares its content size, as the spec asks;
    a body that would inflate to more than :func:`inflation_limit` of its compressed size is sent as it is.

    Raises:
        TypeError: ``message`` is not the message type of a known ``kind``.
        ValueError: ``kind`` or ``request_id`` does not fit its header field.
    """
    expected = MESSAGE_TYPES.get(kind)
    if expected is not None and not isinstance(message, expected):
        raise TypeError(f"kind {kind:#06x} carries {expected.DESCRIPTOR.full_name}, not {type(message).__name__}")
    if not 0 <= kind <= 0xFFFF:
        raise ValueError(f"kind {kind} does not fit in 16 bits")
    if not 0 <= request_id <= 0xFFFFFFFF:
        raise ValueError(f"request id {request_id} does not fit in 32 bits")
    body = message.SerializeToString(deterministic=True)
    flags = 0
    if compress:
        compressed = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(body)
        if len(body) <= inflation_limit(len(compressed)):
            body = compressed
            flags = FLAG_ZSTD
    return encode_header(len(body), kind, request_id, flags=flags, version=version) + body


class FrameDecoder:
    """Reads frames from a byte stream, fed in pieces of any size.

    Each frame is checked in the order the relay checks it: the declared body length against
    ``max_frame_bytes`` (as soon as the header is in: :class:`FrameTooLarge`, after which the decoder
    refuses to go on), then the version (:class:`UnsupportedVersion`), the reserved flag bits
    (:class:`BadFrame`), a zstd body's declared content size (:class:`DecompressedTooLarge`, before
    anything is decompressed) and its decompression (:class:`BadCompression`), and the body as the kind's
    message (:class:`InvalidBody`). Except for ``FrameTooLarge``, a refused frame has been consumed when
    its error is raised: iterate again (:meth:`frames`) to go on with the next one.

    Frames of a kind this package does not know are returned with ``message`` None. ``version`` is the
    version every frame must carry (set it to the one HELLO_OK chose); the limits may be changed too.
    """

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
        version: int = PROTOCOL_VERSION,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.version = version
        self._buffer = bytearray()
        self._failure: Optional[FrameTooLarge] = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a returned or refused frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[Frame]:
        """Add ``data`` to the stream and iterate over the frames completed so far.

        The data is added at once, whether or not the iterator is consumed.
        """
        if data:
            self._buffer += data
        return self.frames()

    def frames(self) -> Iterator[Frame]:
        """Iterate over the complete frames buffered, raising a :class:`FrameError` for a refused one."""
        while True:
            frame = self.next_frame()
            if frame is None:
                return
            yield frame

    def next_frame(self) -> Optional[Frame]:
        """The next complete frame, or None when more bytes are needed.

        Raises:
            FrameError: the next frame is refused (see the class documentation).
        """
        if self._failure is not None:
            raise self._failure
        if len(self._buffer) < HEADER_SIZE:
            return None
        length, version, flags, kind, request_id = HEADER.unpack_from(self._buffer)
        if length > self.max_frame_bytes:
            self._failure = FrameTooLarge(
                f"body of {length} bytes declared, over max_frame_bytes {self.max_frame_bytes}",
                kind=kind,
                request_id=request_id,
            )
            raise self._failure
        end = HEADER_SIZE + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[HEADER_SIZE:end])
        del self._buffer[:end]
        return self._decode(version, flags, kind_of(kind), request_id, body)

    def _decode(self, version: int, flags: int, kind: int, request_id: int, body: bytes) -> Frame:
        if version != self.version:
            raise UnsupportedVersion(f"version {version}, expected {self.version}", kind=kind, request_id=request_id)
        if flags & ~FLAG_ZSTD:
            raise BadFrame(f"reserved flag bits set ({flags:#04x})", kind=kind, request_id=request_id)
        if flags & FLAG_ZSTD:
            body = self._decompress(body, kind, request_id)
        message_type = MESSAGE_TYPES.get(kind)
        message: Optional[Message] = None
        if message_type is not None:
            message = message_type()
            try:
                message.ParseFromString(body)
            except (DecodeError, ValueError) as error:
                raise InvalidBody(
                    f"body is not a valid {message_type.DESCRIPTOR.full_name}: {error}", kind=kind, request_id=request_id
                ) from None
        return Frame(kind=kind, request_id=request_id, flags=flags, version=version, body=body, message=message)

    def _decompress(self, body: bytes, kind: int, request_id: int) -> bytes:
        try:
            size = zstandard.get_frame_parameters(body).content_size
        except zstandard.ZstdError as error:
            raise BadCompression(f"not a zstd frame: {error}", kind=kind, request_id=request_id) from None
        if size == zstandard.CONTENTSIZE_UNKNOWN:
            raise DecompressedTooLarge(
                "the zstd frame does not declare its content size", kind=kind, request_id=request_id
            )
        if size > self.max_decompressed_bytes:
            raise DecompressedTooLarge(
                f"zstd frame declares {size} bytes, over max_decompressed_bytes {self.max_decompressed_bytes}",
                kind=kind,
                request_id=request_id,
            )
        if size > inflation_limit(len(body)):
            raise DecompressedTooLarge(
                f"zstd frame inflates {len(body)} bytes to {size}: more than {MAX_INFLATION_RATIO} times its size",
                kind=kind,
                request_id=request_id,
            )
        try:
            # With a declared size, the output buffer is exactly that size: more output is an error.
            data = zstandard.ZstdDecompressor().decompress(body, max_output_size=size, allow_extra_data=False)
        except zstandard.ZstdError as error:
            raise BadCompression(f"zstd body does not decompress: {error}", kind=kind, request_id=request_id) from None
        if len(data) != size:
            raise BadCompression(
                f"zstd body decompressed to {len(data)} bytes, declared {size}", kind=kind, request_id=request_id
            )
        return data

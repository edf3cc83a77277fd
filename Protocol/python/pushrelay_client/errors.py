"""Exceptions of the pushrelay client.

Every exception the package raises on purpose derives from :class:`PushRelayError`:

- :class:`RelayError`: the relay answered a request with an ERROR frame (its ``code`` says why);
- :class:`FrameError` and its subclasses: a frame that must be refused (too large, bad compression,
  reserved flags, another version, a body that is not valid protobuf), named after the error code the
  relay answers the same fault with;
- :class:`ConnectionClosed`: the connection ended before the answer arrived;
- :class:`ProtocolError`: the relay sent something this client cannot match to a request.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Dict, Optional, Type


class ErrorCode(IntEnum):
    """The codes of an ERROR frame (``pushrelay.v1.ErrorCode``); see pushrelay.proto for each meaning."""

    ERROR_CODE_UNSPECIFIED = 0
    BAD_FRAME = 1
    UNSUPPORTED_VERSION = 2
    UNKNOWN_KIND = 3
    FRAME_TOO_LARGE = 4
    DECOMPRESSED_TOO_LARGE = 5
    BAD_COMPRESSION = 6
    INVALID_BODY = 7
    INVALID_ARGUMENT = 8
    HELLO_REQUIRED = 9
    AUTHENTICATION_FAILED = 10
    NOT_FOUND = 11
    TOO_MANY_RECIPIENTS = 12
    RATE_LIMITED = 13
    NOT_SUPPORTED = 14
    INTERNAL = 15
    UNAVAILABLE = 16
    DUPLICATE_REQUEST_ID = 17
    SHUTTING_DOWN = 18
    ALREADY_AUTHENTICATED = 19
    NO_PROVIDER_KEY = 20
    PROVIDER_KEY_UNREADABLE = 21
    TOO_MANY_CONNECTIONS = 22

    @classmethod
    def from_wire(cls, value: int) -> "ErrorCode":
        """The code for a wire value; an unknown value is ``INTERNAL``, as the spec asks."""
        try:
            return cls(value)
        except ValueError:
            return cls.INTERNAL


class PushRelayError(Exception):
    """Base class of every exception this package raises on purpose."""


class RelayError(PushRelayError):
    """The relay answered a request with an ERROR frame.

    Attributes:
        code: the error code (an unknown wire value becomes ``ErrorCode.INTERNAL``).
        message: the relay's sentence for people.
        retry_after_ms: with ``RATE_LIMITED`` and ``UNAVAILABLE``: when to try again.
        field: the field at fault (``send.alert.title``, or ``send`` for a rule on several fields): always with
            ``INVALID_ARGUMENT`` and ``TOO_MANY_RECIPIENTS``, with ``NOT_FOUND`` and ``INVALID_BODY`` when a field
            is at fault (Protocol/README.md, "Field rules", lists every one).
        request_id: the request id of the ERROR frame (0 for an error about the connection).
        wire_code: the code as received, also when it is not in :class:`ErrorCode`.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str = "",
        retry_after_ms: int = 0,
        field: str = "",
        *,
        request_id: int = 0,
        wire_code: Optional[int] = None,
    ) -> None:
        self.code = code
        self.message = message
        self.retry_after_ms = retry_after_ms
        self.field = field
        self.request_id = request_id
        self.wire_code = int(code) if wire_code is None else wire_code
        text = f"{code.name}: {message}" if message else code.name
        if field:
            text += f" (field {field})"
        if retry_after_ms:
            text += f" (retry after {retry_after_ms} ms)"
        super().__init__(text)


class ConnectionClosed(PushRelayError):
    """The connection closed (or could not be opened) before an answer arrived.

    A request that was in flight may or may not have taken effect; repeat a Send with the same
    idempotency key to be sure it happens once.
    """


class ProtocolError(PushRelayError):
    """The relay sent a frame this client cannot make sense of (an answer of the wrong kind, say)."""


class FrameError(PushRelayError):
    """A frame that must be refused, with the header fields that were read.

    Subclasses are named after the ``ErrorCode`` the relay answers the same fault with (``code``).
    ``fatal`` is True when the stream cannot go on (the body was not read: ``FrameTooLarge``); after the
    other refusals the frame has been skipped and decoding continues with the next frame.
    """

    code: ErrorCode = ErrorCode.BAD_FRAME
    fatal: bool = False

    def __init__(self, message: str, *, kind: int = 0, request_id: int = 0) -> None:
        self.kind = kind
        self.request_id = request_id
        super().__init__(f"{self.code.name}: {message}")


class BadFrame(FrameError):
    """The header has reserved flag bits set."""

    code = ErrorCode.BAD_FRAME


class UnsupportedVersion(FrameError):
    """The frame's version is not the one expected on this connection."""

    code = ErrorCode.UNSUPPORTED_VERSION


class FrameTooLarge(FrameError):
    """The header declares a body over ``max_frame_bytes``; the body is not read, the stream is over."""

    code = ErrorCode.FRAME_TOO_LARGE
    fatal = True


class DecompressedTooLarge(FrameError):
    """A zstd body declares no content size, one over ``max_decompressed_bytes``, or one over its inflation limit."""

    code = ErrorCode.DECOMPRESSED_TOO_LARGE


class BadCompression(FrameError):
    """A zstd body is corrupt, is not exactly one frame, or does not match its declared size."""

    code = ErrorCode.BAD_COMPRESSION


class InvalidBody(FrameError):
    """The body is not a valid protobuf message of the kind's type."""

    code = ErrorCode.INVALID_BODY


FRAME_ERRORS: Dict[ErrorCode, Type[FrameError]] = {
    cls.code: cls
    for cls in (BadFrame, UnsupportedVersion, FrameTooLarge, DecompressedTooLarge, BadCompression, InvalidBody)
}
"""The FrameError subclass for each error code a frame decoder can refuse a frame with."""

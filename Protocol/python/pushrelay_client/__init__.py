"""Python client of the pushrelay wire protocol (Protocol/README.md).

- :class:`AsyncRelayClient` (asyncio) and :class:`RelayClient` (blocking): one pipelined connection
  to the relay, a method per request, protobuf messages back (``pushrelay_client.pb``).
- :func:`encode_frame`, :class:`FrameDecoder`, :class:`Kind`: the frame layer, for tools and tests.
- :class:`RelayError` (an ERROR frame, with its :class:`ErrorCode`), :class:`ConnectionClosed`,
  :class:`FrameError` and its subclasses: everything the package raises derives from
  :class:`PushRelayError`.
"""

from . import pushrelay_pb2 as pb
from .blocking import BlockingResultStream, RelayClient
from .client import AsyncRelayClient, ResultStream
from .errors import (
    BadCompression,
    BadFrame,
    ConnectionClosed,
    DecompressedTooLarge,
    ErrorCode,
    FrameError,
    FrameTooLarge,
    InvalidBody,
    ProtocolError,
    PushRelayError,
    RelayError,
    UnsupportedVersion,
)
from .frames import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ZSTD,
    HEADER_SIZE,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    Kind,
    encode_frame,
    encode_header,
)
from .version import __version__

__all__ = [
    "AsyncRelayClient",
    "BadCompression",
    "BadFrame",
    "BlockingResultStream",
    "ConnectionClosed",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DecompressedTooLarge",
    "ErrorCode",
    "FLAG_ZSTD",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "HEADER_SIZE",
    "InvalidBody",
    "Kind",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "ProtocolError",
    "PushRelayError",
    "RelayClient",
    "RelayError",
    "ResultStream",
    "UnsupportedVersion",
    "__version__",
    "encode_frame",
    "encode_header",
    "pb",
]

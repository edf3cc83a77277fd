"""The asyncio client: :class:`AsyncRelayClient`.

One TCP (or TLS) connection to the relay carries every request, pipelined: each request gets the next
request id, its answer completes the future waiting under that id, and a reader task dispatches the
frames as they arrive (answers may come in any order). When the connection is gone (the relay closed
it, said GOODBYE, or the network failed), the next request opens a new one, retrying with exponential
backoff; a request that was in flight when the connection dropped fails with
:class:`~pushrelay_client.errors.ConnectionClosed` and is not repeated.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl as ssl_module
from collections import deque
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from google.protobuf.message import Message

from . import pushrelay_pb2 as pb
from .errors import (
    ConnectionClosed,
    ErrorCode,
    FrameError,
    FrameTooLarge,
    ProtocolError,
    PushRelayError,
    RelayError,
)
from .frames import (
    HEADER_SIZE,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    Kind,
    encode_frame,
)
from .version import __version__

logger = logging.getLogger("pushrelay_client")

DEFAULT_CLIENT_NAME = f"pushrelay-client-python/{__version__}"

COMPRESS_THRESHOLD = 8192
"""Request bodies larger than this many bytes are sent zstd-compressed (the spec's rule of thumb)."""

RESULT_BUFFER = 10_000
"""Result events a :class:`ResultStream` keeps unread; beyond it the oldest are dropped."""

DEFAULT_MAX_ANSWER_BYTES = 16 * 1_048_576
"""Largest answer body (as received) the client reads by default."""

_READ_SIZE = 65536
_NO_RETRY = (ErrorCode.AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_VERSION)

EnvironmentArg = Union[int, str]
"""A ``pushrelay.v1.Environment``: its number or its name (``"PRODUCTION"``, ``"SANDBOX"``)."""

AnswerT = TypeVar("AnswerT", bound=Message)


def relay_error(error: pb.Error, request_id: int) -> RelayError:
    """The :class:`RelayError` of an ERROR frame's message."""
    return RelayError(
        ErrorCode.from_wire(error.code),
        error.message,
        error.retry_after_ms,
        error.field,
        request_id=request_id,
        wire_code=error.code,
    )


class ResultStream:
    """The results stream of one SUBSCRIBE_RESULTS: an async iterator of ``pb.ResultEvent``.

    Iteration ends (``StopAsyncIteration``) after :meth:`AsyncRelayClient.unsubscribe`; it raises
    :class:`ConnectionClosed` when the connection ends (subscribe again on the next connection) and
    :class:`RelayError` when the relay ends the subscription with an ERROR. Events not yet read are
    kept up to ``RESULT_BUFFER``; beyond that the oldest are dropped and counted in ``dropped``.
    """

    def __init__(self, request_id: int, connection: "_Connection", buffer_size: int = RESULT_BUFFER) -> None:
        self.request_id = request_id
        """The subscription's request id (RESULT_EVENT frames carry it)."""
        self.dropped = 0
        """Events dropped because the buffer was full."""
        self._connection = connection
        self._buffer_size = buffer_size
        self._events: Deque[pb.ResultEvent] = deque()
        self._ended = False
        self._error: Optional[PushRelayError] = None
        self._wakeup = asyncio.Event()

    @property
    def active(self) -> bool:
        """True until the stream has ended (events may still be buffered)."""
        return not self._ended

    def _push(self, event: pb.ResultEvent) -> None:
        if self._ended:
            return
        if len(self._events) >= self._buffer_size:
            self._events.popleft()
            self.dropped += 1
        self._events.append(event)
        self._wakeup.set()

    def _finish(self, error: Optional[PushRelayError]) -> None:
        if not self._ended:
            self._ended = True
            self._error = error
            self._wakeup.set()

    def __aiter__(self) -> "ResultStream":
        return self

    async def __anext__(self) -> pb.ResultEvent:
        while True:
            if self._events:
                return self._events.popleft()
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()


class _Connection:
    """One authenticated connection: request ids, pending answers, result streams, the reader task."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        decoder: FrameDecoder,
        hello_ok: pb.HelloOk,
        keepalive_interval: Optional[float],
        on_closed: Callable[["_Connection"], None],
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = decoder
        self.hello_ok = hello_ok
        self.pending: Dict[int, Tuple[int, "asyncio.Future[Message]"]] = {}
        self.streams: Dict[int, ResultStream] = {}
        self.goodbye_received = False
        self.goodbye_sent = False
        self.closed = asyncio.Event()
        self.connection_error: Optional[RelayError] = None
        self._on_closed = on_closed
        self._next_id = 2  # 1 was HELLO
        self._write_lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self.last_sent = self._loop.time()
        self.last_received = self.last_sent
        self._reader_task = self._loop.create_task(self._read_loop())
        self._keepalive_task: Optional["asyncio.Task[None]"] = None
        if keepalive_interval:
            self._keepalive_task = self._loop.create_task(self._keepalive(keepalive_interval))

    @property
    def usable(self) -> bool:
        """True while new requests may be sent on this connection."""
        return not (self.closed.is_set() or self.goodbye_received or self.goodbye_sent)

    def allocate_id(self) -> int:
        """The next request id not in flight (non-zero; the counter wraps)."""
        while True:
            request_id = self._next_id
            self._next_id = self._next_id + 1 if self._next_id < 0xFFFFFFFF else 1
            if request_id not in self.pending and request_id not in self.streams:
                return request_id

    async def send(self, kind: int, request_id: int, message: Message) -> None:
        """Write one frame (compressed when large); fails with ConnectionClosed if the connection is gone."""
        data = encode_frame(kind, request_id, message, compress=message.ByteSize() > COMPRESS_THRESHOLD)
        limit = self.hello_ok.max_frame_bytes
        if limit and len(data) - HEADER_SIZE > limit:
            raise FrameTooLarge(
                f"request body of {len(data) - HEADER_SIZE} bytes is over the relay's max_frame_bytes {limit}",
                kind=kind,
                request_id=request_id,
            )
        async with self._write_lock:
            if self.closed.is_set():
                raise self._closed_error()
            try:
                self.writer.write(data)
                self.last_sent = self._loop.time()
                await self.writer.drain()
            except (OSError, RuntimeError) as error:
                raise ConnectionClosed(f"connection lost while sending: {error}") from error

    async def call(self, kind: int, message: Message) -> Message:
        """Send a request and wait for its answer (the kind ``kind | 0x8000``)."""
        if not self.usable:
            raise self._closed_error()
        request_id = self.allocate_id()
        future: "asyncio.Future[Message]" = self._loop.create_future()
        self.pending[request_id] = (kind | 0x8000, future)
        try:
            await self.send(kind, request_id, message)
            return await future
        finally:
            self.pending.pop(request_id, None)

    async def subscribe(self, receipts: bool) -> ResultStream:
        """SUBSCRIBE_RESULTS: the stream is registered before the request goes out."""
        if not self.usable:
            raise self._closed_error()
        request_id = self.allocate_id()
        stream = ResultStream(request_id, self)
        future: "asyncio.Future[Message]" = self._loop.create_future()
        self.streams[request_id] = stream
        self.pending[request_id] = (Kind.SUBSCRIBE_RESULTS_OK, future)
        try:
            await self.send(Kind.SUBSCRIBE_RESULTS, request_id, pb.SubscribeResults(receipts=receipts))
            await future
        except BaseException:
            self.streams.pop(request_id, None)
            raise
        finally:
            self.pending.pop(request_id, None)
        return stream

    async def goodbye(self, reason: str) -> None:
        """Send GOODBYE (a fresh request id; it has no answer) unless the connection is already closing."""
        if self.goodbye_sent or self.closed.is_set():
            return
        self.goodbye_sent = True
        await self.send(Kind.GOODBYE, self.allocate_id(), pb.Goodbye(reason=reason))

    def abort(self, error: Optional[PushRelayError] = None) -> None:
        """Close at once: pending requests and streams fail with ConnectionClosed."""
        self._finish(error or ConnectionClosed("connection closed by the client"))
        self._reader_task.cancel()

    def _closed_error(self) -> ConnectionClosed:
        if self.goodbye_received:
            return ConnectionClosed("the relay said GOODBYE on this connection")
        if self.goodbye_sent:
            return ConnectionClosed("the client said GOODBYE on this connection")
        text = "connection closed"
        if self.connection_error is not None:
            text += f" after the relay's error {self.connection_error}"
        return ConnectionClosed(text)

    async def _read_loop(self) -> None:
        error: Optional[PushRelayError] = None
        try:
            self._dispatch_buffered()
            while True:
                data = await self.reader.read(_READ_SIZE)
                if not data:
                    break
                self.last_received = self._loop.time()
                self.decoder.feed(data)
                self._dispatch_buffered()
        except FrameError as refused:
            error = ConnectionClosed(f"the relay sent a frame this client cannot read: {refused}")
        except OSError as lost:
            error = ConnectionClosed(f"connection lost: {lost}")
        finally:
            self._finish(error or self._closed_error())

    def _dispatch_buffered(self) -> None:
        while True:
            try:
                frame = self.decoder.next_frame()
            except FrameError as refused:
                if refused.fatal:
                    raise
                entry = self.pending.pop(refused.request_id, None)
                if entry is not None and not entry[1].done():
                    entry[1].set_exception(refused)
                else:
                    logger.warning("pushrelay: skipped a frame from the relay: %s", refused)
                continue
            if frame is None:
                return
            self._dispatch(frame)

    def _dispatch(self, frame: Frame) -> None:
        request_id = frame.request_id
        if frame.kind == Kind.GOODBYE:
            self.goodbye_received = True
            assert isinstance(frame.message, pb.Goodbye)
            logger.info("pushrelay: the relay said GOODBYE (%s)", frame.message.reason or "no reason")
            return
        if frame.kind == Kind.RESULT_EVENT:
            stream = self.streams.get(request_id)
            if stream is not None:
                assert isinstance(frame.message, pb.ResultEvent)
                stream._push(frame.message)
            return
        if frame.kind == Kind.ERROR:
            assert isinstance(frame.message, pb.Error)
            error = relay_error(frame.message, request_id)
            entry = self.pending.pop(request_id, None)
            stream = self.streams.pop(request_id, None)
            if entry is not None and not entry[1].done():
                entry[1].set_exception(error)
            elif stream is not None:
                stream._finish(error)
            elif request_id == 0:
                self.connection_error = error
                logger.warning("pushrelay: the relay reported an error on the connection: %s", error)
            return
        entry = self.pending.pop(request_id, None)
        if entry is None or entry[1].done():
            logger.debug("pushrelay: answer %#06x for request %d that nobody waits for", frame.kind, request_id)
            return
        expected, future = entry
        if frame.kind != expected or frame.message is None:
            future.set_exception(
                ProtocolError(f"request {request_id} expected kind {expected:#06x}, got {frame.kind:#06x}")
            )
        else:
            future.set_result(frame.message)

    async def _keepalive(self, interval: float) -> None:
        while self.usable:
            idle = self._loop.time() - self.last_sent
            if idle < interval:
                await asyncio.sleep(interval - idle)
                continue
            try:
                await asyncio.wait_for(self.call(Kind.PING, pb.Ping(nonce=random.getrandbits(64))), interval)
            except asyncio.TimeoutError:
                # A relay that sent anything meanwhile is alive (busy, or holding back reads).
                if self._loop.time() - self.last_received >= interval:
                    self.abort(ConnectionClosed(f"the relay sent nothing for {interval} s, not even a PONG"))
                    return
            except PushRelayError:
                return

    def _finish(self, error: PushRelayError) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for _, future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed(str(error)))
        self.pending.clear()
        for stream in self.streams.values():
            stream._finish(ConnectionClosed(str(error)))
        self.streams.clear()
        if self._keepalive_task is not None and self._keepalive_task is not asyncio.current_task():
            self._keepalive_task.cancel()
        self.writer.close()
        self._on_closed(self)


class AsyncRelayClient:
    """An asyncio client of the pushrelay wire protocol (Protocol/README.md).

    Create it with :meth:`connect` (or construct it and call :meth:`open`), then call the request
    methods; each takes keyword arguments, sends one request, and returns the relay's answer message
    (``pushrelay_client.pb``), or raises :class:`RelayError` when the relay answers with an ERROR
    frame. Requests may be issued concurrently from many tasks: they share one pipelined connection.
    Use the client from the event loop it was created on. ``async with`` closes it.

    Args:
        host, port: where the relay listens.
        tenant: the tenant id (``"circl"``).
        credential: the tenant's ``prk_…`` secret.
        ssl: an ``ssl.SSLContext`` for TLS (with a client certificate loaded when the relay asks for one).
        server_hostname: the name the relay's certificate is checked against (default: ``host``).
        client_name: free text for the relay's logs.
        connect_timeout: seconds for TCP, TLS and HELLO together.
        reconnect_attempts: connection attempts when a request finds the connection gone: the first
            at once, then after 1, 2, 4, ... seconds (at most ``backoff_max``), each with jitter.
        backoff_max: the longest wait between attempts, in seconds.
        keepalive_interval: PING after this many quiet seconds (None: never), and drop a connection
            from which nothing, not even the PONG, arrives within as long.
        max_answer_bytes: largest body (as received) accepted from the relay.
        max_answer_decompressed_bytes: largest decompressed body accepted from the relay.
    """

    def __init__(
        self,
        host: str,
        port: int,
        tenant: str,
        credential: str,
        *,
        ssl: Optional[ssl_module.SSLContext] = None,
        server_hostname: Optional[str] = None,
        client_name: str = DEFAULT_CLIENT_NAME,
        connect_timeout: float = 10.0,
        reconnect_attempts: int = 8,
        backoff_max: float = 30.0,
        keepalive_interval: Optional[float] = 30.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        max_answer_decompressed_bytes: int = 4 * DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.host = host
        self.port = port
        self.tenant = tenant
        self._credential = credential
        self._ssl = ssl
        self._server_hostname = server_hostname
        self.client_name = client_name
        self.connect_timeout = connect_timeout
        self.reconnect_attempts = max(1, reconnect_attempts)
        self.backoff_max = backoff_max
        self.keepalive_interval = keepalive_interval
        self.max_answer_bytes = max_answer_bytes
        self.max_answer_decompressed_bytes = max_answer_decompressed_bytes
        self._connection: Optional[_Connection] = None
        self._connections: Set[_Connection] = set()
        self._connect_lock: Optional[asyncio.Lock] = None
        self._closed = False

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        tenant: str,
        credential: str,
        *,
        ssl: Optional[ssl_module.SSLContext] = None,
        client_name: str = DEFAULT_CLIENT_NAME,
        **options: Any,
    ) -> "AsyncRelayClient":
        """Connect and authenticate (one attempt); ``options`` are the other constructor arguments.

        Raises:
            RelayError: the relay refused HELLO (``AUTHENTICATION_FAILED``, ``UNSUPPORTED_VERSION``).
            ConnectionClosed: the relay could not be reached or closed the connection.
        """
        client = cls(host, port, tenant, credential, ssl=ssl, client_name=client_name, **options)
        await client.open()
        return client

    async def open(self) -> pb.HelloOk:
        """Open the connection now (one attempt) and return the relay's HELLO_OK."""
        if self._connection is None or not self._connection.usable:
            self._connection = await self._open_connection()
        return self._connection.hello_ok

    @property
    def hello_ok(self) -> Optional[pb.HelloOk]:
        """The HELLO_OK of the current connection (version and limits), None before the first one."""
        return self._connection.hello_ok if self._connection is not None else None

    @property
    def connected(self) -> bool:
        """True while the current connection takes requests."""
        return self._connection is not None and self._connection.usable

    async def __aenter__(self) -> "AsyncRelayClient":
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self, timeout: float = 10.0) -> None:
        """Close gracefully: send GOODBYE, let the relay answer what is in flight, wait until it closes.

        After ``timeout`` seconds the connection is dropped; requests still in flight then fail with
        :class:`ConnectionClosed`. The client does not reconnect afterwards.
        """
        self._closed = True
        connection = self._connection
        if connection is not None and not connection.closed.is_set():
            try:
                await connection.goodbye("client closing")
                await asyncio.wait_for(connection.closed.wait(), timeout)
            except (PushRelayError, asyncio.TimeoutError):
                pass
        for leftover in list(self._connections):
            leftover.abort()
        self._connections.clear()

    # -- requests ---------------------------------------------------------------------------------

    async def request(self, kind: int, message: Message) -> Message:
        """Send a request of any kind and return its answer's message.

        The request methods below are built on it; with a kind this package does not know, it tells
        whether the relay supports it (an old relay answers ``UNKNOWN_KIND``).

        Raises:
            RelayError: the relay answered with an ERROR frame.
            ProtocolError: the answer is not of kind ``kind | 0x8000``, or this package cannot parse it.
        """
        connection = await self._usable_connection()
        return await connection.call(kind, message)

    async def ping(self, nonce: Optional[int] = None) -> pb.Pong:
        """PING: the relay echoes ``nonce`` (random when not given) in its PONG."""
        if nonce is None:
            nonce = random.getrandbits(64)
        pong = await self._call(Kind.PING, pb.Ping(nonce=nonce), pb.Pong)
        if pong.nonce != nonce:
            raise ProtocolError(f"PONG echoed nonce {pong.nonce}, sent {nonce}")
        return pong

    async def register_device(
        self,
        *,
        user_id: str,
        token: str,
        platform: str = "ios",
        environment: EnvironmentArg = "PRODUCTION",
        device_id: str = "",
        app_version: str = "",
        locale: str = "",
        time_zone: str = "",
        topics: Iterable[str] = (),
        provider: str = "",
    ) -> pb.RegisterDeviceResult:
        """REGISTER_DEVICE: register ``token`` for ``user_id`` under the tenant's token policy.

        ``provider`` is the push service the token belongs to: ``"apns"`` (the default when empty; the token is
        64-200 hex digits and ``environment`` is required) or another the relay sends to (``"fcm"``), whose token
        is kept byte for byte and whose ``environment`` is ignored.
        """
        message = pb.RegisterDevice(
            user_id=user_id,
            token=token,
            provider=provider,
            platform=platform,
            environment=environment,  # type: ignore[arg-type]
            device_id=device_id,
            app_version=app_version,
            locale=locale,
            time_zone=time_zone,
            topics=list(topics),
        )
        return await self._call(Kind.REGISTER_DEVICE, message, pb.RegisterDeviceResult)

    async def unregister_device(
        self, *, token: str = "", user_id: str = "", platform: str = ""
    ) -> pb.UnregisterDeviceResult:
        """UNREGISTER_DEVICE: remove by ``token``, or by ``user_id`` and ``platform``."""
        message = pb.UnregisterDevice(token=token, user_id=user_id, platform=platform)
        return await self._call(Kind.UNREGISTER_DEVICE, message, pb.UnregisterDeviceResult)

    async def list_devices(self, *, user_id: str, limit: int = 0, cursor: str = "") -> pb.DeviceList:
        """LIST_DEVICES: a page of the user's devices (``next_cursor`` of the answer asks for the next)."""
        message = pb.ListDevices(user_id=user_id, limit=limit, cursor=cursor)
        return await self._call(Kind.LIST_DEVICES, message, pb.DeviceList)

    async def send(
        self,
        *,
        notification_type: str,
        user_ids: Iterable[str] = (),
        tokens: Iterable[str] = (),
        topic: str = "",
        exclude_user_ids: Iterable[str] = (),
        idempotency_key: str = "",
        alert: Optional[Union[pb.Alert, Mapping[str, Any]]] = None,
        badge: Optional[int] = None,
        sound: str = "",
        thread_id: str = "",
        category: str = "",
        content_available: bool = False,
        mutable_content: bool = False,
        interruption_level: str = "",
        relevance_score: Optional[float] = None,
        custom_json: Union[str, Mapping[str, Any]] = "",
        template_values: Optional[Mapping[str, str]] = None,
        collapse_id: str = "",
        expiration: Optional[int] = None,
        priority: Optional[int] = None,
        wait: bool = False,
        scope: str = "",
        send_at_ms: int = 0,
        send_at_local: str = "",
    ) -> pb.SendResult:
        """SEND: one notification to exactly one audience (``user_ids``, ``tokens`` or ``topic``).

        ``alert`` is a ``pb.Alert`` or a mapping of its fields (``{"title": ..., "body": ...}``);
        ``custom_json`` is a JSON object's text or a mapping (serialized here); ``template_values``
        fill the type's thread-id and category templates. The answer comes once the job is committed,
        or with ``wait`` once every device has its APNs outcome (``SendResult.outcomes``). Optional
        numbers left None are absent (the type's setting applies). ``send_at_ms`` (Unix ms) or
        ``send_at_local`` (``"2026-11-22T00:00"`` in each recipient's time zone) schedule the job.
        """
        message = pb.Send(
            notification_type=notification_type,
            user_ids=list(user_ids),
            tokens=[pb.TokenTarget(token=token) for token in tokens],
            topic=topic,
            exclude_user_ids=list(exclude_user_ids),
            idempotency_key=idempotency_key,
            sound=sound,
            thread_id=thread_id,
            category=category,
            content_available=content_available,
            mutable_content=mutable_content,
            interruption_level=interruption_level,
            custom_json=custom_json if isinstance(custom_json, str) else json.dumps(custom_json),
            template_values=dict(template_values or {}),
            collapse_id=collapse_id,
            wait=wait,
            scope=scope,
            send_at_ms=send_at_ms,
            send_at_local=send_at_local,
        )
        if alert is not None:
            message.alert.CopyFrom(alert if isinstance(alert, pb.Alert) else pb.Alert(**alert))
        if badge is not None:
            message.badge = badge
        if relevance_score is not None:
            message.relevance_score = relevance_score
        if expiration is not None:
            message.expiration = expiration
        if priority is not None:
            message.priority = priority
        return await self._call(Kind.SEND, message, pb.SendResult)

    async def job_status(self, *, job_id: str) -> pb.Job:
        """JOB_STATUS: a job's state and counts (``NOT_FOUND`` for another tenant's job)."""
        return await self._call(Kind.JOB_STATUS, pb.JobStatus(job_id=job_id), pb.Job)

    async def cancel_job(self, *, job_id: str) -> pb.Job:
        """CANCEL_JOB: nothing more of a scheduled or running job is sent; answers the job."""
        return await self._call(Kind.CANCEL_JOB, pb.CancelJob(job_id=job_id), pb.Job)

    async def query_deliveries(
        self,
        *,
        job_id: str = "",
        user_id: str = "",
        token: str = "",
        from_ms: int = 0,
        to_ms: int = 0,
        limit: int = 0,
        cursor: str = "",
    ) -> pb.DeliveryList:
        """QUERY_DELIVERIES: a page of recorded APNs attempts by exactly one of job, user, token or time range
        (``next_cursor`` of the answer, passed as ``cursor`` with the same filter, asks for the next)."""
        message = pb.QueryDeliveries(
            job_id=job_id, user_id=user_id, token=token, from_ms=from_ms, to_ms=to_ms, limit=limit, cursor=cursor
        )
        return await self._call(Kind.QUERY_DELIVERIES, message, pb.DeliveryList)

    async def set_preferences(
        self, *, user_id: str, preferences: Union[Mapping[str, bool], Iterable[pb.TypePreference]]
    ) -> pb.Preferences:
        """SET_PREFERENCES: turn notification types on or off (``{"announcement": False}``) for a user."""
        if isinstance(preferences, Mapping):
            items = [pb.TypePreference(notification_type=name, enabled=on) for name, on in preferences.items()]
        else:
            items = list(preferences)
        message = pb.SetPreferences(user_id=user_id, preferences=items)
        return await self._call(Kind.SET_PREFERENCES, message, pb.Preferences)

    async def get_preferences(self, *, user_id: str) -> pb.Preferences:
        """GET_PREFERENCES: every notification type of the tenant with the user's effective setting."""
        return await self._call(Kind.GET_PREFERENCES, pb.GetPreferences(user_id=user_id), pb.Preferences)

    async def set_mute(self, *, user_id: str, thread_id: str = "", scope: str = "", until_ms: int = 0) -> pb.Mute:
        """SET_MUTE: mute a thread or a scope (exactly one) until ``until_ms`` (0: until cleared)."""
        message = pb.SetMute(user_id=user_id, thread_id=thread_id, scope=scope, until_ms=until_ms)
        return await self._call(Kind.SET_MUTE, message, pb.Mute)

    async def clear_mute(self, *, user_id: str, thread_id: str = "", scope: str = "") -> pb.ClearMuteResult:
        """CLEAR_MUTE: lift a thread's or a scope's mute."""
        message = pb.ClearMute(user_id=user_id, thread_id=thread_id, scope=scope)
        return await self._call(Kind.CLEAR_MUTE, message, pb.ClearMuteResult)

    async def list_notification_types(self) -> pb.NotificationTypeList:
        """LIST_NOTIFICATION_TYPES: the tenant's notification types, as its tenant file declares them."""
        return await self._call(Kind.LIST_NOTIFICATION_TYPES, pb.ListNotificationTypes(), pb.NotificationTypeList)

    async def list_mutes(self, *, user_id: str) -> pb.MuteList:
        """LIST_MUTES: the user's mutes in force."""
        return await self._call(Kind.LIST_MUTES, pb.ListMutes(user_id=user_id), pb.MuteList)

    async def set_presence(self, *, user_id: str, thread_id: str, seconds: int) -> pb.Presence:
        """SET_PRESENCE: the user is active in ``thread_id`` for ``seconds`` (0 clears it)."""
        message = pb.SetPresence(user_id=user_id, thread_id=thread_id, seconds=seconds)
        return await self._call(Kind.SET_PRESENCE, message, pb.Presence)

    async def subscribe_results(self, *, receipts: bool = False) -> ResultStream:
        """SUBSCRIBE_RESULTS: a :class:`ResultStream` of dead tokens and held devices (and receipts when ``receipts``).

        The stream belongs to the current connection: it ends with :class:`ConnectionClosed` when that
        connection does.
        """
        connection = await self._usable_connection()
        return await connection.subscribe(receipts)

    async def unsubscribe(self, stream: ResultStream) -> pb.Subscribed:
        """UNSUBSCRIBE_RESULTS: stop ``stream``; its iteration ends once the relay has answered."""
        connection = stream._connection
        if not connection.usable or connection.streams.get(stream.request_id) is not stream:
            # The connection is going or gone, and the subscription with it.
            connection.streams.pop(stream.request_id, None)
            stream._finish(None)
            return pb.Subscribed()
        message = pb.UnsubscribeResults(subscription_request_id=stream.request_id)
        answer = await connection.call(Kind.UNSUBSCRIBE_RESULTS, message)
        if not isinstance(answer, pb.Subscribed):
            raise ProtocolError(f"UNSUBSCRIBE_RESULTS answered with {type(answer).__name__}")
        connection.streams.pop(stream.request_id, None)
        stream._finish(None)
        return answer

    # -- connections ------------------------------------------------------------------------------

    async def _call(self, kind: Kind, message: Message, answer_type: Type[AnswerT]) -> AnswerT:
        answer = await self.request(kind, message)
        if not isinstance(answer, answer_type):
            raise ProtocolError(f"{kind.name} answered with {type(answer).__name__}")
        return answer

    async def _usable_connection(self) -> _Connection:
        """The current connection, or a new one (with backoff) when it is gone."""
        if self._closed:
            raise ConnectionClosed("the client is closed")
        if self._connection is not None and self._connection.usable:
            return self._connection
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._connection is None or not self._connection.usable:
                self._connection = await self._reconnect()
            return self._connection

    async def _reconnect(self) -> _Connection:
        delay = 1.0
        last_error: Optional[BaseException] = None
        for attempt in range(self.reconnect_attempts):
            if attempt > 0:
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.backoff_max)
            if self._closed:
                break
            try:
                return await self._open_connection()
            except RelayError as error:
                if error.code in _NO_RETRY:
                    raise
                last_error = error
            except ConnectionClosed as error:
                last_error = error
            logger.info("pushrelay: connection attempt %d to %s:%d failed: %s", attempt + 1, self.host, self.port, last_error)
        raise ConnectionClosed(
            f"cannot reconnect to {self.host}:{self.port} after {self.reconnect_attempts} attempts: {last_error}"
        ) from last_error

    async def _open_connection(self) -> _Connection:
        """TCP (TLS), HELLO, HELLO_OK; raises RelayError or ConnectionClosed."""
        try:
            reader, writer, decoder, hello_ok = await asyncio.wait_for(self._handshake(), self.connect_timeout)
        except asyncio.TimeoutError:
            raise ConnectionClosed(
                f"no HELLO_OK from {self.host}:{self.port} within {self.connect_timeout} s"
            ) from None
        except OSError as error:
            raise ConnectionClosed(f"cannot connect to {self.host}:{self.port}: {error}") from error
        connection = _Connection(
            reader, writer, decoder, hello_ok, self.keepalive_interval, on_closed=self._connections.discard
        )
        self._connections.add(connection)
        return connection

    async def _handshake(
        self,
    ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, FrameDecoder, pb.HelloOk]:
        server_hostname = self._server_hostname if self._ssl is not None else None
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self._ssl, server_hostname=server_hostname
        )
        try:
            hello = pb.Hello(
                min_version=PROTOCOL_VERSION,
                max_version=PROTOCOL_VERSION,
                tenant=self.tenant,
                credential=self._credential,
                client_name=self.client_name,
                accept_zstd=True,
            )
            writer.write(encode_frame(Kind.HELLO, 1, hello))
            await writer.drain()
            decoder = FrameDecoder(
                max_frame_bytes=self.max_answer_bytes, max_decompressed_bytes=self.max_answer_decompressed_bytes
            )
            hello_ok = await self._read_hello_answer(reader, decoder)
            decoder.version = hello_ok.version
            return reader, writer, decoder, hello_ok
        except BaseException:
            writer.close()
            raise

    @staticmethod
    async def _read_hello_answer(reader: asyncio.StreamReader, decoder: FrameDecoder) -> pb.HelloOk:
        while True:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise ConnectionClosed("the relay closed the connection during HELLO")
            try:
                for frame in decoder.feed(data):
                    if frame.kind == Kind.HELLO_OK and isinstance(frame.message, pb.HelloOk):
                        return frame.message
                    if frame.kind == Kind.ERROR and isinstance(frame.message, pb.Error):
                        raise relay_error(frame.message, frame.request_id)
            except FrameError as refused:
                raise ConnectionClosed(f"the relay's answer to HELLO cannot be read: {refused}") from refused

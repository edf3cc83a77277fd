"""The blocking client: :class:`RelayClient`, for code without an event loop (Django views, scripts).

It runs an :class:`~pushrelay_client.client.AsyncRelayClient` on an event loop in a background
thread and waits for each call. It may be shared by many threads: their requests are pipelined on
the one connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl as ssl_module
import threading
from typing import Any, Coroutine, Iterable, Iterator, Mapping, Optional, TypeVar, Union

from google.protobuf.message import Message

from . import pushrelay_pb2 as pb
from .client import DEFAULT_CLIENT_NAME, AsyncRelayClient, EnvironmentArg, ResultStream

T = TypeVar("T")


async def _cancel_other_tasks() -> None:
    """Cancel and await every task of the running loop but this one (before the loop stops)."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class BlockingResultStream:
    """A :class:`~pushrelay_client.client.ResultStream` read synchronously: an iterator of ``pb.ResultEvent``."""

    def __init__(self, client: "RelayClient", stream: ResultStream) -> None:
        self._client = client
        self.stream = stream
        """The underlying async stream (``request_id``, ``dropped``, ``active``)."""

    def __iter__(self) -> Iterator[pb.ResultEvent]:
        return self

    def __next__(self) -> pb.ResultEvent:
        try:
            return self._client._run(self.stream.__anext__(), None)
        except StopAsyncIteration:
            raise StopIteration from None

    def next_event(self, timeout: Optional[float] = None) -> Optional[pb.ResultEvent]:
        """The next event, or None when none arrives within ``timeout`` seconds or the stream has ended.

        Raises:
            ConnectionClosed: the connection ended (subscribe again).
            RelayError: the relay ended the subscription with an ERROR.
        """

        async def next_or_none() -> Optional[pb.ResultEvent]:
            try:
                return await asyncio.wait_for(self.stream.__anext__(), timeout)
            except (asyncio.TimeoutError, StopAsyncIteration):
                return None

        return self._client._run(next_or_none(), None)


class RelayClient:
    """A blocking client of the pushrelay wire protocol: the methods of :class:`AsyncRelayClient`, synchronous.

    The constructor connects and authenticates (raising ``RelayError`` or ``ConnectionClosed`` like
    :meth:`AsyncRelayClient.connect`); :meth:`close` (or leaving a ``with`` block) says GOODBYE and
    stops the background thread. ``timeout`` bounds every call in seconds (None: no bound; a Send with
    ``wait`` can take as long as APNs does); a call that times out raises ``TimeoutError``. The other
    keyword arguments are those of :class:`AsyncRelayClient`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        tenant: str,
        credential: str,
        *,
        ssl: Optional[ssl_module.SSLContext] = None,
        client_name: str = DEFAULT_CLIENT_NAME,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> None:
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pushrelay-client", daemon=True)
        self._thread.start()
        try:
            self._client: AsyncRelayClient = self._run(
                AsyncRelayClient.connect(host, port, tenant, credential, ssl=ssl, client_name=client_name, **options),
                timeout,
            )
        except BaseException:
            self._stop_loop()
            raise

    @property
    def hello_ok(self) -> Optional[pb.HelloOk]:
        """The HELLO_OK of the current connection (version and limits)."""
        return self._client.hello_ok

    def __enter__(self) -> "RelayClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self, timeout: float = 10.0) -> None:
        """GOODBYE, wait for the answers in flight (at most ``timeout`` seconds), stop the thread."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.close(timeout), None)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: Optional[float]) -> T:
        if self._loop.is_closed():
            raise RuntimeError("the RelayClient is closed")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._run(coroutine, self.timeout)

    # -- requests: see AsyncRelayClient for each ----------------------------------------------------

    def request(self, kind: int, message: Message) -> Message:
        """Send a request of any kind and return its answer's message (:meth:`AsyncRelayClient.request`)."""
        return self._call(self._client.request(kind, message))

    def ping(self, nonce: Optional[int] = None) -> pb.Pong:
        """PING: the relay echoes ``nonce`` (random when not given)."""
        return self._call(self._client.ping(nonce))

    def register_device(
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
        """REGISTER_DEVICE: register ``token`` for ``user_id`` under the tenant's token policy (``provider``: see
        :meth:`AsyncRelayClient.register_device`)."""
        return self._call(
            self._client.register_device(
                user_id=user_id,
                token=token,
                provider=provider,
                platform=platform,
                environment=environment,
                device_id=device_id,
                app_version=app_version,
                locale=locale,
                time_zone=time_zone,
                topics=topics,
            )
        )

    def unregister_device(self, *, token: str = "", user_id: str = "", platform: str = "") -> pb.UnregisterDeviceResult:
        """UNREGISTER_DEVICE: remove by ``token``, or by ``user_id`` and ``platform``."""
        return self._call(self._client.unregister_device(token=token, user_id=user_id, platform=platform))

    def list_devices(self, *, user_id: str, limit: int = 0, cursor: str = "") -> pb.DeviceList:
        """LIST_DEVICES: a page of the user's devices (``next_cursor`` of the answer asks for the next)."""
        return self._call(self._client.list_devices(user_id=user_id, limit=limit, cursor=cursor))

    def send(
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
        """SEND: one notification to exactly one audience (see :meth:`AsyncRelayClient.send`)."""
        return self._call(
            self._client.send(
                notification_type=notification_type,
                user_ids=user_ids,
                tokens=tokens,
                topic=topic,
                exclude_user_ids=exclude_user_ids,
                idempotency_key=idempotency_key,
                alert=alert,
                badge=badge,
                sound=sound,
                thread_id=thread_id,
                category=category,
                content_available=content_available,
                mutable_content=mutable_content,
                interruption_level=interruption_level,
                relevance_score=relevance_score,
                custom_json=custom_json,
                template_values=template_values,
                collapse_id=collapse_id,
                expiration=expiration,
                priority=priority,
                wait=wait,
                scope=scope,
                send_at_ms=send_at_ms,
                send_at_local=send_at_local,
            )
        )

    def job_status(self, *, job_id: str) -> pb.Job:
        """JOB_STATUS: a job's state and counts."""
        return self._call(self._client.job_status(job_id=job_id))

    def cancel_job(self, *, job_id: str) -> pb.Job:
        """CANCEL_JOB: nothing more of a scheduled or running job is sent."""
        return self._call(self._client.cancel_job(job_id=job_id))

    def query_deliveries(
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
        return self._call(
            self._client.query_deliveries(
                job_id=job_id, user_id=user_id, token=token, from_ms=from_ms, to_ms=to_ms, limit=limit, cursor=cursor
            )
        )

    def set_preferences(
        self, *, user_id: str, preferences: Union[Mapping[str, bool], Iterable[pb.TypePreference]]
    ) -> pb.Preferences:
        """SET_PREFERENCES: turn notification types on or off for a user."""
        return self._call(self._client.set_preferences(user_id=user_id, preferences=preferences))

    def get_preferences(self, *, user_id: str) -> pb.Preferences:
        """GET_PREFERENCES: every notification type with the user's effective setting."""
        return self._call(self._client.get_preferences(user_id=user_id))

    def set_mute(self, *, user_id: str, thread_id: str = "", scope: str = "", until_ms: int = 0) -> pb.Mute:
        """SET_MUTE: mute a thread or a scope until ``until_ms`` (0: until cleared)."""
        return self._call(self._client.set_mute(user_id=user_id, thread_id=thread_id, scope=scope, until_ms=until_ms))

    def clear_mute(self, *, user_id: str, thread_id: str = "", scope: str = "") -> pb.ClearMuteResult:
        """CLEAR_MUTE: lift a thread's or a scope's mute."""
        return self._call(self._client.clear_mute(user_id=user_id, thread_id=thread_id, scope=scope))

    def list_notification_types(self) -> pb.NotificationTypeList:
        """LIST_NOTIFICATION_TYPES: the tenant's notification types, as its tenant file declares them."""
        return self._call(self._client.list_notification_types())

    def list_mutes(self, *, user_id: str) -> pb.MuteList:
        """LIST_MUTES: the user's mutes in force."""
        return self._call(self._client.list_mutes(user_id=user_id))

    def set_presence(self, *, user_id: str, thread_id: str, seconds: int) -> pb.Presence:
        """SET_PRESENCE: the user is active in ``thread_id`` for ``seconds`` (0 clears it)."""
        return self._call(self._client.set_presence(user_id=user_id, thread_id=thread_id, seconds=seconds))

    def subscribe_results(self, *, receipts: bool = False) -> BlockingResultStream:
        """SUBSCRIBE_RESULTS: an iterator of result events (see :meth:`AsyncRelayClient.subscribe_results`)."""
        return BlockingResultStream(self, self._call(self._client.subscribe_results(receipts=receipts)))

    def unsubscribe(self, stream: BlockingResultStream) -> pb.Subscribed:
        """UNSUBSCRIBE_RESULTS: stop ``stream``."""
        return self._call(self._client.unsubscribe(stream.stream))

"""The clients against a small fake relay in a background thread (no real relay needed).

The fake speaks the frame layer of the spec and answers a few requests; tests steer it through the
requests themselves (a SEND of notification type "drop" makes it drop the connection, and so on).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, TypeVar

import pytest

from pushrelay_client import (
    AsyncRelayClient,
    ConnectionClosed,
    ErrorCode,
    Frame,
    FrameDecoder,
    Kind,
    RelayClient,
    RelayError,
    encode_frame,
    pb,
)

CREDENTIAL = "prk_fake"
T = TypeVar("T")


class FakeRelay:
    """A relay stand-in on 127.0.0.1 with its own event loop thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = 0
        self.connections = 0
        self.received: List[Frame] = []
        self.writers: List[asyncio.StreamWriter] = []
        self.held_pings: List[Frame] = []
        self.reverse_pings = 0
        self.silent = False
        self.server: Optional[asyncio.AbstractServer] = None
        self.run(self._start())

    def run(self, coroutine: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)  # type: ignore[arg-type]

    async def _start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        assert self.server is not None
        self.server.close()
        await self._drop_all()  # since Python 3.12, wait_closed also waits for the connections
        await self.server.wait_closed()

    async def _drop_all(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    def stop_listening(self) -> None:
        """Stop accepting connections and drop the open ones."""
        self.run(self._stop_listening())

    def start_listening(self) -> None:
        self.run(self._start())

    def drop_all(self) -> None:
        """Close every connection from the relay's side."""
        self.run(self._drop_all())

    def close(self) -> None:
        self.run(self._stop_listening())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    def kinds(self) -> List[int]:
        return [frame.kind for frame in self.received]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        decoder = FrameDecoder()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                for frame in decoder.feed(data):
                    self.received.append(frame)
                    if not await self._answer(frame, writer):
                        writer.close()
                        return
        except ConnectionError:
            return

    async def _answer(self, frame: Frame, writer: asyncio.StreamWriter) -> bool:
        """Answer one frame; False closes the connection."""
        rid = frame.request_id
        message: Any = frame.message

        def send(kind: Kind, answer: Any, request_id: int = rid) -> None:
            writer.write(encode_frame(kind, request_id, answer))

        if frame.kind == Kind.HELLO:
            if message.credential != CREDENTIAL:
                send(Kind.ERROR, pb.Error(code=pb.AUTHENTICATION_FAILED, message="unknown credential"))
                return False
            send(Kind.HELLO_OK, pb.HelloOk(version=1, tenant=message.tenant, max_frame_bytes=1 << 20))
        elif frame.kind == Kind.PING:
            if self.silent:
                return True
            if self.reverse_pings:
                self.held_pings.append(frame)
                if len(self.held_pings) == self.reverse_pings:
                    for held in reversed(self.held_pings):
                        send(Kind.PONG, pb.Pong(nonce=held.message.nonce), held.request_id)  # type: ignore[union-attr]
                    self.held_pings.clear()
            else:
                send(Kind.PONG, pb.Pong(nonce=message.nonce))
        elif frame.kind == Kind.SEND:
            if message.notification_type == "drop":
                return False
            if message.notification_type == "rate":
                send(Kind.ERROR, pb.Error(code=pb.RATE_LIMITED, message="slow down", retry_after_ms=1500))
            elif message.notification_type == "goodbye":
                send(Kind.GOODBYE, pb.Goodbye(reason="shutting down"), 0)
                send(Kind.SEND_OK, pb.SendResult(job_id=f"job-{rid}"))
                await writer.drain()
                return False
            else:
                send(Kind.SEND_OK, pb.SendResult(job_id=f"job-{rid}", devices=len(message.user_ids)))
        elif frame.kind == Kind.SUBSCRIBE_RESULTS:
            send(Kind.SUBSCRIBE_RESULTS_OK, pb.Subscribed())
            for token in ("aa" * 32, "bb" * 32):
                send(Kind.RESULT_EVENT, pb.ResultEvent(dead_token=pb.DeadToken(token=token, reason="Unregistered")))
        elif frame.kind == Kind.UNSUBSCRIBE_RESULTS:
            send(Kind.UNSUBSCRIBE_RESULTS_OK, pb.Subscribed())
        elif frame.kind == Kind.GOODBYE:
            return False
        else:
            send(Kind.ERROR, pb.Error(code=pb.UNKNOWN_KIND, message=f"kind {frame.kind:#06x}"))
        await writer.drain()
        return True


@pytest.fixture
def relay() -> Iterator[FakeRelay]:
    fake = FakeRelay()
    yield fake
    fake.close()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``condition()`` holds (polling), failing after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def connect(relay: FakeRelay, **options: Any) -> AsyncRelayClient:
    return await AsyncRelayClient.connect("127.0.0.1", relay.port, "circl", CREDENTIAL, **options)


def test_hello_and_ping(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        assert client.hello_ok is not None and client.hello_ok.tenant == "circl"
        assert (await client.ping(42)).nonce == 42
        await client.close()
        hello = relay.received[0]
        assert hello.kind == Kind.HELLO and hello.request_id == 1
        assert hello.message.accept_zstd and hello.message.min_version == 1  # type: ignore[union-attr]
        # The client's GOODBYE carries a fresh non-zero request id.
        assert relay.kinds()[-1] == Kind.GOODBYE and relay.received[-1].request_id != 0

    run(test)


def test_wrong_credential_is_a_relay_error(relay: FakeRelay) -> None:
    async def test() -> None:
        with pytest.raises(RelayError) as caught:
            await AsyncRelayClient.connect("127.0.0.1", relay.port, "circl", "prk_wrong")
        assert caught.value.code is ErrorCode.AUTHENTICATION_FAILED

    run(test)


def test_pipelined_answers_in_any_order(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        relay.reverse_pings = 20
        pongs = await asyncio.gather(*(client.ping(nonce) for nonce in range(20)))
        assert [pong.nonce for pong in pongs] == list(range(20))
        ids = [frame.request_id for frame in relay.received if frame.kind == Kind.PING]
        assert len(set(ids)) == 20 and 0 not in ids
        await client.close()

    run(test)


def test_error_frame_fields(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        with pytest.raises(RelayError) as caught:
            await client.send(notification_type="rate", user_ids=["u-1"])
        assert caught.value.code is ErrorCode.RATE_LIMITED and caught.value.retry_after_ms == 1500
        with pytest.raises(RelayError) as unknown:
            await client.request(0x3FFE, pb.Ping())
        assert unknown.value.code is ErrorCode.UNKNOWN_KIND
        assert (await client.ping()).nonce >= 0
        await client.close()

    run(test)


def test_large_send_is_compressed(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        users = [f"user-{index:06d}" for index in range(2000)]
        result = await client.send(notification_type="message", user_ids=users, alert={"title": "hi"}, badge=0)
        assert result.devices == 2000
        small = await client.send(notification_type="message", user_ids=["u-1"])
        sends = [frame for frame in relay.received if frame.kind == Kind.SEND]
        assert sends[0].compressed and not sends[1].compressed
        assert sends[0].message.HasField("badge")  # type: ignore[union-attr]
        assert small.job_id == f"job-{sends[1].request_id}"
        await client.close()

    run(test)


def test_reconnects_between_requests(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        await client.ping()
        relay.drop_all()
        await until(lambda: not client.connected)
        await client.ping()
        assert relay.connections == 2
        await client.close()

    run(test)


def test_reconnect_backs_off_until_the_relay_is_back(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay, reconnect_attempts=4)
        relay.stop_listening()
        await until(lambda: not client.connected)
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, relay.start_listening)
        started = loop.time()
        await client.ping()
        assert loop.time() - started >= 0.3
        await client.close()

    run(test)


def test_gives_up_after_the_attempts(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay, reconnect_attempts=2)
        relay.stop_listening()
        await until(lambda: not client.connected)
        with pytest.raises(ConnectionClosed):
            await client.ping()
        await client.close()

    run(test)


def test_in_flight_request_fails_when_the_connection_drops(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        with pytest.raises(ConnectionClosed):
            await client.send(notification_type="drop", user_ids=["u-1"])
        await client.ping()  # a new connection
        assert relay.connections == 2
        await client.close()

    run(test)


def test_goodbye_from_the_relay(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        result = await client.send(notification_type="goodbye", user_ids=["u-1"])
        assert result.job_id.startswith("job-")
        await client.ping()
        assert relay.connections == 2
        await client.close()

    run(test)


def test_results_stream(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        stream = await client.subscribe_results(receipts=True)
        events = [await stream.__anext__(), await stream.__anext__()]
        assert [event.dead_token.token[:2] for event in events] == ["aa", "bb"]
        unsubscribe = [frame for frame in relay.received if frame.kind == Kind.SUBSCRIBE_RESULTS]
        assert unsubscribe[0].message.receipts  # type: ignore[union-attr]
        await client.unsubscribe(stream)
        assert [event async for event in stream] == []
        assert not stream.active
        last = relay.received[-1]
        assert last.kind == Kind.UNSUBSCRIBE_RESULTS
        assert last.message.subscription_request_id == stream.request_id  # type: ignore[union-attr]
        await client.close()

    run(test)


def test_results_stream_ends_with_the_connection(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay)
        stream = await client.subscribe_results()
        relay.drop_all()
        received = []
        with pytest.raises(ConnectionClosed):
            async for event in stream:
                received.append(event)
        assert len(received) == 2
        await client.close()

    run(test)


def test_keepalive_pings_a_quiet_connection(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay, keepalive_interval=0.2)
        await until(lambda: relay.kinds().count(Kind.PING) >= 2)
        assert client.connected
        await client.close()

    run(test)


def test_keepalive_drops_a_silent_relay(relay: FakeRelay) -> None:
    async def test() -> None:
        client = await connect(relay, keepalive_interval=0.2)
        relay.silent = True
        await until(lambda: not client.connected)
        relay.silent = False
        await client.ping()  # a new connection
        assert relay.connections == 2
        await client.close()

    run(test)


def test_blocking_client(relay: FakeRelay) -> None:
    with RelayClient("127.0.0.1", relay.port, "circl", CREDENTIAL, timeout=10) as client:
        assert client.ping(7).nonce == 7
        assert client.send(notification_type="message", user_ids=["a", "b"]).devices == 2
        stream = client.subscribe_results()
        assert stream.next_event(5) is not None
        assert stream.next_event(5) is not None
        assert stream.next_event(0.1) is None
        client.unsubscribe(stream)
        assert list(stream) == []
    with pytest.raises(RelayError):
        RelayClient("127.0.0.1", relay.port, "circl", "prk_wrong")


def test_blocking_client_shared_by_threads(relay: FakeRelay) -> None:
    results: Dict[int, int] = {}
    with RelayClient("127.0.0.1", relay.port, "circl", CREDENTIAL, timeout=10) as client:

        def worker(index: int) -> None:
            results[index] = client.ping(index).nonce

        threads = [threading.Thread(target=worker, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {index: index for index in range(8)}

"""Integration tests against a running relay (Ops/scenarios/test-python.sh starts one with the APNs simulator).

Environment:
    PUSHRELAY_ADDRESS           host:port of the relay; without it this module is skipped
    PUSHRELAY_TENANT            the circl tenant (default "circl")
    PUSHRELAY_CREDENTIAL        a credential of it
    PUSHRELAY_OTHER_TENANT      the familyportal tenant (default "familyportal")
    PUSHRELAY_OTHER_CREDENTIAL  a credential of it

The tenants are the ones of Tenants/: circl's "message" type fills its thread-id template
"circle-{circle_id}-channel-{channel_id}"; familyportal's type is "chat_message".
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, TypeVar

import pytest
import zstandard

from pushrelay_client import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    FLAG_ZSTD,
    AsyncRelayClient,
    ErrorCode,
    Frame,
    FrameDecoder,
    Kind,
    RelayClient,
    RelayError,
    encode_frame,
    encode_header,
    pb,
)

ADDRESS = os.environ.get("PUSHRELAY_ADDRESS", "")
if not ADDRESS:
    pytest.skip(
        "PUSHRELAY_ADDRESS is not set: these tests need a running relay (Ops/scenarios/test-python.sh starts one)",
        allow_module_level=True,
    )


def required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} must be set when PUSHRELAY_ADDRESS is")
    return value


HOST, _, PORT_TEXT = ADDRESS.rpartition(":")
HOST = HOST.strip("[]")
PORT = int(PORT_TEXT)
TENANT = os.environ.get("PUSHRELAY_TENANT", "circl")
CREDENTIAL = required("PUSHRELAY_CREDENTIAL")
OTHER_TENANT = os.environ.get("PUSHRELAY_OTHER_TENANT", "familyportal")
OTHER_CREDENTIAL = required("PUSHRELAY_OTHER_CREDENTIAL")

VECTORS_PATH = Path(__file__).resolve().parents[2] / "vectors.json"
MESSAGE_VALUES = {"circle_id": "12", "channel_id": "34"}
THREAD = "circle-12-channel-34"
T = TypeVar("T")


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 120))


def new_user() -> str:
    return f"py-{uuid.uuid4().hex[:16]}"


def new_token() -> str:
    return secrets.token_hex(32)


def now_ms() -> int:
    return int(time.time() * 1000)


async def circl() -> AsyncRelayClient:
    return await AsyncRelayClient.connect(HOST, PORT, TENANT, CREDENTIAL, client_name="pushrelay-python-tests")


async def familyportal() -> AsyncRelayClient:
    return await AsyncRelayClient.connect(HOST, PORT, OTHER_TENANT, OTHER_CREDENTIAL, client_name="pushrelay-python-tests")


async def eventually(check: Callable[[], Awaitable[Optional[T]]], what: str, timeout: float = 30.0) -> T:
    """Poll ``check`` until it returns something, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def delivered() -> Dict[str, Any]:
    """A circl user with one device and a job delivered to it (send with wait)."""

    async def make() -> Dict[str, Any]:
        user, token = new_user(), new_token()
        async with await circl() as client:
            registered = await client.register_device(user_id=user, token=token, environment="SANDBOX")
            result = await client.send(
                notification_type="message",
                user_ids=[user],
                template_values=MESSAGE_VALUES,
                alert={"title": "Hiking Club", "body": "Who's in for Saturday?"},
                wait=True,
            )
        return {"user": user, "token": token, "registered": registered, "result": result}

    return run(make)


# -- connection ----------------------------------------------------------------------------------


def test_wrong_credential_is_refused() -> None:
    async def test() -> None:
        for tenant, credential in ((TENANT, "prk_" + "x" * 43), (OTHER_TENANT, CREDENTIAL)):
            with pytest.raises(RelayError) as caught:
                await AsyncRelayClient.connect(HOST, PORT, tenant, credential)
            assert caught.value.code is ErrorCode.AUTHENTICATION_FAILED

    run(test)


def test_hello_ok_and_ping() -> None:
    async def test() -> None:
        async with await circl() as client:
            hello_ok = client.hello_ok
            assert hello_ok is not None
            assert hello_ok.version == 1 and hello_ok.tenant == TENANT
            assert hello_ok.max_frame_bytes == 1_048_576
            assert hello_ok.max_decompressed_bytes == DEFAULT_MAX_DECOMPRESSED_BYTES
            assert hello_ok.max_in_flight > 0 and hello_ok.max_recipients > 0
            assert (await client.ping(0xFEEDFACECAFEBEEF)).nonce == 0xFEEDFACECAFEBEEF

    run(test)


def test_pipelined_requests() -> None:
    async def test() -> None:
        async with await circl() as client:
            pongs = await asyncio.gather(*(client.ping(nonce) for nonce in range(1, 201)))
            assert [pong.nonce for pong in pongs] == list(range(1, 201))

    run(test)


def test_dependent_requests_pipelined_take_effect_in_order() -> None:
    """Each pair written back to back (asyncio.gather writes them in order before either is answered), 100 times:
    the later request sees the earlier one (Protocol/README.md, "Pipelining and ordering")."""

    async def test() -> None:
        async with await circl() as client:

            def message(user: str) -> Awaitable[pb.SendResult]:
                return client.send(
                    notification_type="message",
                    user_ids=[user],
                    template_values=MESSAGE_VALUES,
                    alert={"title": "Hiking Club", "body": "Who's in?"},
                    wait=True,
                )

            for attempt in range(100):
                user, token, second = new_user(), new_token(), new_token()
                _, sent = await asyncio.gather(client.register_device(user_id=user, token=token), message(user))
                assert [(o.token, o.outcome) for o in sent.outcomes] == [(token, "delivered")], attempt
                _, listed = await asyncio.gather(
                    client.register_device(user_id=user, token=second), client.list_devices(user_id=user)
                )
                assert {device.token for device in listed.devices} == {token, second}, attempt
                _, sent = await asyncio.gather(
                    client.set_presence(user_id=user, thread_id=THREAD, seconds=60), message(user)
                )
                assert {o.reason for o in sent.outcomes} == {"active"}, attempt
                await client.set_presence(user_id=user, thread_id=THREAD, seconds=0)
                _, sent = await asyncio.gather(client.set_mute(user_id=user, thread_id=THREAD), message(user))
                assert {o.reason for o in sent.outcomes} == {"muted"}, attempt
                await client.clear_mute(user_id=user, thread_id=THREAD)
                await client.unregister_device(token=second)
                _, sent = await asyncio.gather(client.unregister_device(token=token), message(user))
                assert [(o.outcome, o.reason) for o in sent.outcomes] == [("skipped", "no_device")], attempt

    run(test)


# -- devices, sends, deliveries ------------------------------------------------------------------


def test_register_list_and_send_with_wait(delivered: Dict[str, Any]) -> None:
    registered: pb.RegisterDeviceResult = delivered["registered"]
    assert registered.status == pb.RegisterDeviceResult.CREATED
    assert registered.device.token == delivered["token"] and registered.device.active
    result: pb.SendResult = delivered["result"]
    assert result.job_id and not result.duplicate
    assert [(o.user_id, o.token, o.outcome) for o in result.outcomes] == [
        (delivered["user"], delivered["token"], "delivered")
    ]

    async def test() -> None:
        async with await circl() as client:
            devices = await client.list_devices(user_id=delivered["user"])
            assert [device.token for device in devices.devices] == [delivered["token"]]
            assert devices.devices[0].environment == pb.SANDBOX

            async def one_delivery() -> Optional[pb.DeliveryList]:
                rows = await client.query_deliveries(job_id=result.job_id)
                return rows if rows.deliveries else None

            rows = await eventually(one_delivery, "the job's delivery row")
            assert [(row.job_id, row.token, row.outcome) for row in rows.deliveries] == [
                (result.job_id, delivered["token"], "delivered")
            ]
            job = await client.job_status(job_id=result.job_id)
            assert job.state == pb.COMPLETED and job.delivered == 1 and job.notification_type == "message"

    run(test)


def test_send_without_wait_completes() -> None:
    async def test() -> None:
        user = new_user()
        async with await circl() as client:
            await client.register_device(user_id=user, token=new_token())
            result = await client.send(notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES)
            assert result.job_id and not result.outcomes

            async def completed() -> Optional[pb.Job]:
                job = await client.job_status(job_id=result.job_id)
                return job if job.state == pb.COMPLETED else None

            job = await eventually(completed, f"job {result.job_id} to complete")
            assert job.delivered == 1

    run(test)


def test_scheduled_send_is_scheduled_then_cancelled() -> None:
    async def test() -> None:
        user = new_user()
        async with await circl() as client:
            await client.register_device(user_id=user, token=new_token())
            result = await client.send(
                notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES,
                send_at_ms=now_ms() + 3_600_000, wait=True,
            )
            assert result.job.state == pb.SCHEDULED and not result.outcomes
            cancelled = await client.cancel_job(job_id=result.job_id)
            assert cancelled.state == pb.CANCELLED
            assert (await client.job_status(job_id=result.job_id)).state == pb.CANCELLED

    run(test)


def test_idempotency_key() -> None:
    async def test() -> None:
        user, key = new_user(), f"py-{uuid.uuid4()}"
        async with await circl() as client:
            await client.register_device(user_id=user, token=new_token())
            first = await client.send(
                notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES, idempotency_key=key
            )
            again = await client.send(
                notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES, idempotency_key=key
            )
            assert not first.duplicate and again.duplicate and again.job_id == first.job_id
            waited = await client.send(
                notification_type="message",
                user_ids=[user],
                template_values=MESSAGE_VALUES,
                idempotency_key=key,
                wait=True,
            )
            assert waited.duplicate and [o.outcome for o in waited.outcomes] == ["delivered"]
            with pytest.raises(RelayError) as caught:
                await client.send(
                    notification_type="message", user_ids=[new_user()], template_values=MESSAGE_VALUES, idempotency_key=key
                )
            assert caught.value.code is ErrorCode.INVALID_ARGUMENT and caught.value.field == "send.idempotency_key"

    run(test)


def test_missing_template_value_is_invalid_argument() -> None:
    async def test() -> None:
        async with await circl() as client:
            with pytest.raises(RelayError) as caught:
                await client.send(notification_type="message", user_ids=[new_user()], template_values={"circle_id": "1"})
            assert caught.value.code is ErrorCode.INVALID_ARGUMENT

    run(test)


def test_unregister_device() -> None:
    async def test() -> None:
        user, token = new_user(), new_token()
        async with await circl() as client:
            await client.register_device(user_id=user, token=token)
            assert (await client.unregister_device(token=token)).removed == 1
            assert not (await client.list_devices(user_id=user)).devices

    run(test)


# -- user policy ---------------------------------------------------------------------------------


def test_preferences() -> None:
    async def test() -> None:
        user = new_user()
        async with await circl() as client:
            await client.set_preferences(user_id=user, preferences={"announcement": False})
            answer = await client.get_preferences(user_id=user)
            settings = {p.notification_type: (p.enabled, p.mandatory) for p in answer.preferences}
            assert answer.user_id == user
            assert settings["announcement"] == (False, False)
            assert settings["message"] == (True, False)
            assert settings["silent_refresh"] == (True, True)
            with pytest.raises(RelayError) as caught:
                await client.set_preferences(user_id=user, preferences={"silent_refresh": False})
            assert caught.value.code is ErrorCode.INVALID_ARGUMENT

    run(test)


def test_mutes() -> None:
    async def test() -> None:
        user, until = new_user(), now_ms() + 3_600_000
        async with await circl() as client:
            mute = await client.set_mute(user_id=user, thread_id=THREAD, until_ms=until)
            assert (mute.user_id, mute.thread_id, mute.until_ms) == (user, THREAD, until)
            await client.set_mute(user_id=user, scope="circle-12")
            mutes = await client.list_mutes(user_id=user)
            assert sorted((m.thread_id, m.scope) for m in mutes.mutes) == [("", "circle-12"), (THREAD, "")]
            assert (await client.clear_mute(user_id=user, thread_id=THREAD)).removed == 1
            assert [m.scope for m in (await client.list_mutes(user_id=user)).mutes] == ["circle-12"]

    run(test)


def test_presence() -> None:
    async def test() -> None:
        user = new_user()
        async with await circl() as client:
            before = now_ms()
            presence = await client.set_presence(user_id=user, thread_id=THREAD, seconds=60)
            assert presence.user_id == user and presence.thread_id == THREAD
            assert before + 59_000 <= presence.until_ms <= now_ms() + 61_000
            assert (await client.set_presence(user_id=user, thread_id=THREAD, seconds=0)).until_ms == 0

    run(test)


# -- results stream ------------------------------------------------------------------------------


def test_subscribe_and_unsubscribe() -> None:
    async def test() -> None:
        async with await circl() as client:
            stream = await client.subscribe_results()
            assert stream.active
            assert isinstance(await client.unsubscribe(stream), pb.Subscribed)
            assert [event async for event in stream] == []
            assert (await client.ping()).nonce >= 0

    run(test)


def test_receipts_stream() -> None:
    async def test() -> None:
        user, token = new_user(), new_token()
        async with await circl() as client:
            stream = await client.subscribe_results(receipts=True)
            await client.register_device(user_id=user, token=token)
            result = await client.send(
                notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES, wait=True
            )
            while True:
                event = await asyncio.wait_for(stream.__anext__(), 30)
                if event.WhichOneof("event") == "receipt" and event.receipt.job_id == result.job_id:
                    break
            assert event.receipt.token == token and event.receipt.outcome == "delivered"
            await client.unsubscribe(stream)

    run(test)


# -- notification types --------------------------------------------------------------------------


def test_list_notification_types_names_what_send_may_use() -> None:
    async def test() -> None:
        async with await circl() as client:
            listed = await client.list_notification_types()
            by_name = {t.name: t for t in listed.types}
            assert [t.name for t in listed.types] == sorted(by_name)
            assert set(by_name["message"].template_values) == {"circle_id", "channel_id"}
        async with await familyportal() as other:
            chat = {t.name: t for t in (await other.list_notification_types()).types}["chat_message"]
            assert chat.subscription == "chat"

    run(test)


# -- tenant isolation ----------------------------------------------------------------------------


def test_tenant_isolation(delivered: Dict[str, Any]) -> None:
    job_id = delivered["result"].job_id

    async def test() -> None:
        async with await familyportal() as other:
            assert not (await other.list_devices(user_id=delivered["user"])).devices
            with pytest.raises(RelayError) as caught:
                await other.job_status(job_id=job_id)
            assert caught.value.code is ErrorCode.NOT_FOUND
            assert not (await other.query_deliveries(job_id=job_id)).deliveries
            assert not (await other.query_deliveries(token=delivered["token"])).deliveries
            sent = await other.send(notification_type="chat_message", user_ids=[delivered["user"]], wait=True)
            assert not [o for o in sent.outcomes if o.outcome == "delivered"]
            assert (await other.unregister_device(token=delivered["token"])).removed == 0
        async with await circl() as client:
            devices = await client.list_devices(user_id=delivered["user"])
            assert [device.token for device in devices.devices] == [delivered["token"]]

    run(test)


# -- the blocking client -------------------------------------------------------------------------


def test_blocking_client() -> None:
    user, token = new_user(), new_token()
    with RelayClient(HOST, PORT, TENANT, CREDENTIAL, timeout=60) as client:
        assert client.ping(5).nonce == 5
        assert client.register_device(user_id=user, token=token).status == pb.RegisterDeviceResult.CREATED
        assert [d.token for d in client.list_devices(user_id=user).devices] == [token]
        result = client.send(notification_type="message", user_ids=[user], template_values=MESSAGE_VALUES, wait=True)
        assert [o.outcome for o in result.outcomes] == ["delivered"]
        assert client.unregister_device(token=token).removed == 1


def test_blocking_client_wrong_credential() -> None:
    with pytest.raises(RelayError) as caught:
        RelayClient(HOST, PORT, TENANT, "prk_" + "y" * 43, timeout=30)
    assert caught.value.code is ErrorCode.AUTHENTICATION_FAILED


# -- raw frames ----------------------------------------------------------------------------------


class RawConnection:
    """A plain socket speaking frames, for what the clients never send."""

    def __init__(self) -> None:
        self.socket = socket.create_connection((HOST, PORT), timeout=30)
        self.decoder = FrameDecoder()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.socket.close()

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def frame(self) -> Frame:
        """The next frame from the relay."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            data = self.socket.recv(65536)
            if not data:
                raise AssertionError("the relay closed the connection")
            self.decoder.feed(data)

    def error(self, request_id: int) -> ErrorCode:
        """The code of the next frame, which must be an ERROR for ``request_id``."""
        frame = self.frame()
        assert frame.kind == Kind.ERROR, f"expected an ERROR, got {frame.kind:#06x}"
        assert frame.request_id == request_id
        assert isinstance(frame.message, pb.Error)
        return ErrorCode.from_wire(frame.message.code)

    def hello(self, request_id: int = 1) -> pb.HelloOk:
        hello = pb.Hello(min_version=1, max_version=1, tenant=TENANT, credential=CREDENTIAL, client_name="raw")
        self.send(encode_frame(Kind.HELLO, request_id, hello))
        frame = self.frame()
        assert frame.kind == Kind.HELLO_OK and frame.request_id == request_id
        assert isinstance(frame.message, pb.HelloOk)
        return frame.message

    def ping(self, request_id: int) -> None:
        """PING, and its PONG must be the next frame."""
        self.send(encode_frame(Kind.PING, request_id, pb.Ping(nonce=request_id)))
        frame = self.frame()
        assert (frame.kind, frame.request_id) == (Kind.PONG, request_id)

    def closed_by_relay(self) -> bool:
        """True when the relay closes the connection (EOF) with no more frames."""
        try:
            while True:
                data = self.socket.recv(65536)
                if not data:
                    return True
                self.decoder.feed(data)
                if self.decoder.next_frame() is not None:
                    return False
        except ConnectionResetError:
            return True


def test_request_before_hello_and_second_hello() -> None:
    with RawConnection() as raw:
        raw.send(encode_frame(Kind.PING, 1, pb.Ping(nonce=1)))
        assert raw.error(1) is ErrorCode.HELLO_REQUIRED
        raw.hello(2)
        raw.ping(3)
        hello = pb.Hello(min_version=1, max_version=1, tenant=TENANT, credential=CREDENTIAL)
        raw.send(encode_frame(Kind.HELLO, 4, hello))
        assert raw.error(4) is ErrorCode.ALREADY_AUTHENTICATED
        raw.ping(5)


def test_unknown_kind_keeps_the_connection() -> None:
    with RawConnection() as raw:
        raw.hello()
        raw.send(encode_header(0, 0x3FFE, 2))
        assert raw.error(2) is ErrorCode.UNKNOWN_KIND
        raw.ping(3)


def test_frame_too_large_closes_the_connection() -> None:
    with RawConnection() as raw:
        hello_ok = raw.hello()
        raw.send(encode_header(hello_ok.max_frame_bytes + 1, Kind.SEND, 2))
        frame = raw.frame()
        assert frame.kind == Kind.ERROR and frame.request_id == 0
        assert isinstance(frame.message, pb.Error) and frame.message.code == pb.FRAME_TOO_LARGE
        assert raw.closed_by_relay()


def test_zstd_bomb_keeps_the_connection() -> None:
    bomb = zstandard.ZstdCompressor().compress(bytes(DEFAULT_MAX_DECOMPRESSED_BYTES + 1))
    with RawConnection() as raw:
        raw.hello()
        raw.send(encode_header(len(bomb), Kind.SEND, 2, flags=FLAG_ZSTD) + bomb)
        assert raw.error(2) is ErrorCode.DECOMPRESSED_TOO_LARGE
        raw.ping(3)


def test_refused_vectors_get_their_error() -> None:
    """Every refused frame of vectors.json but FRAME_TOO_LARGE, sent on one connection, gets its ERROR."""
    vectors: List[Dict[str, Any]] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))["vectors"]
    with RawConnection() as raw:
        raw.hello()
        for vector in vectors:
            if vector.get("error") in (None, "FRAME_TOO_LARGE"):
                continue
            raw.send(bytes.fromhex(vector["hex"]))
            assert raw.error(vector["header"]["request_id"]).name == vector["error"], vector["name"]
        raw.ping(1000)


def test_compressed_request() -> None:
    """A SEND sent zstd-compressed (flag 0x01) is answered like the plain one."""
    with RawConnection() as raw:
        raw.hello()
        send = pb.Send(notification_type="message", user_ids=[new_user()], template_values=MESSAGE_VALUES, wait=True)
        raw.send(encode_frame(Kind.SEND, 2, send, compress=True))
        frame = raw.frame()
        assert (frame.kind, frame.request_id) == (Kind.SEND_OK, 2)
        assert isinstance(frame.message, pb.SendResult)
        assert [(o.outcome, o.reason) for o in frame.message.outcomes] == [("skipped", "no_device")]

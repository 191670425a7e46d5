"""The SDK's client against small scripted servers on loopback: what ``execute`` returns when no
receipt comes back (never an exception, never a retry), and ``approval_status`` /
``wait_for_approval`` against a server that answers the approval route as the spec says (the
runtime does not serve it yet), polled with back-off on an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from seif import (
    ApprovalStatus,
    NotFoundError,
    RuntimeClient,
    SeifTransportError,
    ServerError,
    SyncRuntimeClient,
)
from tests.support.runtime_harness import run_async, serving

TOKEN = "sdk-test-token"
ARGS = {"ref": "a"}


# --- a scripted HTTP server (raw: it can hang, close, or answer anything) ------------------------


@dataclass
class Scripted:
    """A loopback server that reads each request whole, counts it, then does ``mode``:
    ``close`` (close the connection), ``hang`` (never answer), or ``(status, body)``."""

    mode: Any = "close"
    requests: list[bytes] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            self.requests.append(head + await reader.readexactly(length))
            if self.mode == "hang":
                await asyncio.sleep(3600)
            if isinstance(self.mode, tuple):
                status, body = self.mode
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                # a redirect back to the same route: a client that followed it would send again
                where = "Location: /v1/context/tools/execute\r\n" if 300 <= status < 400 else ""
                writer.write(
                    f"HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\n{where}"
                    f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def scripted(mode: Any) -> AsyncIterator[Scripted]:
    server_state = Scripted(mode)
    server = await asyncio.start_server(server_state.handle, "127.0.0.1", 0)
    server_state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield server_state
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1)


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def receipt(call_id: str, status: str = "SUCCEEDED") -> dict[str, Any]:
    return {
        "callId": call_id,
        "tool": "t",
        "status": status,
        "reason": None,
        "duplicate": False,
        "outputAvailable": True,
        "output": {"x": [1, 2]},
    }


# --- execute when no receipt comes back --------------------------------------------------------


def test_execute_never_raises_for_transport_and_never_retries() -> None:
    """After the request was sent, every failure is an UNKNOWN receipt saying what happened
    (the connection lost, no answer in time, a 5xx, an answer that is not a receipt) and the
    server saw the request exactly once; a refused connection (nothing sent) is FAILED
    CONNECT_FAILED. A 503 (the runtime did not take the request) raises."""

    async def scenario() -> None:
        cases: list[tuple[Any, str, str]] = [
            ("close", "UNKNOWN", "CONNECTION_LOST"),
            ("hang", "UNKNOWN", "CLIENT_TIMEOUT"),
            ((502, {"error": {"code": "BAD_GATEWAY", "message": "x"}}), "UNKNOWN", "RUNTIME_ERROR"),
            ((500, b"<html>oops</html>"), "UNKNOWN", "RUNTIME_ERROR"),
            ((200, b"not json"), "UNKNOWN", "INVALID_RESPONSE"),
            ((200, {"callId": "c1", "status": "MAYBE"}), "UNKNOWN", "INVALID_RESPONSE"),
            ((200, receipt("other")), "UNKNOWN", "INVALID_RESPONSE"),
            ((307, {"location": "elsewhere"}), "UNKNOWN", "INVALID_RESPONSE"),
            ((200, receipt("c1")), "SUCCEEDED", ""),
        ]
        for mode, status, reason in cases:
            async with scripted(mode) as server:
                async with RuntimeClient(server.url, TOKEN, timeout_s=0.3) as sdk:
                    got = await sdk.execute("ctx_1", "t", "c1", ARGS, turn_id="turn_1")
                assert (got.status, got.reason or "") == (status, reason), mode
                assert got.call_id == "c1" and got.tool == "t"
                assert len(server.requests) == 1, mode  # sent once, never again
                request = server.requests[0]
                assert request.startswith(b"POST /v1/context/tools/execute ")
                assert f"authorization: bearer {TOKEN}".encode() in request.lower()
                body = json.loads(request.split(b"\r\n\r\n", 1)[1])
                assert body == {
                    "contextRef": "ctx_1",
                    "tool": "t",
                    "callId": "c1",
                    "arguments": ARGS,
                    "turnId": "turn_1",
                }
                if status == "UNKNOWN":
                    assert got.detail and not got.output_available
                else:
                    assert got.output == {"x": (1, 2)}
                    with pytest.raises(TypeError):
                        got.output["x"] = 3

        async with scripted(
            (503, {"error": {"code": "TOO_MANY_CONNECTIONS", "message": "busy"}})
        ) as s:
            async with RuntimeClient(s.url, TOKEN) as sdk:
                with pytest.raises(ServerError) as busy:
                    await sdk.execute("ctx_1", "t", "c1", ARGS)
            assert (busy.value.status, busy.value.code) == (503, "TOO_MANY_CONNECTIONS")

        async with RuntimeClient(f"http://127.0.0.1:{free_port()}", TOKEN) as sdk:
            refused = await sdk.execute("ctx_1", "t", "c1", ARGS)
            assert (refused.status, refused.reason) == ("FAILED", "CONNECT_FAILED")
            assert refused.detail is not None and "nothing was sent" in refused.detail
            with pytest.raises(SeifTransportError) as other:
                await sdk.start_turn()
            assert (other.value.reason, other.value.sent) == ("CONNECT_FAILED", False)

        async with scripted("close") as server, RuntimeClient(server.url, TOKEN) as sdk:
            with pytest.raises(SeifTransportError) as lost:
                await sdk.resolve("authoring")
            assert (lost.value.reason, lost.value.sent) == ("CONNECTION_LOST", True)

        async with (
            scripted((200, {"contextRef": "ctx_1"})) as server,
            RuntimeClient(server.url, TOKEN) as sdk,
        ):
            with pytest.raises(SeifTransportError, match="INVALID_RESPONSE"):
                await sdk.resolve("authoring")

    run_async(scenario())


def test_arguments_that_are_not_json_are_refused_before_sending() -> None:
    async def scenario() -> None:
        async with scripted((200, receipt("c1"))) as server:
            async with RuntimeClient(server.url, TOKEN) as sdk:
                with pytest.raises(ValueError):
                    await sdk.execute("ctx_1", "t", "c1", {"x": float("nan")})
                with pytest.raises(TypeError):
                    await sdk.execute("ctx_1", "t", "c1", {"x": object()})
            assert server.requests == []

    run_async(scenario())


# --- approvals -----------------------------------------------------------------------------------


class FakeTime:
    """An injected monotonic clock and the sleep that moves it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


APPROVED_AT = "2026-05-01T12:05:00.000Z"


class ApprovalServer:
    """The spec's ``GET /v1/context/tools/approvals/{contextRef}/{callId}``: each call id
    answers the states of its script in turn (the last one repeating); a context other than
    ``ctx_1``, or another bearer, is 404 ``CONTEXT_UNKNOWN``."""

    def __init__(self, scripts: dict[str, list[str]]) -> None:
        self.scripts = scripts
        self.paths: list[str] = []
        self.app = web.Application()
        self.app.router.add_get("/v1/context/tools/approvals/{ref}/{call}", self.status)

    async def status(self, request: web.Request) -> web.Response:
        self.paths.append(request.raw_path)
        ref, call = request.match_info["ref"], request.match_info["call"]
        if request.headers.get("Authorization") != f"Bearer {TOKEN}" or ref != "ctx_1":
            return web.json_response(
                {"error": {"code": "CONTEXT_UNKNOWN", "message": "no such context"}}, status=404
            )
        script = self.scripts.get(call, ["NONE"])
        state = script.pop(0) if len(script) > 1 else script[0]
        if state == "BAD":
            return web.json_response({"state": "APPROVED"})  # no approvalId: not the spec
        body: dict[str, Any] = {"state": state}
        if state == "APPROVED":
            body |= {"approvalId": f"apr_{call}", "expiresAt": APPROVED_AT}
        return web.json_response(body)


def test_approval_status_and_waiting_with_back_off() -> None:
    async def scenario() -> None:
        server = ApprovalServer(
            {
                "w1": ["PENDING", "PENDING", "PENDING", "APPROVED"],
                "w2": ["PENDING"],
                "w3": ["PENDING", "REJECTED"],
                "w4": ["EXPIRED"],
                "a/b c": ["PENDING"],
                "bad": ["BAD"],
            }
        )
        async with serving(server.app) as url:
            fake = FakeTime()
            async with RuntimeClient(url, TOKEN, sleep=fake.sleep, clock=fake.clock) as sdk:
                approved = await sdk.wait_for_approval("ctx_1", "w1", timeout_s=60)
                assert approved == ApprovalStatus(
                    "ctx_1", "w1", "APPROVED", "apr_w1", datetime(2026, 5, 1, 12, 5, tzinfo=UTC)
                )
                assert approved.approved and approved.settled
                assert fake.sleeps == [0.5, 0.75, 1.125]  # three PENDING reads, growing waits

                fake.sleeps.clear()
                start = fake.now
                pending = await sdk.wait_for_approval("ctx_1", "w2", timeout_s=10)
                assert pending.state == "PENDING" and not pending.settled
                assert fake.now == start + 10  # waited to the deadline, never past it
                assert fake.sleeps[:5] == [0.5, 0.75, 1.125, 1.6875, 2.53125]
                assert fake.sleeps[-1] == pytest.approx(10 - sum(fake.sleeps[:-1]))

                fake.sleeps.clear()
                await sdk.wait_for_approval("ctx_1", "w2", timeout_s=40, max_interval_s=5)
                assert max(fake.sleeps) == 5.0 and sum(fake.sleeps) == pytest.approx(40)

                fake.sleeps.clear()
                rejected = await sdk.wait_for_approval("ctx_1", "w3", timeout_s=60)
                assert (rejected.state, fake.sleeps) == ("REJECTED", [0.5])
                expired = await sdk.wait_for_approval("ctx_1", "w4", timeout_s=60)
                none = await sdk.wait_for_approval("ctx_1", "never-asked", timeout_s=60)
                assert (expired.state, none.state, fake.sleeps) == ("EXPIRED", "NONE", [0.5])
                assert expired.approval_id is None and expired.expires_at is None

                odd = await sdk.approval_status("ctx_1", "a/b c")
                assert odd.call_id == "a/b c" and odd.state == "PENDING"
                assert server.paths[-1] == "/v1/context/tools/approvals/ctx_1/a%2Fb%20c"

                with pytest.raises(NotFoundError) as unknown:
                    await sdk.approval_status("ctx_other", "w1")
                assert (unknown.value.status, unknown.value.code) == (404, "CONTEXT_UNKNOWN")
                with pytest.raises(SeifTransportError, match="INVALID_RESPONSE"):
                    await sdk.approval_status("ctx_1", "bad")
                with pytest.raises(ValueError):
                    await sdk.wait_for_approval("ctx_1", "w1", timeout_s=1, interval_s=0)
                zero = len(server.paths)
                await sdk.wait_for_approval("ctx_1", "w2", timeout_s=0)
                assert len(server.paths) == zero + 1  # one read, no wait

            async with RuntimeClient(url, "another-app") as other:
                with pytest.raises(NotFoundError, match="CONTEXT_UNKNOWN"):
                    await other.approval_status("ctx_1", "w1")

    run_async(scenario())


@contextlib.contextmanager
def serving_in_thread(app: web.Application) -> Iterator[str]:
    """``serving(app)`` on an event loop of its own thread (for blocking clients)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    manager = serving(app)
    try:
        yield asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_sync_client_waits_for_approval_from_plain_code() -> None:
    server = ApprovalServer({"w1": ["PENDING", "PENDING", "APPROVED"]})
    fake = FakeTime()
    with (
        serving_in_thread(server.app) as url,
        SyncRuntimeClient(url, TOKEN, sleep=fake.sleep, clock=fake.clock) as sdk,
    ):
        status = sdk.wait_for_approval("ctx_1", "w1", timeout_s=30)
        assert (status.state, status.approval_id, fake.sleeps) == (
            "APPROVED",
            "apr_w1",
            [0.5, 0.75],
        )
        assert sdk.approval_status("ctx_1", "w1").approved
    with pytest.raises(RuntimeError, match="closed"):
        sdk.approval_status("ctx_1", "w1")

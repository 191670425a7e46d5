"""The executors' HTTP/1.1 transport against raw loopback servers: framing (length, chunked,
end of connection), keep-alive reuse and its limits, and every failure it reports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from servers.executor import http1
from servers.executor.http1 import Http1Client, Response, TransportError

T = TypeVar("T")
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on loopback; yields its base URL and a list counting its connections."""
    connections: list[int] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def responder(*responses: bytes, close_after: bool = False) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for response in responses:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(response)
            await writer.drain()
        if not close_after:
            await reader.read()  # keep the connection until the client closes it

    return handle


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


async def call(
    client: Http1Client, url: str, body: bytes | None = None, timeout_s: float = 2.0
) -> Response:
    method = "POST" if body is not None else "GET"
    return await client.request(
        method, url, [("Accept", "x")], body, timeout_s=timeout_s, max_bytes=1024
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_keep_alive_reuses_one_connection_and_frames_each_response() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )

    async def scenario() -> tuple[list[tuple[int, bytes]], int]:
        async with raw_server(responder(OK, chunked, OK)) as (base, connections):
            client = Http1Client()
            got = [await call(client, base + "/a", b"{}") for _ in range(3)]
            await client.close()
            return [(r.status, r.body) for r in got], len(connections)

    bodies, connections = run(scenario())
    assert bodies == [(200, b"{}"), (200, b"abcde"), (200, b"{}")]
    assert connections == 1


def test_a_body_ended_by_the_connection_and_connection_close_are_not_reused() -> None:
    until_eof = b"HTTP/1.1 200 OK\r\n\r\nhello"
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"

    async def scenario() -> tuple[list[bytes], int]:
        async with raw_server(responder(until_eof, close_after=True)) as (base, connections):
            client = Http1Client()
            first = await call(client, base)
            async with raw_server(responder(closing, close_after=True)) as (other, more):
                second = await call(client, other)
                third = await call(client, other)
            await client.close()
            bodies = [r.body for r in (first, second, third)]
            return bodies, len(connections) + len(more)

    bodies, connections = run(scenario())
    assert bodies[:2] == [b"hello", b"hi"]
    assert connections == 3  # the closing server's second request needed a new connection


def test_the_request_is_exactly_what_was_asked() -> None:
    seen: list[tuple[bytes, bytes]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()

    async def scenario() -> None:
        async with raw_server(handle) as (base, _):
            client = Http1Client()
            await call(client, base + "/tool/execute?q=1", b'{"a":1}')
            await client.close()

    run(scenario())
    [(head, body)] = seen
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /tool/execute?q=1 HTTP/1.1"
    assert lines[1].startswith("Host: 127.0.0.1:")
    assert "Accept: x" in lines and "Content-Length: 7" in lines
    assert body == b'{"a":1}'


@pytest.mark.parametrize(
    ("response", "reason", "kw"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", "TOO_LARGE", {}),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + b"x" * 2048,
         "TOO_LARGE", {}),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", "INVALID_RESPONSE", {}),
        (b"NOT HTTP AT ALL\r\n\r\n", "INVALID_RESPONSE", {}),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "CONNECTION_LOST", {}),
        (b"", "TIMEOUT", {"timeout_s": 0.2}),
    ],
)  # fmt: skip
def test_failures_are_named(response: bytes, reason: str, kw: dict[str, float]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response)
        await writer.drain()
        if reason == "TIMEOUT":
            await asyncio.sleep(1)

    async def scenario() -> TransportError:
        async with raw_server(handle) as (base, _):
            client = Http1Client()
            with pytest.raises(TransportError) as caught:
                await call(client, base, b"{}", **kw)
            await client.close()
            return caught.value

    error = run(scenario())
    assert (error.reason, error.unsent) == (reason, False)


def test_a_redirect_is_returned_without_its_body_and_not_followed() -> None:
    redirect = (
        b"HTTP/1.1 307 Temporary\r\nLocation: http://elsewhere/\r\nContent-Length: 3\r\n\r\nabc"
    )

    async def scenario() -> tuple[object, int]:
        async with raw_server(responder(redirect)) as (base, connections):
            client = Http1Client()
            response = await call(client, base, b"{}")
            await client.close()
            return response, len(connections)

    response, connections = run(scenario())
    assert (response.status, response.body) == (307, b"")
    assert connections == 1


def test_nothing_is_sent_when_the_request_cannot_be_written_or_connected() -> None:
    async def scenario() -> list[tuple[str, bool]]:
        client = Http1Client()
        out = []
        for url, headers in [
            ("ftp://127.0.0.1/x", []),
            ("http://127.0.0.1:1/x", []),
            ("http://127.0.0.1:1/x", [("Authorization", "Bearer a\r\nX-Injected: 1")]),
            ("http://127.0.0.1:1/x", [("Authorization", "Bearer é€")]),
        ]:
            with pytest.raises(TransportError) as caught:
                await client.request("GET", url, headers, None, timeout_s=1.0, max_bytes=10)
            out.append((caught.value.reason, caught.value.unsent))
        return out

    assert run(scenario()) == [
        ("ENDPOINT_INVALID", True),
        ("CONNECTION_REFUSED", True),
        ("REQUEST_INVALID", True),
        ("REQUEST_INVALID", True),
    ]


def test_idle_connections_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "IDLE_S", 0.0)

    async def scenario() -> int:
        async with raw_server(responder(OK, OK)) as (base, connections):
            client = Http1Client()
            await call(client, base)
            await call(client, base)
            await client.close()
            return len(connections)

    assert run(scenario()) == 2


def test_a_cancelled_request_closes_its_connection() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async def scenario() -> int:
        async with raw_server(slow) as (base, _):
            client = Http1Client()
            task = asyncio.ensure_future(call(client, base, b"{}"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with raw_server(responder(OK)) as (other, _):
                await call(client, other)
            await client.close()
            return len(client._idle.get(("http", "127.0.0.1", int(base.rsplit(":", 1)[1])), ()))

    assert run(scenario()) == 0

"""One aiohttp request handed to an ASGI application (the official MCP SDK's Streamable HTTP
transport), its answer streamed back through an aiohttp ``StreamResponse``.

The body is read (and checked) by seif before the SDK sees it, so ``receive`` yields it whole,
then waits for the client to leave and says ``http.disconnect``: the SDK's transport watches
for that to end an SSE stream or to cancel a handler whose client has gone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any

from aiohttp import web

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]
DISCONNECT_POLL_S = 0.25
_BODY_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})
"""How often a request whose body was delivered looks whether its client has gone."""


def scope_of(request: web.Request, body: bytes, extra: MutableMapping[str, Any]) -> Scope:
    """The ASGI HTTP scope of ``request``, with seif's own keys (``extra``) beside it. The body
    it is given was decoded already: its ``Content-Length`` is that of ``body``, and no
    ``Content-Encoding`` is passed on."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1", "replace"),
        "root_path": "",
        "query_string": request.query_string.encode("latin-1", "replace"),
        "headers": [
            *(
                (k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace"))
                for k, v in request.headers.items()
                if k.lower() not in _BODY_HEADERS
            ),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": tuple(peer[:2]) if isinstance(peer, tuple) else None,
        "server": None,
        **extra,
    }


class _Answer:
    """The ASGI ``send`` side. An event stream's status and headers go out at once (its first
    event may come much later); any other answer's go out with its first body message, in
    one write, with the ``Content-Length`` the application gave. Once the client has gone,
    every message is dropped. ``answered`` is called once, just before the request's answer
    is written: before the last body message, or the event carrying a JSON-RPC response."""

    def __init__(self, request: web.Request, answered: Callable[[], None] | None) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self._start: Message | None = None
        self._answered = answered
        self.done = False

    @property
    def gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def send(self, message: Message) -> None:
        if self.done or self.gone:
            return
        kind = message["type"]
        try:
            if kind == "http.response.start":
                self._start = message
                if _header(message, b"content-type").startswith(b"text/event-stream"):
                    await self._prepared()
            elif kind == "http.response.body":
                await self._body(message)
        except ConnectionResetError:  # the client left mid-answer: nobody reads the rest
            self.done = True

    async def _body(self, message: Message) -> None:
        body = message.get("body", b"")
        if self._answered is not None and (
            not message.get("more_body", False) or _carries_answer(body)
        ):
            self._answered()
            self._answered = None
        response = await self._prepared()
        if body:
            await response.write(body)
        if not message.get("more_body", False):
            await response.write_eof()
            self.done = True

    async def _prepared(self) -> web.StreamResponse:
        if self.response is None:
            start = self._start or {"status": HTTPStatus.INTERNAL_SERVER_ERROR, "headers": []}
            response = web.StreamResponse(status=start["status"])
            for key, value in start.get("headers", []):
                name = key.decode("latin-1").lower()
                if name == "content-length":
                    response.content_length = int(value)
                elif name not in ("transfer-encoding", "connection"):
                    response.headers.add(name, value.decode("latin-1"))
            await response.prepare(self.request)
            self.response = response
        return self.response

    @property
    def started(self) -> bool:
        return self._start is not None or self.response is not None


class StreamBroken(Exception):
    """The application failed after its answer had begun: the answer (returned as is, so no
    second one is started) ends its connection."""

    def __init__(self, response: web.StreamResponse) -> None:
        super().__init__("the answer broke off")
        self.response = response


def _carries_answer(chunk: bytes) -> bool:
    """Whether a chunk of an event stream carries a JSON-RPC response (a POST's stream ends
    with its answer; the SDK writes each event's data on one line)."""
    if b'"result"' not in chunk and b'"error"' not in chunk:
        return False
    for line in chunk.splitlines():
        if line.startswith(b"data:"):
            try:
                message = json.loads(line[5:])
            except ValueError:
                continue
            if (
                isinstance(message, dict)
                and "method" not in message
                and ("result" in message or "error" in message)
            ):
                return True
    return False


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", []):
        if key.lower() == name:
            return bytes(value).lower()
    return b""


async def serve(
    app: AsgiApp,
    request: web.Request,
    body: bytes,
    extra: MutableMapping[str, Any],
    answered: Callable[[], None] | None = None,
) -> tuple[web.StreamResponse | None, bool]:
    """Run ``app`` on ``request`` (its ``body`` already read): the response it streamed, or
    None when it answered nothing (its client gone, say); and whether the client is gone.
    ``answered``: called just before the answer is written (see :class:`_Answer`)."""
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(DISCONNECT_POLL_S)
        return {"type": "http.disconnect"}

    answer = _Answer(request, answered)
    try:
        await app(scope_of(request, body, extra), receive, answer.send)
    except Exception:
        if answer.response is None:
            raise  # nothing was sent: the caller answers the error
        answer.response.force_close()  # mid-answer: the connection ends, no second answer
        raise StreamBroken(answer.response) from None
    if answer.started and answer.response is None:  # a start without a body message
        await answer.send({"type": "http.response.body", "body": b"", "more_body": False})
    return answer.response, answer.gone

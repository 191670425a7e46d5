"""The runtime's listening socket: a connection limit, a header deadline, a body deadline, and
HTTP-layer errors that never echo the request.

aiohttp's own request handler keeps a connection that never completes its request head for as
long as its keep-alive timeout (an hour by default), has no limit on open connections, and
answers a malformed request line or header with a plain-text 400 that quotes the offending
bytes (an ``Authorization`` value included) and logs them with a traceback. :class:`GuardedSite`
serves an application with :class:`Limits` instead:

- a connection must deliver a complete request line and headers within
  ``header_timeout_s`` of being opened or of its previous response, else it is closed (this is
  aiohttp's keep-alive timer, which is armed from the connection's start and is not reset by
  partial data; an idle kept-alive connection therefore closes after the same time);
- at most ``max_connections`` connections are open at once: a new one past the limit evicts
  the oldest connection that is waiting for a request head (a slow or idle client, never one
  whose request is being handled), or, when every connection is busy, is answered 503
  ``TOO_MANY_CONNECTIONS`` and closed;
- the body of a request must arrive within ``body_timeout_s`` (:mod:`servers.http.wire`
  answers 408 ``BODY_TIMEOUT``);
- a request the HTTP parser refuses gets a JSON error naming the kind of fault, never the
  bytes, and one log line naming the exception type only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from policy.strictjson import dump_bytes
from servers.http.wire import BODY_TIMEOUT_S

LOG = logging.getLogger("seif.http")

HEADER_TIMEOUT_S = 10.0
"""The longest a connection may take to deliver a request line and headers."""
MAX_CONNECTIONS = 1024
"""Connections open at once, by default."""
MAX_HEADER_TIMEOUT_S = 10.0
BACKLOG = 512

# the parser's faults, by class, from the most specific: what a client is told instead of the
# parser's own message (which quotes the request)
_PARSER_FAULTS: tuple[tuple[type[Exception], str], ...] = (
    (http_exceptions.LineTooLong, "a request line or header is longer than 8190 bytes"),
    (http_exceptions.BadHttpMethod, "the request method is not an HTTP token"),
    (http_exceptions.InvalidURLError, "the request target is not a valid URL"),
    (http_exceptions.BadStatusLine, "the request line is not HTTP/1.x"),
    (http_exceptions.InvalidHeader, "a request header is malformed"),
    (http_exceptions.PayloadEncodingError, "the body's framing or encoding is invalid"),
)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client connection may hold and for how long."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    body_timeout_s: float = BODY_TIMEOUT_S

    def __post_init__(self) -> None:
        if not 0 < self.header_timeout_s <= MAX_HEADER_TIMEOUT_S:
            raise ValueError(f"the header timeout must be in (0, {MAX_HEADER_TIMEOUT_S}] seconds")
        if self.max_connections < 1:
            raise ValueError("the connection limit must be at least 1")
        if self.body_timeout_s <= 0:
            raise ValueError("the body timeout must be positive")


def _error_body(code: str, message: str) -> bytes:
    return dump_bytes({"error": {"code": code, "message": message}})


def _fault_message(exc: BaseException | None) -> str:
    for kind, message in _PARSER_FAULTS:
        if isinstance(exc, kind):
            return message
    return "the request line or headers are not valid HTTP/1.1"


class _Gate:
    """The open connections of one site, oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: dict[GuardedHandler, None] = {}

    def admit(self) -> bool:
        """Whether a new connection may open now, after closing an idle one if needed: the
        oldest that never sent a complete request, else the oldest idle kept-alive one."""
        if len(self.open) < self.limit:
            return True
        victim = self._idle(fresh_only=True) or self._idle(fresh_only=False)
        if victim is None:
            return False
        self.open.pop(victim)
        victim.force_close()
        return True

    def _idle(self, *, fresh_only: bool) -> GuardedHandler | None:
        for handler in self.open:  # oldest first
            if handler.awaiting_head() and not (fresh_only and handler.served()):
                return handler
        return None


class GuardedHandler(RequestHandler):
    """aiohttp's request handler, counted by a :class:`_Gate`, answering and logging its own
    faults without quoting the request."""

    __slots__ = ("_gate", "body_timeout_s")

    def __init__(self, manager: web.Server, gate: _Gate, body_timeout_s: float, **kw: Any):
        super().__init__(manager, **kw)
        self._gate = gate
        self.body_timeout_s = body_timeout_s

    def awaiting_head(self) -> bool:
        """Whether the connection waits for (the rest of) a request line and headers: no
        request in hand, none being handled (aiohttp's own idle test, as its keep-alive timer
        uses it; aiohttp is pinned)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def served(self) -> bool:
        """Whether the connection has delivered a complete request."""
        return self._request_count > 0

    def connection_lost(self, exc: BaseException | None) -> None:
        self._gate.open.pop(self, None)
        super().connection_lost(exc)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A JSON error instead of aiohttp's text, which quotes the request's bytes."""
        if request.writer.output_size > 0:
            raise ConnectionError("a response was partly sent; the connection is dropped")
        if status >= 500:
            LOG.error("internal error at the HTTP layer: %s", type(exc).__name__)
            body = _error_body("INTERNAL", "internal error")
        else:
            LOG.info("a request was refused at the HTTP layer: %s", type(exc).__name__)
            body = _error_body("BAD_REQUEST", _fault_message(exc))
        response = web.Response(body=body, status=status, content_type="application/json")
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """aiohttp logs a failure with its traceback and the parser's message (which quotes the
        request): keep the event and the exception's type only."""
        exc = kw.get("exc_info")
        if isinstance(exc, web.RequestPayloadError | ConnectionError):
            return  # a body that failed after its answer was sent, or a client gone
        LOG.warning("a connection failed at the HTTP layer: %s", type(exc).__name__)


class _Refused(asyncio.Protocol):
    """A connection past the limit while every open one is busy: 503, then closed."""

    ANSWER = (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        body = _error_body("TOO_MANY_CONNECTIONS", "the runtime is at its connection limit")
        # a stream transport (uvloop's is no registered subclass of asyncio's, so no isinstance)
        writer = cast(asyncio.WriteTransport, transport)
        writer.write(self.ANSWER % (len(body), body))
        writer.close()


class GuardedSite(web.BaseSite):
    """A TCP site whose connections are :class:`GuardedHandler` under :class:`Limits`."""

    __slots__ = ("_gate", "_host", "_limits", "_port")

    def __init__(self, runner: web.AppRunner, host: str, port: int, limits: Limits) -> None:
        super().__init__(runner, backlog=BACKLOG)
        self._host = host
        self._port = port
        self._limits = limits
        self._gate = _Gate(limits.max_connections)

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def open_connections(self) -> int:
        return len(self._gate.open)

    def _protocol(self) -> asyncio.Protocol:
        server = self._runner.server
        assert server is not None  # the runner was set up before the site
        if not self._gate.admit():
            return _Refused()
        handler = GuardedHandler(
            server,
            self._gate,
            self._limits.body_timeout_s,
            loop=asyncio.get_running_loop(),
            keepalive_timeout=self._limits.header_timeout_s,
            lingering_time=self._limits.header_timeout_s,
            access_log=None,
        )
        # counted from now, not from connection_made: the connections of one accept burst
        # are all created before the first of them is connected
        self._gate.open[handler] = None
        return handler

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            self._host,
            self._port,
            backlog=self._backlog,
        )

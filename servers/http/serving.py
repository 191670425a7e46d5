"""The runtime's listening socket: a connection limit, a header deadline, a body deadline, a
write deadline, and HTTP-layer errors that never echo the request.

aiohttp's own request handler keeps a connection that never completes its request head for as
long as its keep-alive timeout (an hour by default), has no limit on open connections, waits
for ever for a client that does not read its answer, and answers a malformed request line or
header with a plain-text 400 that quotes the offending bytes (an ``Authorization`` value
included) and logs them with a traceback. :class:`GuardedSite` serves an application with
:class:`Limits` instead:

- a connection must deliver a complete request line and headers within
  ``header_timeout_s`` of being opened or of its previous response, else it is closed (this is
  aiohttp's keep-alive timer, which is armed from the connection's start and is not reset by
  partial data; an idle kept-alive connection therefore closes after the same time);
- at most ``max_connections`` connections are open at once: a new one past the limit aborts
  an open one that is not computing an answer (:meth:`GuardedHandler.eviction_rank`: one
  already answered and closing, else one without a complete request, else an idle kept-alive
  one, else one whose client is not taking its answer; the oldest of the first such kind), or,
  when every connection is computing, is answered 503 ``TOO_MANY_CONNECTIONS`` and closed;
- the body of a request must arrive within ``body_timeout_s`` (:mod:`servers.http.bodies`
  answers 408 ``BODY_TIMEOUT``); after an answer that left a body unread (which the
  application marks ``Connection: close``), the rest is read and discarded for at most
  :data:`LINGER_S`, then the connection is closed;
- a client must take some of a pending answer every ``write_timeout_s``, else its connection
  is aborted (whatever was unsent is dropped: ``close()`` would keep the socket, and its file
  descriptor, until a client that reads nothing had read it);
- a request the HTTP parser refuses gets a JSON error naming the kind of fault, never the
  bytes, and one log line naming the exception type only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from policy.json.strict import dump_bytes
from servers.http.bodies import BODY_TIMEOUT_S
from servers.wire.errors import ErrorCode, Refused

LOG = logging.getLogger("seif.http")

HEADER_TIMEOUT_S = 10.0
"""The longest a connection may take to deliver a request line and headers."""
MAX_CONNECTIONS = 1024
"""Connections open at once, by default."""
MAX_HEADER_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0
"""The longest a client may take none of a pending answer, by default."""
MAX_WRITE_TIMEOUT_S = 300.0
LINGER_S = 2.0
"""The longest the rest of an unread body is read and discarded after its answer."""
BACKLOG = 512
MAX_FIELD_BYTES = 64 << 10
"""The longest header field read: a bearer token past its own bound (16 KiB) is still read, so
that the answer can be 401 ``TOKEN_INVALID`` (docs/identity.md)."""
MAX_HEADERS = 48
"""At most this many header fields (aiohttp's default is 128): with fields up to
:data:`MAX_FIELD_BYTES`, a request head stays within 3 MiB."""

# the parser's faults, by class, from the most specific: what a client is told instead of the
# parser's own message (which quotes the request)
_PARSER_FAULTS: tuple[tuple[type[Exception], str], ...] = (
    (
        http_exceptions.LineTooLong,
        f"a request line is longer than 8190 bytes, or a header longer than {MAX_FIELD_BYTES}",
    ),
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
    write_timeout_s: float = WRITE_TIMEOUT_S

    def __post_init__(self) -> None:
        if not 0 < self.header_timeout_s <= MAX_HEADER_TIMEOUT_S:
            raise ValueError(f"the header timeout must be in (0, {MAX_HEADER_TIMEOUT_S}] seconds")
        if self.max_connections < 1:
            raise ValueError("the connection limit must be at least 1")
        if self.body_timeout_s <= 0:
            raise ValueError("the body timeout must be positive")
        if not 0 < self.write_timeout_s <= MAX_WRITE_TIMEOUT_S:
            raise ValueError(f"the write timeout must be in (0, {MAX_WRITE_TIMEOUT_S:g}] seconds")


def _error_body(refused: Refused) -> bytes:
    return dump_bytes(refused.body())


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
        """Whether a new connection may open now, after aborting one that is not computing
        an answer if the limit is reached: the oldest of the lowest
        :meth:`GuardedHandler.eviction_rank`."""
        if len(self.open) < self.limit:
            return True
        victim = self._victim()
        if victim is None:
            return False
        victim.abort()
        return True

    def _victim(self) -> GuardedHandler | None:
        best: GuardedHandler | None = None
        best_rank = EVICT_LAST + 1
        for handler in self.open:  # oldest first: a later one replaces it only if lower
            rank = handler.eviction_rank()
            if rank is not None and rank < best_rank:
                best, best_rank = handler, rank
                if rank == EVICT_FIRST:
                    break
        return best


EVICT_FIRST = 0
"""Every request answered (an answer counts once the client's socket took all of it), the
connection closing: discarding the rest of a body its answer left unread."""
EVICT_FRESH = 1
"""No complete request yet: a slow or silent client."""
EVICT_IDLE = 2
"""Every request answered, waiting for the next one: an idle kept-alive client."""
EVICT_LAST = 3
"""An answer its client is not taking (the write deadline is running)."""


class GuardedHandler(RequestHandler):
    """aiohttp's request handler, counted by a :class:`_Gate`, under a write deadline,
    answering and logging its own faults without quoting the request."""

    __slots__ = (
        "_answered",
        "_gate",
        "_socket",
        "_write_check",
        "_write_left",
        "body_timeout_s",
        "write_timeout_s",
    )

    def __init__(self, manager: web.Server, gate: _Gate, limits: Limits, **kw: Any):
        super().__init__(manager, **kw)
        self._gate = gate
        self.body_timeout_s = limits.body_timeout_s
        self.write_timeout_s = limits.write_timeout_s
        self._socket: asyncio.Transport | None = None
        """The connection's transport until it is lost (aiohttp forgets it when it closes)."""
        self._answered = 0
        """Requests whose answer was written (or failed): all of them when it equals
        ``_request_count``, aiohttp's count of requests parsed."""
        self._write_check: asyncio.TimerHandle | None = None
        self._write_left = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        socket = cast(asyncio.Transport, transport)
        self._socket = socket
        # writing pauses as soon as the client's socket refuses a byte, and resumes once all
        # is taken: while it is paused, the write deadline runs
        socket.set_write_buffer_limits(high=0)
        super().connection_made(transport)

    def awaiting_head(self) -> bool:
        """Whether the connection waits for (the rest of) a request line and headers: no
        request in hand, none being handled (aiohttp's own idle test, as its keep-alive timer
        uses it; aiohttp is pinned)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def served(self) -> bool:
        """Whether the connection has delivered a complete request."""
        return self._request_count > 0

    def eviction_rank(self) -> int | None:
        """How readily the connection is aborted for a new one past the limit (``EVICT_*``,
        lowest first), or None while it is computing an answer (or not yet connected: the
        newest connections of an accept burst)."""
        if self._socket is None:
            return None
        if self._answered >= self._request_count:  # nothing parsed is left unanswered
            if self.awaiting_head():
                return EVICT_IDLE if self.served() else EVICT_FRESH
            return EVICT_FIRST if self.served() else EVICT_FRESH
        if self.writing_paused:
            return EVICT_LAST
        return None

    async def finish_response(
        self, request: BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._answered += 1

    def pause_writing(self) -> None:
        super().pause_writing()
        socket = self._socket
        self._write_left = socket.get_write_buffer_size() if socket is not None else 0
        self._arm_write_check()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_write_check()

    def _arm_write_check(self) -> None:
        self._disarm_write_check()
        self._write_check = self._loop.call_later(self.write_timeout_s, self._check_write)

    def _disarm_write_check(self) -> None:
        if self._write_check is not None:
            self._write_check.cancel()
            self._write_check = None

    def _check_write(self) -> None:
        """A write deadline passed while writing was paused: go on if the client took some
        of what is pending since the last check, else abort."""
        self._write_check = None
        socket = self._socket
        if socket is None:
            return
        left = socket.get_write_buffer_size()
        if left < self._write_left:
            self._write_left = left
            if left:
                self._arm_write_check()
            return
        LOG.info("a client took none of its answer for %g s: aborted", self.write_timeout_s)
        self.abort()

    def abort(self) -> None:
        """Close the connection now, dropping whatever is unsent, and stop counting it."""
        self._gate.open.pop(self, None)
        self._disarm_write_check()
        if self._socket is not None:
            self._socket.abort()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._gate.open.pop(self, None)
        self._disarm_write_check()
        self._socket = None
        super().connection_lost(exc)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = HTTPStatus.INTERNAL_SERVER_ERROR,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A JSON error instead of aiohttp's text, which quotes the request's bytes."""
        if request.writer.output_size > 0:
            raise ConnectionError("a response was partly sent; the connection is dropped")
        if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            LOG.error("internal error at the HTTP layer: %s", type(exc).__name__)
            body = _error_body(Refused(ErrorCode.INTERNAL))
        else:  # aiohttp's status (400, 413, 431...) with the API's body
            LOG.info("a request was refused at the HTTP layer: %s", type(exc).__name__)
            body = _error_body(Refused(ErrorCode.BAD_REQUEST, _fault_message(exc)))
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

    STATUS = ErrorCode.TOO_MANY_CONNECTIONS.status
    ANSWER = (
        f"HTTP/1.1 {STATUS.value} {STATUS.phrase}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        body = _error_body(Refused(ErrorCode.TOO_MANY_CONNECTIONS))
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
            self._limits,
            loop=asyncio.get_running_loop(),
            keepalive_timeout=self._limits.header_timeout_s,
            lingering_time=min(LINGER_S, self._limits.header_timeout_s),
            access_log=None,
            max_field_size=MAX_FIELD_BYTES,
            max_headers=MAX_HEADERS,
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

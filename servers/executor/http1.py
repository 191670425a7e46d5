"""A small HTTP/1.1 client for executor endpoints: one request per exchange, nothing more.

The executor client needs little of HTTP: a ``GET`` or a ``POST`` with a JSON body to one exact
URL, the status, the raw headers and a body read up to a byte limit, within one deadline. This
client does that and nothing else, which costs a third of what a general client does per
request (``python -m bench runtime``):

- connections are kept alive per origin (scheme, host, port) and reused only after a complete
  response that allows it, and only by a request with the same TLS context (an idle connection
  of another context is closed); an idle connection is dropped after :data:`IDLE_S` seconds
  (sooner than common servers' keep-alive timeouts);
- an idle connection is taken for a request only if nothing can be read on its socket: a
  server's close (FIN, TLS ``close_notify``, reset) that reached this host before the request
  is written, even one the event loop has not processed yet, sends the request on a fresh
  connection instead, so it is sent once; if that connection cannot open, the request fails
  ``unsent``. A request is never retried once written, on any connection: a close that crosses
  the request in flight is ``CONNECTION_LOST`` (the server may have read it);
- redirects are never followed: a 3xx is returned with its headers and no body, and the
  connection is closed;
- no proxy, no cookie, no compression (``Accept-Encoding: identity`` is the caller's), nothing
  read from the environment; ``https`` with the caller's TLS context (a binding's ``caFile``)
  or :func:`servers.config.tls.system_context` (the system trust store), the certificate and
  the host name verified, TLS 1.2 at least; a failed handshake is ``unsent``
  (``TLS_UNTRUSTED``, ``TLS_NAME_MISMATCH``, ``TLS_FAILED``): no request byte was written;
- the response is parsed by ``httptools`` (llhttp); headers are limited to
  :data:`MAX_HEADER_BYTES`, the body to the caller's ``max_bytes`` (a declared length over it
  fails before the body is read);
- a deadline covers connecting (the TLS handshake included), sending and receiving.
  :class:`TransportError` says what failed, and whether the request can have left (``unsent``:
  no byte of it was written).
"""

from __future__ import annotations

import asyncio
import select
import ssl
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httptools

from servers.config.tls import system_context
from servers.support.memo import remembered
from servers.wire import reasons

IDLE_S = 15.0
MAX_HEADER_BYTES = 65536
MAX_IDLE_PER_ORIGIN = 64
_NAME_MISMATCH = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


class TransportError(Exception):
    """``reason``: ``CONNECTION_REFUSED``, ``CONNECT_TIMEOUT``, ``TLS_UNTRUSTED`` (a certificate
    no trusted CA signed, or expired), ``TLS_NAME_MISMATCH`` (a certificate for another name),
    ``TLS_FAILED`` (any other handshake failure), ``ENDPOINT_INVALID`` or ``REQUEST_INVALID``
    (all ``unsent``), ``TIMEOUT``, ``CONNECTION_LOST``, ``TOO_LARGE``, ``INVALID_RESPONSE``.
    The executor client raises it too, for what it refuses in a response it did receive
    (``CREDENTIAL_REFLECTED``, ``INVALID_RESPONSE``)."""

    def __init__(self, reason: str, *, unsent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unsent = unsent


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class _Target:
    origin: tuple[str, str, int]
    host_header: str
    path: str


def _target(url: str) -> _Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise TransportError(reasons.ENDPOINT_INVALID, unsent=True) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(reasons.ENDPOINT_INVALID, unsent=True)
    default = 443 if parts.scheme == "https" else 80
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port in (None, default) else f"{shown}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target((parts.scheme, host, port or default), netloc, path)


class _Connection(asyncio.Protocol):
    """One connection; at most one exchange at a time."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._limit = 0
        self._reset()

    def _reset(self) -> None:
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._size = 0
        self._until_eof = False
        self.reusable = False

    def begin(self, waiter: asyncio.Future[Response], limit: int) -> None:
        self._waiter, self._limit = waiter, limit
        self._reset()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's stream transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = transport  # type: ignore[assignment]  # a write()-able stream transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # nobody asked: a confused or hostile server
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            self._fail(cause if isinstance(cause, TransportError) else _invalid())
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._fail(_invalid())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._until_eof and self._waiter is not None and not self._waiter.done():
            self._finish()  # a body delimited by the end of the connection
        else:
            self._fail(TransportError(reasons.CONNECTION_LOST))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > MAX_HEADER_BYTES:
            raise _invalid()
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        lengths = [v for n, v in self._headers if n.lower() == b"content-length"]
        if 300 <= status < 400:
            self._finish(redirect=True)
            return
        if lengths and lengths[0].strip().isdigit() and int(lengths[0]) > self._limit:
            raise TransportError(reasons.TOO_LARGE)
        chunked = any(n.lower() == b"transfer-encoding" for n, _ in self._headers)
        self._until_eof = not lengths and not chunked and status != 204  # (3xx returned above)
        self.reusable = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._limit:
            raise TransportError(reasons.TOO_LARGE)
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.reusable = self.reusable and self._parser.should_keep_alive()
        self._finish()

    # outcomes

    def _finish(self, *, redirect: bool = False) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            body = b"" if redirect else b"".join(self._body)
            waiter.set_result(Response(self._parser.get_status_code(), tuple(self._headers), body))
        if redirect:
            self.close()  # its body is not read: the connection cannot be reused

    def _fail(self, error: TransportError) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


def _invalid() -> TransportError:
    return TransportError(reasons.INVALID_RESPONSE)


def _quiet(conn: _Connection) -> bool:
    """Whether an idle connection can take a request: open, and nothing to read on its socket.

    An idle connection has nothing to say; whatever is readable (the server's FIN, its TLS
    ``close_notify``, a reset, stray bytes) means it is closing, even before the event loop
    has run the callbacks that would tell the protocol. Asking the kernel closes most of the
    window in which a request is written to a connection the server already closed."""
    transport = conn.transport
    if conn.closed or transport is None or transport.is_closing():
        return False
    sock = transport.get_extra_info("socket")  # uvloop's pseudo-socket has fileno() too
    try:
        fd = sock.fileno() if sock is not None else -1
    except OSError:
        return False
    if fd < 0:
        return False
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)  # POLLHUP and POLLERR are always reported
    readable, _, _ = select.select([fd], [], [], 0)
    return not readable


class Http1Client:
    """Keep-alive connections per origin; :meth:`request` for one exchange.

    ``ssl_context`` is the TLS context of ``https`` requests that bring none of their own
    (default: :func:`~servers.config.tls.system_context`, the system trust store)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        timeout_s: float,
        max_bytes: int,
        tls: ssl.SSLContext | None = None,
    ) -> Response:
        """One request and its response, within ``timeout_s`` in all; raises
        :class:`TransportError` (cancellation propagates, and closes the connection).
        ``tls``: the context that verifies an ``https`` server (ignored for ``http``)."""
        target = remembered(self._targets, url, _target, limit=1024)
        head = _head(method, target, headers, body)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        conn = await self._connection(target, self._context(target, tls), deadline)
        waiter: asyncio.Future[Response] = loop.create_future()
        conn.begin(waiter, max_bytes)
        if conn.transport is None:  # connection_made not called: the loop broke its contract
            raise TransportError(reasons.CONNECTION_LOST)
        conn.transport.write(head + body if body else head)
        try:
            async with asyncio.timeout_at(deadline):
                response = await waiter
        except TimeoutError:
            conn.close()
            raise TransportError(reasons.TIMEOUT) from None
        except BaseException:
            conn.close()
            raise
        self._release(target.origin, conn, loop.time())
        return response

    def _context(self, target: _Target, tls: ssl.SSLContext | None) -> ssl.SSLContext | None:
        if target.origin[0] != "https":
            return None
        if tls is None:
            tls = self._ssl or system_context()
        return tls

    async def _connection(
        self, target: _Target, tls: ssl.SSLContext | None, deadline: float
    ) -> _Connection:
        """An idle connection that can take a request now, else a new one. (No await
        between the check of an idle connection and the caller's write.)"""
        idle = self._idle.get(target.origin)
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            if conn.tls is tls and now - conn.idle_since < IDLE_S and _quiet(conn):
                return conn
            conn.close()
        if self._closed:
            raise TransportError(reasons.CONNECTION_REFUSED, unsent=True)
        return await self._open(target, tls, deadline)

    async def _open(
        self, target: _Target, tls: ssl.SSLContext | None, deadline: float
    ) -> _Connection:
        _, host, port = target.origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                _, conn = await loop.create_connection(
                    lambda: _Connection(tls),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                )
        except TimeoutError:
            raise TransportError(reasons.CONNECT_TIMEOUT, unsent=True) from None
        except ssl.SSLCertVerificationError as error:
            mismatch = error.verify_code in _NAME_MISMATCH
            reason = reasons.TLS_NAME_MISMATCH if mismatch else reasons.TLS_UNTRUSTED
            raise TransportError(reason, unsent=True) from None
        except ssl.SSLError:
            raise TransportError(reasons.TLS_FAILED, unsent=True) from None
        except (OSError, ValueError):
            raise TransportError(reasons.CONNECTION_REFUSED, unsent=True) from None
        return conn

    def _release(self, origin: tuple[str, str, int], conn: _Connection, now: float) -> None:
        if not conn.reusable or conn.closed or self._closed:
            conn.close()
            return
        idle = self._idle.setdefault(origin, deque())
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.close()
            return
        conn.idle_since = now
        idle.append(conn)

    async def close(self) -> None:
        """Close every idle connection; later requests fail unsent."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports close


def _head(method: str, target: _Target, headers: list[tuple[str, str]], body: Any) -> bytes:
    """The request line and headers; a header that could split the request (CR, LF, NUL) or is
    not Latin-1 is refused before anything is sent (``REQUEST_INVALID``, unsent)."""
    lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.host_header}"]
    for name, value in headers:
        if any(c in name or c in value for c in "\r\n\0") or ":" in name:
            raise TransportError(reasons.REQUEST_INVALID, unsent=True)
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise TransportError(reasons.REQUEST_INVALID, unsent=True) from None

"""One live connection per upstream MCP server, shared by its tools, kept up by a supervisor.

An :class:`UpstreamConnection` connects through the official ``mcp`` SDK's client (the
``initialize`` handshake: its sessions carry ``notifications/tools/list_changed``):

- stdio: the command is spawned without a shell, with exactly the environment of the spec: the
  binding's ``env`` (its secrets), ``LANG`` and ``TMPDIR``, and what the SDK's ``stdio_client``
  adds itself (``get_default_environment``: ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``,
  ``TERM``, ``USER``); nothing else of the runtime's environment. Its stderr goes to
  ``/dev/null``, or to ``DIR/<server>.stderr`` (mode 0600, appended) under
  ``seif serve --upstream-stderr DIR``: it may echo arguments.
- Streamable HTTP: the binding's TLS context, its bearer token, no proxy or other variable of
  the environment, redirects never followed. The SDK keeps the session (handshake, listing,
  notifications); a ``tools/call`` is sent in that session on seif's own HTTP/1.1 client
  (:mod:`.calls`: kept-alive connections, strict JSON).

The supervisor reconnects whenever the connection ends (the process exited, its pipes closed,
an HTTP upstream stopped answering a listing) after a backoff of 1 s doubling to 30 s (back to
1 s after a connection that lasted 30 s); while it is down the upstream lists nothing, so its
tools are ``UNAVAILABLE``. The listing is read at each connection, on the upstream's
``notifications/tools/list_changed``, and on demand when older than the caller allows
(:meth:`UpstreamConnection.digests`). No secret, argument, output or upstream message reaches a
log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from compiler.authoring.upstream import descriptor_digest
from servers.config.upstreams import HttpUpstream, StdioUpstream, Upstream
from servers.executor.http1 import Http1Client
from servers.upstream.calls import CallFailed, HttpSession, call_tool
from servers.upstream.listing import read_tools

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
REQUEST_TIMEOUT_S = 30.0
"""The handshake's and a listing's bound."""
PASSED_VARIABLES = ("LANG", "TMPDIR")
"""Variables of the runtime's environment a stdio upstream gets, beside the SDK's defaults."""

log = logging.getLogger(__name__)

Digests = Mapping[str, str | None]
"""An upstream's listing: each tool name's descriptor digest (None for a name listed twice)."""


class NotConnected(Exception):
    """The upstream is down: nothing was sent."""


class UpstreamConnection:
    """The connection to one upstream, its supervisor and its latest listing."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        stderr_dir: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        native_calls: bool = True,
    ) -> None:
        """``native_calls=False``: an HTTP upstream's calls go through the SDK's client too
        (the comparison :mod:`tests.servers.upstream.test_upstream_calls` keeps)."""
        self.upstream = upstream
        self._stderr_dir = stderr_dir
        self._native_calls = native_calls
        self._clock = clock
        self._client: Any = None
        self._session: HttpSession | None = None
        """An HTTP upstream's session while connected: where its calls go."""
        self._ended: asyncio.Event | None = None
        self._digests: Digests | None = None
        self._listed_at: float | None = None
        self._refreshing: asyncio.Future[Digests | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._spawned: set[asyncio.Task[Any]] = set()
        self._watchers: list[Callable[[str], None]] = []
        self.connections = 0
        """How many times it connected (a test's and an operator's view of restarts)."""

    @property
    def server(self) -> str:
        return self.upstream.server

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values that must never come back from it (credential reflection)."""
        if isinstance(self.upstream, HttpUpstream):
            return (self.upstream.secret,) if self.upstream.secret else ()
        return tuple(value for value in self.upstream.env.values() if value)

    @property
    def up(self) -> bool:
        """Connected, and its connection not known to have ended (a process that exited, a
        failed listing): from that moment on nothing more is sent on it."""
        return self._client is not None and not (self._ended is not None and self._ended.is_set())

    def watch(self, changed: Callable[[str], None]) -> None:
        """Call ``changed(server)`` whenever its listing changes (or it goes up or down)."""
        self._watchers.append(changed)

    # ------------------------------------------------------------------ lifetime

    def start(self) -> None:
        """Start the supervisor (in the running loop)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._supervise())

    async def aclose(self) -> None:
        """Stop the supervisor: the connection is closed, a stdio process stopped."""
        tasks = [t for t in (self._task, *self._spawned) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    async def wait_up(self, timeout: float) -> bool:
        """Whether it is connected within ``timeout`` seconds (tests, start-up)."""
        deadline = self._clock() + timeout
        while not self.up and self._clock() < deadline:
            await asyncio.sleep(0.05)
        return self.up

    async def _supervise(self) -> None:
        delay = FIRST_BACKOFF_S
        while True:
            started = self._clock()
            try:
                await self._connect_once()
            except Exception as error:  # whatever the SDK or the transport raised
                log.warning("upstream %s: disconnected (%s)", self.server, _kind(error))
            self._set_down()
            if self._clock() - started >= MAX_BACKOFF_S:
                delay = FIRST_BACKOFF_S
            log.info("upstream %s: reconnecting in %g s", self.server, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    async def _connect_once(self) -> None:
        import mcp  # noqa: PLC0415  # the `server` extra, as for `seif tool import`

        ended = asyncio.Event()
        answered: dict[str, str] = {}
        async with contextlib.AsyncExitStack() as stack:
            transport = self._transport(stack, answered)
            client = mcp.Client(
                _watched(transport, ended),
                mode="legacy",
                cache=None,
                read_timeout_seconds=REQUEST_TIMEOUT_S,
                message_handler=self._on_message,
            )
            await stack.enter_async_context(client)
            if isinstance(self.upstream, HttpUpstream) and self._native_calls:
                http = Http1Client()
                stack.push_async_callback(http.close)
                self._session = HttpSession(
                    self.upstream, http, client.protocol_version, answered.get("session")
                )
            self._client, self._ended = client, ended
            self.connections += 1
            log.info("upstream %s: connected", self.server)
            await self._refresh()
            await ended.wait()

    def _transport(self, stack: contextlib.AsyncExitStack, answered: dict[str, str]) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415
        from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

        upstream = self.upstream
        if isinstance(upstream, StdioUpstream):
            command, *args = upstream.command
            log.info("upstream %s: starting %s", self.server, command)  # the program, resolved
            params = StdioServerParameters(
                command=command, args=args, env=process_env(upstream), cwd=upstream.cwd
            )
            return stdio_client(params, errlog=stack.enter_context(self._errlog()))
        return streamable_http_client(upstream.url, http_client=http_client(upstream, answered))

    def _errlog(self) -> TextIO:
        if self._stderr_dir is None:
            return open(os.devnull, "w", encoding="utf-8")  # closed by the stack
        path = self._stderr_dir / f"{self.server}.stderr"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding="utf-8")

    def _set_down(self) -> None:
        was_up = self._client is not None
        self._client, self._ended, self._session = None, None, None
        self._digests, self._listed_at = None, None
        if was_up:
            self._tell()

    def _broken(self) -> None:
        """The connection failed a request: end it (the supervisor reconnects)."""
        if self._ended is not None:
            self._ended.set()

    # ------------------------------------------------------------------ listing

    async def digests(self, max_age: float) -> Digests | None:
        """Its listing, read again when older than ``max_age`` seconds (0: now); None while
        it is down or when the listing cannot be read. Never raises (but for cancellation)."""
        if not self.up:
            return None
        listed = self._listed_at
        if listed is not None and max_age > 0 and self._clock() - listed <= max_age:
            return self._digests
        return await self._refresh()

    async def _refresh(self) -> Digests | None:
        """Read the listing (concurrent refreshes share one request)."""
        if self._refreshing is None:
            self._refreshing = asyncio.ensure_future(self._read_listing())
            self._refreshing.add_done_callback(lambda _done: self._forget_refresh())
        return await asyncio.shield(self._refreshing)

    def _forget_refresh(self) -> None:
        self._refreshing = None

    async def _read_listing(self) -> Digests | None:
        client = self._client
        if client is None:
            return None
        try:
            tools = await read_tools(client.session)
        except Exception as error:  # a failed listing: the connection is not usable
            log.warning("upstream %s: listing failed (%s)", self.server, _kind(error))
            self._broken()
            return None
        if client is not self._client:
            return None
        digests: dict[str, str | None] = {}
        for tool in tools:
            name = tool.get("name")
            if isinstance(name, str):
                digests[name] = None if name in digests else descriptor_digest(tool)
        changed = digests != self._digests
        self._digests, self._listed_at = digests, self._clock()
        if changed:
            self._tell()
        return digests

    async def _on_message(self, message: Any) -> None:
        self._notified(getattr(message, "method", None))

    def _notified(self, method: Any) -> None:
        if method == "notifications/tools/list_changed":
            task = asyncio.ensure_future(self._refresh())
            self._spawned.add(task)
            task.add_done_callback(self._spawned.discard)

    def _tell(self) -> None:
        for changed in self._watchers:
            try:
                changed(self.server)
            except Exception:  # a watcher's bug must not stop the supervisor
                log.exception("upstream %s: a listing watcher failed", self.server)

    # ------------------------------------------------------------------ calls

    async def call(
        self,
        name: str,
        arguments: Any,
        meta: Mapping[str, str],
        *,
        timeout_s: float,
        max_bytes: int,
    ) -> dict[str, Any]:
        """One ``tools/call``, never retried: the result object as sent. Raises
        :class:`NotConnected` when it is down (nothing sent); for an HTTP upstream
        :class:`~servers.upstream.calls.CallFailed` (the outcome it is); for a stdio one what
        the SDK raises (``MCPError``: an error answer, a timeout, a closed connection; a
        pydantic ``ValidationError``: a result that is not one)."""
        client, session = self._client, self._session
        if not self.up:  # never connected, or known to have ended
            raise NotConnected
        params = {"name": name, "arguments": arguments, "_meta": dict(meta)}
        if session is not None:
            try:
                return await call_tool(
                    session,
                    params,
                    timeout_s=timeout_s,
                    max_bytes=max_bytes,
                    on_notification=self._notified,
                )
            except CallFailed as failed:
                if failed.renew:
                    self._broken()
                raise
        return await self._sdk_call(client, params, timeout_s)

    async def _sdk_call(
        self, client: Any, params: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        import mcp_types as mt  # noqa: PLC0415
        from pydantic import TypeAdapter  # noqa: PLC0415

        request = mt.CallToolRequest(params=mt.CallToolRequestParams.model_validate(params))
        result: dict[str, Any] = await client.session.send_request(
            request, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=timeout_s
        )
        return result


def process_env(upstream: StdioUpstream) -> dict[str, str]:
    """What a stdio upstream's process gets beside the SDK's defaults: ``LANG`` and
    ``TMPDIR`` when the runtime has them, and the binding's ``env``."""
    passed = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    return passed | dict(upstream.env)


def http_client(upstream: HttpUpstream, answered: dict[str, str] | None = None) -> Any:
    """The HTTP client of a Streamable HTTP upstream: its bearer token and TLS context, no
    redirect followed, nothing read from the environment (no proxy). ``answered["session"]``
    keeps the session id the upstream gave (its ``Mcp-Session-Id``)."""
    import httpx2  # noqa: PLC0415

    headers = {} if upstream.secret is None else {"Authorization": f"Bearer {upstream.secret}"}
    verify: Any = upstream.tls if upstream.tls is not None else True
    timeout = httpx2.Timeout(REQUEST_TIMEOUT_S, read=None)  # a call's bound is the SDK's
    hooks: dict[str, list[Any]] = {}
    if answered is not None:

        async def keep_session(response: Any) -> None:
            session = response.headers.get("mcp-session-id")
            if session:
                answered["session"] = session

        hooks["response"] = [keep_session]
    return httpx2.AsyncClient(
        headers=headers,
        verify=verify,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        event_hooks=hooks,
    )


@contextlib.asynccontextmanager
async def _watched(transport: Any, ended: asyncio.Event) -> AsyncIterator[Any]:
    """``transport``'s streams, and ``ended`` set when its read side ends (the process
    exited, the connection closed)."""
    import anyio  # noqa: PLC0415

    async with transport as (read, write):
        sender, receiver = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            try:
                async with sender:
                    async for item in read:
                        await sender.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            try:
                yield receiver, write
            finally:
                group.cancel_scope.cancel()


def _kind(error: BaseException) -> str:
    """An exception's class (a group: its first leaf's), never its text (it may carry what
    the upstream said)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return type(error).__name__

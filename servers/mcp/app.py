"""MCP (Streamable HTTP) at ``/mcp/{objective}`` beside the runtime's HTTP API: ``mount``.

seif checks what the SDK need not see first (:mod:`servers.mcp.boundary`). The official
``mcp`` SDK then speaks the protocol: one session manager per objective (a session of one
objective is unknown at another), sessions owned by the credential that opened them. Its
handlers, here, ask the same :class:`~servers.runtime.service.Runtime` as the HTTP API; the
arguments and ``_meta`` they use are the strictly parsed ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import mcp_types as mt
from aiohttp import web
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from servers.http.app import MCP_REVISIONS, PREPARED, RUNTIME
from servers.mcp.boundary import handle
from servers.mcp.contexts import Contexts
from servers.mcp.handlers import Asked, call_tool, list_tools
from servers.mcp.mounted import MOUNTED, McpOptions, Mounted
from servers.wire.errors import INVALID_REQUEST

__all__ = ["REVISIONS", "McpOptions", "mount"]
SESSION_IDLE_S = 30 * 60
REVISIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
"""The protocol revisions served: the SDK's handshake revisions (sessions) and 2026-07-28."""


def mount(app: web.Application, options: McpOptions) -> None:
    """Serve MCP at ``/mcp/{objective}`` on the runtime's ``app``."""
    prepared = app[PREPARED]
    if prepared.require_turn:
        raise ValueError("MCP cannot be served with require_turn: MCP clients start no turns")
    server = _server(app)
    mounted = Mounted({}, {}, Contexts(lambda: app[RUNTIME]), options)
    mounted.server_info = server.server_info_stamp
    every: list[_Sessions] = []  # one budget of sessions per credential, across objectives
    for objective in prepared.build.project.objective_by_id:
        mounted.managers[objective] = _Sessions(
            server, every, options.sessions_per_credential, session_idle_timeout=SESSION_IDLE_S
        )
        mounted.plain[objective] = _Sessions(
            server, every, options.sessions_per_credential, json_response=True
        )
    app[MOUNTED] = mounted
    app[MCP_REVISIONS] = REVISIONS
    app.cleanup_ctx.append(_running)
    for method in ("POST", "GET", "DELETE"):
        app.router.add_route(method, "/mcp/{objective}", handle)


async def _running(app: web.Application) -> AsyncIterator[None]:
    """The session managers run in a task of their own (their task groups are entered and
    left in one task, whichever tasks start and stop the application)."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            mounted = app[MOUNTED]
            for manager in (*mounted.managers.values(), *mounted.plain.values()):
                await stack.enter_async_context(manager.run())
            started.set()
            await stop.wait()

    app[RUNTIME].contexts.watch(app[MOUNTED].contexts.tools_changed)  # an upstream's change
    task = asyncio.ensure_future(run())
    waiting = asyncio.ensure_future(started.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()  # it failed to start: say why
    try:
        yield
    finally:
        stop.set()
        await task


def _server(app: web.Application) -> Server[Any]:
    """One SDK server for every objective. No tool declares ``Mcp-Param-*`` headers (the
    schema subset has no ``x-mcp-header``), so the SDK has none to check against a schema."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return await _list_tools(app, ctx)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        return await _call_tool(app, ctx, params)

    server = _Server(
        "seif",
        version="1",
        get_tool_input_schema=_no_header_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.middleware = []  # no OpenTelemetry spans: the decision log is seif's record
    return server


class _Sessions(StreamableHTTPSessionManager):
    """The SDK's session manager of one objective, opening no session for a credential that
    holds its budget of sessions at every objective's manager (``every``) together: one
    opening sessions in a loop, at any objective, fills its own share, never another's (the
    SDK's own bound, 10,000 per objective, then answers 503)."""

    def __init__(self, server: Server[Any], every: list[_Sessions], budget: int, **kw: Any):
        super().__init__(server, **kw)
        self._every = every
        self._budget = budget
        every.append(self)

    def _admit_session(self, requestor: Any) -> Any:
        if requestor is not None:
            held = sum(  # by client: a credential's users share its budget
                owner["client_id"] == requestor["client_id"]
                for manager in self._every
                for owner in manager._session_owners.values()
            )
            if held >= self._budget:
                return None
        return super()._admit_session(requestor)


def _no_header_schema(_name: str) -> None:
    return None


class _Server(Server[Any]):
    """The SDK's server, announcing ``tools.listChanged`` to sessions: a session whose context
    is renewed is told its tools may have changed."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


# ---------------------------------------------------------------------- the SDK's handlers


def _asked(ctx: ServerRequestContext[Any]) -> Asked:
    """The request as seif's boundary saw it (its scope keys), in the SDK's context."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, Mapping) or "seif.credential" not in scope:
        raise MCPError(INVALID_REQUEST, "the request did not come through seif's HTTP boundary")
    body = scope.get("seif.body")
    sent = body.get("params") if isinstance(body, dict) else None
    return Asked(
        credential=scope["seif.credential"],
        objective=scope["seif.objective"],
        coordinates=scope["seif.coordinates"],
        session=_session_id(ctx),
        request_id=ctx.request_id,
        sent=sent if isinstance(sent, dict) else {},
        alive=scope["seif.alive"],
    )


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The request's MCP session (a handshake revision's; the 2026-07-28 revision has none,
    whatever the headers say)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return value if isinstance(value, str) and value else None


async def _list_tools(app: web.Application, ctx: ServerRequestContext[Any]) -> mt.ListToolsResult:
    return await list_tools(app, _asked(ctx), ctx.session.send_tool_list_changed)


async def _call_tool(
    app: web.Application, ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
) -> mt.CallToolResult:
    asked = _asked(ctx)

    async def progress(done: float, total: float, message: str) -> None:
        await ctx.session.report_progress(done, total, message)

    renewed = ctx.session.send_tool_list_changed
    return await call_tool(app, asked, params.name, asked.call_id(), progress, renewed)

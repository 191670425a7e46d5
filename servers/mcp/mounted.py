"""What ``mount`` puts on the runtime's application: the options, the SDK's server and session
managers, and the contexts MCP clients use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from servers.mcp.contexts import Contexts
from servers.support.keyed import KeyedLocks

DEFAULT_APPROVAL_WAIT_S = 120.0


@dataclass(frozen=True, slots=True)
class McpOptions:
    approval_wait_s: float = DEFAULT_APPROVAL_WAIT_S
    """How long a ``tools/call`` that needs approval waits for the operator's decision."""


@dataclass(slots=True)
class Mounted:
    """The SDK's session managers per objective: ``managers`` answer with event streams (a
    session's every request, and a stateless one that asked for progress), ``plain`` with
    JSON (a stateless request that did not)."""

    managers: dict[str, StreamableHTTPSessionManager]
    plain: dict[str, StreamableHTTPSessionManager]
    contexts: Contexts
    options: McpOptions
    claims: KeyedLocks = field(default_factory=KeyedLocks)
    """The named call ids being served, by credential, objective and call id."""
    native: bool = True
    """Whether stateless requests that qualify take the native path (:mod:`servers.mcp.fast`);
    off, the SDK answers them all (the tests compare the two)."""
    native_answers: int = 0
    """Requests the native path answered."""
    server_info: dict[str, Any] = field(default_factory=dict)
    """The ``serverInfo`` stamp of a 2026-07-28 result (the SDK's, taken once)."""
    in_flight: dict[tuple[str, str, str, str], object] = field(default_factory=dict)
    """(credential, objective, session, JSON-RPC id) of the session requests being answered,
    each with the token of the request holding it."""


MOUNTED: web.AppKey[Mounted] = web.AppKey("mcp", Mounted)

"""What ``mount`` puts on the runtime's application: the options, the SDK's server and session
managers, and the contexts MCP clients use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from servers.http.serving import MAX_CONNECTIONS
from servers.mcp.contexts import Contexts
from servers.mcp.streams import Streams
from servers.support.keyed import KeyedLocks

DEFAULT_APPROVAL_WAIT_S = 120.0
SESSIONS_PER_CREDENTIAL = 1_000
"""Open sessions of one credential, across objectives, at most (by default)."""
STREAMS_PER_CREDENTIAL = 64
"""MCP requests of one credential being answered at once, across objectives, at most (by
default, and whatever the connection limit)."""


@dataclass(frozen=True, slots=True)
class McpOptions:
    approval_wait_s: float = DEFAULT_APPROVAL_WAIT_S
    """How long a ``tools/call`` that needs approval waits for the operator's decision."""
    sessions_per_credential: int = SESSIONS_PER_CREDENTIAL
    """Open sessions of one credential, across objectives (an idle session holds no
    connection: a bound on memory; its context is one of the credential's)."""
    streams_per_credential: int = STREAMS_PER_CREDENTIAL
    """MCP requests of one credential being answered at once (:mod:`servers.mcp.streams`)."""
    streams_in_all: int = MAX_CONNECTIONS // 2
    """MCP requests being answered at once, whoever sent them: half the connection limit."""
    allowed_origins: frozenset[str] = frozenset()
    """The ``Origin`` values allowed besides the loopback ones (``--mcp-allowed-origin``, each
    in :func:`servers.mcp.origins.origin`'s form)."""
    loopback: bool = True
    """Whether the runtime listens on a loopback address: loopback origins are allowed, and a
    ``Host`` other than a loopback name is refused (:mod:`servers.mcp.origins`)."""

    def __post_init__(self) -> None:
        if min(self.sessions_per_credential, self.streams_per_credential) < 1:
            raise ValueError("the MCP session and stream budgets must be at least 1")
        if not 1 <= self.streams_per_credential <= self.streams_in_all:
            raise ValueError("a credential's MCP stream budget must be within MCP's share")

    @classmethod
    def within(
        cls,
        max_connections: int,
        approval_wait_s: float = DEFAULT_APPROVAL_WAIT_S,
        *,
        allowed_origins: frozenset[str] = frozenset(),
        loopback: bool = True,
    ) -> McpOptions:
        """The options of a runtime holding ``max_connections`` connections: MCP may hold half
        of them (the other half always serves everything else: health, the HTTP API), one
        credential a quarter of MCP's half at most and never more than
        :data:`STREAMS_PER_CREDENTIAL`, so at least four credentials fill MCP's share and no
        number of them fills the runtime's. ``allowed_origins`` and ``loopback``: see the
        fields."""
        in_all = max(1, max_connections // 2)
        per_credential = max(1, min(STREAMS_PER_CREDENTIAL, in_all // 4))
        return cls(
            approval_wait_s,
            streams_per_credential=per_credential,
            streams_in_all=in_all,
            allowed_origins=allowed_origins,
            loopback=loopback,
        )


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
    streams: Streams = field(init=False)
    """The MCP requests being answered, by credential, within the options' budgets."""
    in_flight: dict[tuple[str, str, str, str], object] = field(default_factory=dict)
    """(credential, objective, session, JSON-RPC id) of the session requests being answered,
    each with the token of the request holding it."""

    def __post_init__(self) -> None:
        self.streams = Streams(self.options.streams_per_credential, self.options.streams_in_all)


MOUNTED: web.AppKey[Mounted] = web.AppKey("mcp", Mounted)

"""What the runtime needs of a tool's backend, whatever protocol it speaks.

An :class:`Executor` runs the calls of one bound tool: it says whether its backend describes the
tool's declared contract (:meth:`Executor.describe`) and runs one call, turning whatever
happens into an :class:`Outcome` (:meth:`Executor.dispatch`). The runtime knows nothing else
of a backend: which protocol it speaks is chosen per binding when the executors are opened
(:func:`servers.upstream.open_executors`). ``context-tool-executor.v1`` over HTTP
(:mod:`servers.executor.client`) is one implementation.

Every implementation keeps these promises (the runtime's once-only dispatch relies on them):

- ``dispatch`` sends the call at most once and never retries it; it never raises (but lets
  ``asyncio.CancelledError`` through, abandoning the request: the runtime awaits it in a task of
  its own, through a shield);
- ``FAILED`` only when the backend said no, the output broke the tool's result schema, or
  nothing was sent; anything after the call may have been sent is ``UNKNOWN``;
- ``describe`` never raises; no secret, argument, output or backend message reaches a log line,
  an exception or an :class:`Outcome`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from policy.ir import Tool

SUCCEEDED, FAILED, UNKNOWN = "SUCCEEDED", "FAILED", "UNKNOWN"
READY, UNAVAILABLE = "READY", "UNAVAILABLE"
COORDINATES = ("build", "consumer", "objective", "environment", "deployment", "trace", "context")
"""The coordinates every dispatch carries, in this order."""

Observation = dict[str, Any]
"""``{"state": "READY", "version", "contractDigest"}`` or ``{"state": "UNAVAILABLE",
"detail": code}``: a backend's availability, as the engine reads it."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one dispatch gave.

    ``output`` is set only for ``SUCCEEDED`` (validated against the tool's result schema when it
    has one). ``reason`` is a code such as ``RESULT_INVALID``, ``EXECUTOR_ERROR``, ``TIMEOUT``,
    ``INVALID_RESPONSE``, ``CREDENTIAL_REFLECTED``, ``TOO_LARGE``, ``REDIRECT``,
    ``CONNECTION_LOST``, ``CONNECTION_REFUSED``. ``error_code`` is the backend's own error code
    when it said no (its message is never kept). ``message`` is the one exception: an upstream
    MCP tool's own text of an ``UPSTREAM_TOOL_ERROR`` (at most 1,000 characters), for the
    caller's receipt only, never stored, logged or recorded.
    """

    status: str
    output: Any = field(default=None, repr=False)  # never in a log line by accident
    reason: str | None = None
    error_code: str | None = None
    message: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One call for an executor to run, as the runtime decided it."""

    tool: Tool
    arguments: Any
    call_id: str
    idempotency_key: str
    """:func:`idempotency_key`: derived by the runtime, never by the model."""
    coordinates: Mapping[str, Any]
    """Exactly the :data:`COORDINATES` (values may be None)."""


def idempotency_key(build_digest: str, context_ref: str, call_id: str) -> str:
    """``sha256(build digest | contextRef | callId)`` in lowercase hex, as the spec derives it."""
    material = f"{build_digest}|{context_ref}|{call_id}".encode()
    return hashlib.sha256(material).hexdigest()


def unavailable(detail: str) -> Observation:
    """An ``UNAVAILABLE`` observation with a short reason code."""
    return {"state": UNAVAILABLE, "detail": detail}


class Executor(Protocol):
    """The backend of one bound tool."""

    @property
    def tool(self) -> str:
        """The id of the tool it runs."""
        ...

    async def describe(self) -> Observation:
        """The backend's availability now. Never raises (but for cancellation)."""
        ...

    async def dispatch(self, call: Dispatch) -> Outcome:
        """Run ``call`` once. Never raises, but cancellation propagates (see the module)."""
        ...


@dataclass(frozen=True, slots=True)
class Executors:
    """The executors of one runtime, by tool id, opened once at start and closed at the end
    (whatever they share, such as one keep-alive transport, is closed with them)."""

    by_tool: Mapping[str, Executor]
    _close: Callable[[], Awaitable[None]]
    _watchers: list[Callable[[frozenset[str]], None]] = field(default_factory=list)

    def get(self, tool_id: str) -> Executor | None:
        return self.by_tool.get(tool_id)

    def watch(self, changed: Callable[[frozenset[str]], None]) -> None:
        """Call ``changed(tool ids)`` whenever a backend says what it offers changed (an
        upstream MCP server's listing); an endpoint is only ever asked, never tells."""
        self._watchers.append(changed)

    def changed(self, tool_ids: frozenset[str]) -> None:
        """Tell the watchers that the availability of ``tool_ids`` may have changed."""
        for changed in self._watchers:
            changed(tool_ids)

    async def aclose(self) -> None:
        await self._close()

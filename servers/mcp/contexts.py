"""Which seif context serves an MCP request.

- With sessions (``2025-11-25`` and the earlier handshake revisions): one context per MCP
  session, resolved at its first ``tools/list`` or ``tools/call``, re-resolved when its 15
  minutes end (the session is then told ``notifications/tools/list_changed``).
- Without (``2026-07-28``): one context per credential, objective and coordinates, shared by
  every request that names them, renewed when it expires.
- When a backend says the availability of some tools changed (an upstream MCP server's listing:
  :meth:`Contexts.tools_changed`), every live context that would now see otherwise (a tool it
  disclosed is no longer ready with its contract, or one it omitted as unavailable or
  incompatible is) is dropped, so its next request resolves it again, and its session, if it
  has one, is told ``notifications/tools/list_changed`` at once.

Call limits are per context, as everywhere (a call id the client names is one call of its
credential and objective across contexts: ``servers.mcp.handlers``). Two requests that need the same
missing context share one resolution, so concurrent retries of one call id meet in one context.
The table is bounded like the runtime's turns: per credential, then in all, expired contexts
dropped first (:mod:`servers.support.bounded`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import Literal

import mcp_types as mt

from policy.engine.disclosure import Disclosure, availability
from policy.reasons import TOOL_INCOMPATIBLE, TOOL_UNAVAILABLE, UPSTREAM_CHANGED
from servers.identity.principal import Authenticated
from servers.mcp.results import tools_result
from servers.runtime.service import Opened, Runtime
from servers.support import bounded, memo
from servers.wire.requests import ResolveRequest

MAX_CONTEXTS = 10_000
MAX_CONTEXTS_PER_CREDENTIAL = 1_000
SEEN = 20_000
Fresh = Literal["LIVE", "FIRST", "RENEWED"]
Renewed = Callable[[], Awaitable[None]]
"""Tell a session its tools may have changed."""
LOG = logging.getLogger(__name__)
UNREADY = (TOOL_UNAVAILABLE, TOOL_INCOMPATIBLE, UPSTREAM_CHANGED)


@dataclass(frozen=True, slots=True)
class Live:
    """A context an MCP client uses, and the ``tools/list`` result of its disclosure."""

    opened: Opened
    listed: mt.ListToolsResult

    @property
    def context_ref(self) -> str:
        return self.opened.context_ref


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a request asks a context for: its key in the table, the resolve request (the
    objective and the coordinates) and the credential that owns it."""

    key: Hashable
    request: ResolveRequest
    credential: Authenticated


class Contexts:
    """The contexts of MCP clients, by session or by credential, objective and coordinates."""

    def __init__(self, runtime: Callable[[], Runtime]) -> None:
        self._runtime = runtime
        self._live: bounded.Owned[Hashable, Live] = bounded.Owned()
        self._opening: dict[Hashable, asyncio.Task[Live]] = {}
        self._seen: dict[Hashable, bool] = {}
        self._sessions: dict[Hashable, Renewed] = {}
        """How to tell the session of a context key (at most :data:`SEEN`)."""
        self._rechecks: set[asyncio.Task[None]] = set()
        """Keys that had a context (at most :data:`SEEN`, least recently used forgotten
        first): the next resolution of one is a renewal, even once the table dropped it."""

    async def get(self, wanted: Wanted) -> tuple[Live, Fresh]:
        """The live context for ``wanted``, and how: ``LIVE`` (resolved before, or by another
        request it shared the resolution with), ``FIRST`` (resolved by this request) or
        ``RENEWED`` (resolved by this request, its key had a context before); an
        :class:`~servers.wire.errors.Refused` when the resolution is refused (logged).
        The resolution is a task of its own, which every request that needs it awaits: one
        that gives up (its client left) cancels nobody else's, nor the resolution."""
        runtime = self._runtime()
        found = self._live.get(wanted.key)
        if found is not None and runtime.clock() < found.opened.expires_at:
            return found, "LIVE"
        opening = self._opening.get(wanted.key)
        if opening is not None:  # another request is resolving it: share its context
            return await asyncio.shield(opening), "LIVE"  # (whose record is the other's)
        renewal = memo.cached(self._seen, wanted.key) is not None or found is not None
        task = asyncio.ensure_future(self._open(runtime, wanted))
        self._opening[wanted.key] = task
        task.add_done_callback(partial(self._opened, wanted.key))
        live = await asyncio.shield(task)
        return live, "RENEWED" if renewal else "FIRST"

    def _opened(self, key: Hashable, task: asyncio.Task[Live]) -> None:
        self._opening.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: the requests that awaited it raised it already

    async def _open(self, runtime: Runtime, wanted: Wanted) -> Live:
        opened = await runtime.contexts.open(wanted.request, None, wanted.credential)
        row = runtime.contexts.row(opened.context_ref)
        assert row is not None  # saved by open_context
        live = Live(opened, tools_result(runtime.contexts.disclosure_of(row), opened.context_ref))
        memo.keep(self._seen, wanted.key, True, SEEN)
        now = runtime.clock()
        self._live.admit(
            wanted.key,
            live,
            owner=wanted.credential.id,  # the credential's budget: all its users together
            limit=MAX_CONTEXTS,
            per_owner=MAX_CONTEXTS_PER_CREDENTIAL,
            finished=lambda entry: now >= entry.opened.expires_at,
        )
        return live

    # ------------------------------------------------------------------ a backend's change

    def remember(self, key: Hashable, tell: Renewed) -> None:
        """How to tell the session whose context is ``key`` that its tools changed."""
        memo.keep(self._sessions, key, tell, SEEN)

    def tools_changed(self, tool_ids: frozenset[str]) -> None:
        """The availability of ``tool_ids`` may have changed: check the live contexts."""
        task = asyncio.ensure_future(self._recheck(tool_ids))
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    async def _recheck(self, tool_ids: frozenset[str]) -> None:
        runtime = self._runtime()
        for key, live in list(self._live.items()):
            row = runtime.contexts.row(live.context_ref)
            if row is None:
                continue
            disclosure = runtime.contexts.disclosure_of(row)
            if not await _sees_otherwise(runtime, disclosure, tool_ids):
                continue
            self._live.drop(key)
            tell = memo.cached(self._sessions, key)
            if tell is not None:
                try:
                    await tell()
                except Exception as error:  # a session gone: it resolves again if it returns
                    LOG.info("MCP session not told of changed tools: %s", type(error).__name__)


async def _sees_otherwise(
    runtime: Runtime, disclosure: Disclosure, tool_ids: frozenset[str]
) -> bool:
    """Whether a context with ``disclosure`` would see otherwise now that ``tool_ids`` may
    have changed: one it disclosed is no longer ready with its contract, or one it omitted for
    its availability is."""
    visible = {tool.id for tool in disclosure.tools}
    unready = {o.id for o in disclosure.omitted if o.reason in UNREADY}
    for tool_id in sorted(tool_ids & (visible | unready)):
        tool = runtime.ir.tool_by_id[tool_id]
        ready = availability(tool, await runtime.contexts.observe(tool_id)) is None
        if ready != (tool_id in visible):
            return True
    return False

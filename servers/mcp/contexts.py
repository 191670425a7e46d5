"""Which seif context serves an MCP request.

- With sessions (``2025-11-25`` and the earlier handshake revisions): one context per MCP
  session, resolved at its first ``tools/list`` or ``tools/call``, re-resolved when its 15
  minutes end (the session is then told ``notifications/tools/list_changed``).
- Without (``2026-07-28``): one context per credential, objective and coordinates, shared by
  every request that names them, renewed when it expires.

Call limits and call ids are per context, as everywhere. Two requests that need the same
missing context share one resolution, so concurrent retries of one call id meet in one context.
The table is bounded like the runtime's turns: per credential, then in all, expired contexts
dropped first (:mod:`servers.support.bounded`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as mt

from servers.mcp.results import tools_result
from servers.runtime.service import Opened, Runtime
from servers.support import bounded, memo

MAX_CONTEXTS = 10_000
MAX_CONTEXTS_PER_CREDENTIAL = 1_000
PREVIOUS = 3
"""Contexts a key's new context remembers it replaced (45 minutes of renewals)."""
HISTORY = 20_000
"""Keys whose context refs are remembered (least recently used forgotten first), so that a
renewal is told as one, and a retry finds its call, even once the table dropped the entry."""
Fresh = Literal["LIVE", "FIRST", "RENEWED"]


@dataclass(frozen=True, slots=True)
class Live:
    """A context an MCP client uses, the ``tools/list`` result of its disclosure, and the
    contexts it replaced for the same session or coordinates (newest first): a call retried
    across a renewal is looked up there before it runs again."""

    opened: Opened
    listed: mt.ListToolsResult
    previous: tuple[str, ...] = ()

    @property
    def context_ref(self) -> str:
        return self.opened.context_ref


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a request asks a context for: its key in the table, the resolve request (the
    objective and the coordinates) and the credential that owns it."""

    key: Hashable
    request: Mapping[str, Any]
    credential: str


class Contexts:
    """The contexts of MCP clients, by session or by credential, objective and coordinates."""

    def __init__(self, runtime: Callable[[], Runtime]) -> None:
        self._runtime = runtime
        self._live: bounded.Owned[Hashable, Live] = bounded.Owned()
        self._opening: dict[Hashable, asyncio.Future[Live]] = {}
        self._history: dict[Hashable, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._live)

    async def get(self, wanted: Wanted) -> tuple[Live, Fresh]:
        """The live context for ``wanted``, and how: ``LIVE`` (resolved before), ``FIRST``
        (resolved now, or by a request it shared with) or ``RENEWED`` (resolved now, its
        predecessor expired); an ``HttpError`` when the resolution is refused (logged)."""
        runtime = self._runtime()
        found = self._live.get(wanted.key)
        if found is not None and runtime.clock() < found.opened.expires_at:
            return found, "LIVE"
        opening = self._opening.get(wanted.key)
        if opening is not None:  # another request is resolving it: share its context
            return await asyncio.shield(opening), "FIRST"
        future: asyncio.Future[Live] = asyncio.get_running_loop().create_future()
        self._opening[wanted.key] = future
        try:
            live = await self._open(runtime, wanted)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a request that shared it re-raises it
            raise
        finally:
            self._opening.pop(wanted.key, None)
        future.set_result(live)
        return live, "RENEWED" if live.previous else "FIRST"

    async def _open(self, runtime: Runtime, wanted: Wanted) -> Live:
        opened = await runtime.open_context(wanted.request, None, wanted.credential)
        row = runtime.context_row(opened.context_ref)
        assert row is not None  # saved by open_context
        previous = memo.cached(self._history, wanted.key) or ()
        listed = tools_result(runtime.disclosure_of(row), opened.context_ref)
        live = Live(opened, listed, previous)
        memo.keep(self._history, wanted.key, (opened.context_ref, *previous)[:PREVIOUS], HISTORY)
        now = runtime.clock()
        self._live.admit(
            wanted.key,
            live,
            owner=wanted.credential,
            limit=MAX_CONTEXTS,
            per_owner=MAX_CONTEXTS_PER_CREDENTIAL,
            finished=lambda entry: now >= entry.opened.expires_at,
        )
        return live

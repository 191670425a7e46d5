"""Calls waiting for a human approval, with their raw arguments, in memory only and bounded.

A call denied for approval (``APPROVAL_REQUIRED``, ``APPROVAL_INVALID``, ``APPROVAL_EXPIRED``)
is held so that ``GET /v1/context/tools/pending`` can show the approver its exact arguments.
It is held only while it is approvable, and never beyond these bounds:

- :data:`PER_CONTEXT` calls per context and :data:`IN_ALL` calls in all, the oldest request
  dropped first (a repeat of a call counts as a new request);
- :data:`MAX_BYTES` of arguments in all (their JSON length), the oldest dropped first; a call
  whose arguments alone exceed :data:`MAX_ONE_BYTES` is not held at all;
- until its :attr:`~servers.runtime.values.Pending.expires_at`: expired calls are dropped on
  every insertion, on every listing and by the runtime's periodic sweep, whichever comes first.

A call also leaves when it is approved with exactly its arguments, or dispatched, or when its
tool has used its ``maxCalls`` in the context (nothing more of it can run there). Dropping a
call forgets its arguments; it refuses nothing (an approval is by exact arguments, which the
runner holds): the call is simply no longer listed, and asking again lists it again.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from policy.decision import Decision
from policy.state import APPROVAL_TTL_MS, Call
from policy.strictjson import dump_bytes
from servers.runtime.values import Pending

PER_CONTEXT = 32
IN_ALL = 10_000
MAX_BYTES = 64 << 20
MAX_ONE_BYTES = 1 << 20
SWEEP_EVERY_S = 1.0
"""How often the runtime drops expired calls when nothing else does (wall time; the expiry
itself is judged by the runtime's injected clock)."""

Key = tuple[str, str]
_Due = tuple[int, int, Key]
"""An expiry, the serial of the hold it belongs to, and the call: never the arguments, so a
stale entry keeps nothing private alive."""


def waiting(
    context_ref: str, call: Call, decision: Decision, now: int, context_expires_at: int
) -> Pending | None:
    """The call to hold for ``decision`` (an approval denial): approvable for the approval
    window, or until its context expires if sooner; None for arguments that are not JSON."""
    try:
        size = len(dump_bytes(call.arguments))
    except ValueError:  # never approvable (it has no fingerprint), so never held
        return None
    return Pending(
        context_ref,
        call.tool,
        call.call_id,
        call.arguments,
        decision.reason or "",
        now,
        decision.fingerprint or "",
        min(now + APPROVAL_TTL_MS, context_expires_at),
        context_expires_at,
        size,
    )


class PendingCalls:
    """The held calls: oldest first in all and per context, and a heap of their expiries
    (entries of calls dropped otherwise are skipped when they come up, and the heap is rebuilt
    when such entries outnumber the live ones)."""

    def __init__(
        self,
        per_context: int = PER_CONTEXT,
        in_all: int = IN_ALL,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.per_context = per_context
        self.in_all = in_all
        self.max_bytes = max_bytes
        self._all: dict[Key, Pending] = {}
        self._serial_of: dict[Key, int] = {}
        self._by_context: dict[str, dict[str, None]] = {}
        self._due: list[_Due] = []
        self._serial = itertools.count()
        self._sweeper: asyncio.Task[None] | None = None
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._all)

    def holds(self, context_ref: str) -> bool:
        """Whether any call of the context is held."""
        return context_ref in self._by_context

    def get(self, context_ref: str, call_id: str) -> Pending | None:
        return self._all.get((context_ref, call_id))

    def add(self, item: Pending, now: int) -> None:
        """Hold ``item`` (replacing an earlier request of the same call), then enforce the
        bounds, dropping the oldest."""
        key = (item.context_ref, item.call_id)
        self.discard(key)
        self.sweep(now)
        if item.expires_at <= now or item.size > min(self.max_bytes, MAX_ONE_BYTES):
            return
        calls = self._by_context.get(item.context_ref, {})
        while calls and len(calls) >= self.per_context:
            self.discard((item.context_ref, next(iter(calls))))
        while self._all and (
            len(self._all) >= self.in_all or self.bytes + item.size > self.max_bytes
        ):
            self.discard(next(iter(self._all)))
        self._by_context.setdefault(item.context_ref, {})[item.call_id] = None
        serial = next(self._serial)
        self._all[key] = item
        self._serial_of[key] = serial
        self.bytes += item.size
        heapq.heappush(self._due, (item.expires_at, serial, key))

    def discard(self, key: Key) -> Pending | None:
        """Forget one call (and its arguments); the one forgotten, if any."""
        item = self._all.pop(key, None)
        if item is None:
            return None
        del self._serial_of[key]
        self.bytes -= item.size
        calls = self._by_context.get(key[0])
        if calls is not None:
            calls.pop(key[1], None)
            if not calls:
                del self._by_context[key[0]]
        if len(self._due) > 2 * len(self._all) + 64:
            self._rebuild()
        return item

    def approved(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        """An approval of exactly the held call ends its wait; one of other arguments does
        not (the held call stays approvable)."""
        item = self._all.get((context_ref, call_id))
        if item is not None and (item.tool, item.fingerprint) == (tool, fingerprint):
            self.discard((context_ref, call_id))

    def discard_tool(self, context_ref: str, tool: str) -> None:
        """Forget a context's calls of ``tool`` (it can run no more there)."""
        for call_id in list(self._by_context.get(context_ref, ())):
            item = self._all.get((context_ref, call_id))
            if item is not None and item.tool == tool:
                self.discard((context_ref, call_id))

    def sweep(self, now: int) -> int:
        """Drop every call expired at ``now``; how many were dropped."""
        dropped = 0
        while self._due and self._due[0][0] <= now:  # (a discard may rebuild the heap)
            _at, serial, key = heapq.heappop(self._due)
            if self._serial_of.get(key) == serial:
                self.discard(key)
                dropped += 1
        return dropped

    def listed(self, now: int) -> list[Pending]:
        """The calls still approvable at ``now``, oldest first."""
        self.sweep(now)
        return list(self._all.values())

    def keep_swept(self, clock: Callable[[], int]) -> None:
        """Sweep every :data:`SWEEP_EVERY_S` seconds while calls are held (a task of the
        running loop, started when needed), judging expiry by ``clock``."""
        if self._all and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = asyncio.ensure_future(self._sweeping(clock))

    def stop_sweeping(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweeping(self, clock: Callable[[], int]) -> None:
        while self._all:
            await asyncio.sleep(SWEEP_EVERY_S)
            self.sweep(clock())

    def _rebuild(self) -> None:
        self._due = [(self._all[k].expires_at, s, k) for k, s in self._serial_of.items()]
        heapq.heapify(self._due)

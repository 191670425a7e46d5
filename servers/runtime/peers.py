"""Waiting for a call another replica runs: its intent read from the shared store until final.

One runtime wakes a duplicate request from its own request in flight. Replicas cannot: a repeat
of a call that another replica is running reads the call's intent until it is final (made so
by the replica that runs it, or by the reaping of a lost one). One poller per call serves every
request waiting for it here, reading every :data:`FIRST_S` at first, then less often (up to
:data:`MOST_S`), so that many waiting requests cost few reads of the event loop.
"""

from __future__ import annotations

import asyncio

from servers.store.interface import DispatchStore

FIRST_S = 0.02
MOST_S = 0.25
POLLER_S = 30.0
"""How long one poller reads before it ends (a waiter still waiting starts another)."""

Key = tuple[str, str]


class PeerWaits:
    def __init__(self, store: DispatchStore) -> None:
        self._store = store
        self._polling: dict[Key, asyncio.Task[bool]] = {}

    async def final(self, context_ref: str, call_id: str) -> None:
        """Until the call's intent is final, or absent (bound the wait with a timeout)."""
        key = (context_ref, call_id)
        while True:
            poller = self._polling.get(key)
            if poller is None:
                poller = asyncio.ensure_future(self._poll(key))
                self._polling[key] = poller
                poller.add_done_callback(lambda _done: self._polling.pop(key, None))
            if await asyncio.shield(poller):
                return

    async def _poll(self, key: Key) -> bool:
        every, deadline = FIRST_S, asyncio.get_running_loop().time() + POLLER_S
        while asyncio.get_running_loop().time() < deadline:
            intent = self._store.intent(*key)
            if intent is None or intent.status != "PENDING":
                return True
            await asyncio.sleep(every)
            every = min(MOST_S, every * 1.5)
        return False

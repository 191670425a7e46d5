"""Availability observations of bound executors: ``describe``, shared between callers.

Concurrent refreshes of one tool share one request; every caller awaits it through a shield,
so a cancelled caller leaves the shared request be. A finished request is forgotten: the next
caller starts a fresh one (observations are refreshed on every resolve and before every
dispatch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Any

from servers.executor.interface import Executors, Observation, unavailable


class Observer:
    def __init__(self, executors: Executors) -> None:
        self._executors = executors
        self._running: dict[str, asyncio.Future[Observation]] = {}

    async def observe(self, tool_id: str) -> Observation:
        """The tool's availability now."""
        return await asyncio.shield(self._observing(tool_id))

    async def observe_all(self, tool_ids: Sequence[str]) -> dict[str, Observation]:
        """Each tool's availability now, all requests started (or joined) before any wait."""
        running = [(tool_id, self._observing(tool_id)) for tool_id in tool_ids]
        return {tool_id: await asyncio.shield(found) for tool_id, found in running}

    def _observing(self, tool_id: str) -> asyncio.Future[Observation]:
        executor = self._executors.get(tool_id)
        if executor is None:
            unbound: asyncio.Future[Observation] = asyncio.get_running_loop().create_future()
            unbound.set_result(unavailable("not bound"))
            return unbound
        running = self._running.get(tool_id)
        if running is None:
            running = asyncio.ensure_future(executor.describe())
            self._running[tool_id] = running
            running.add_done_callback(partial(_forget, self._running, tool_id))
        return running


def _forget(running: dict[str, Any], tool_id: str, _done: object) -> None:
    running.pop(tool_id, None)

"""Work a request starts that must outlive it: a dispatch whose caller went away, a record
logged from a sweep. The runtime waits for all of it at shutdown (:meth:`Background.drain`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Set
from typing import Any, TypeVar

T = TypeVar("T")


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def tasks(self) -> Set[asyncio.Task[Any]]:
        """The tasks still running."""
        return self._tasks

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` in a task of its own, kept until it is done."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self) -> None:
        """Wait for every task still running (their failures are theirs to report)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

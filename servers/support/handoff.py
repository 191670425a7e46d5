"""Results of a worker thread's batch, handed to whoever waits for them.

A waiter is a ``concurrent.futures.Future`` (a thread blocks on it) or an ``asyncio.Future``
created on an event loop. The worker settles a whole batch at once: concurrent futures
directly, asyncio futures with one ``call_soon_threadsafe`` per loop (one wake-up of the loop
for the batch, instead of one per future as ``asyncio.wrap_future`` costs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import Any

Waiter = concurrent.futures.Future[Any] | asyncio.Future[Any]
Outcome = tuple[Waiter, bool, Any]
"""``(waiter, True, result)`` or ``(waiter, False, exception)``."""


def claim(waiter: Waiter) -> bool:
    """In the worker, before it acts for ``waiter``: False if its waiter has gone (cancelled).
    A claimed concurrent future can no longer be cancelled; an asyncio one can, and then its
    result is dropped."""
    if isinstance(waiter, asyncio.Future):
        return not waiter.cancelled()  # read across threads: at worst one job runs for nobody
    return waiter.set_running_or_notify_cancel()


def settle(outcomes: list[Outcome]) -> None:
    """Settle claimed waiters, from the worker thread."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for outcome in outcomes:
        waiter, ok, value = outcome
        if isinstance(waiter, asyncio.Future):
            by_loop.setdefault(waiter.get_loop(), []).append(outcome)
        elif ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle_on_loop, items)


def fail_unsettled(waiters: list[Waiter], error: BaseException) -> None:
    """Fail every waiter not settled yet (claimed or not), from the worker thread: what a
    worker does when its own code failed midway, so that no waiter is left hanging."""
    outcomes: list[Outcome] = []
    for waiter in waiters:
        if isinstance(waiter, asyncio.Future):
            outcomes.append((waiter, False, error))  # a settled one is skipped on its loop
        elif not waiter.done() and (waiter.running() or waiter.set_running_or_notify_cancel()):
            outcomes.append((waiter, False, error))
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        settle(outcomes)


def _settle_on_loop(items: list[Outcome]) -> None:
    for waiter, ok, value in items:
        if waiter.done():
            continue  # cancelled meanwhile
        if ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)

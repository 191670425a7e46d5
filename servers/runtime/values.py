"""Plain records of the runtime's service layer (``servers.runtime.service``) and its view of
each context's intents (a bounded cache: :mod:`servers.support.memo`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace

from servers.store.interface import DispatchStore
from servers.store.rows import ApprovalRow, IntentRow
from servers.support import memo

Exclusive = Callable[..., AbstractAsyncContextManager[None]]
"""``exclusive(name[, wait_s])``: held by one holder of a name at a time across every process
sharing the store (replicas: an advisory lock of PostgreSQL, a ``StoreError`` when another
holds it past ``wait_s``); within one process its callers serialize first."""


def alone(_name: str, _wait_s: float = 0.0) -> AbstractAsyncContextManager[None]:
    """The :data:`Exclusive` of a store no other process writes: nothing to hold."""
    return contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class Seen:
    """What the engine decided a call on: the context's intents and approvals, and the time."""

    intents: list[IntentRow]
    approvals: list[ApprovalRow]
    now: int


class IntentsView:
    """Each context's intents for the engine's first look at a call, kept in memory: read
    from the store once, then kept up to date from this process's own commits (the data
    directory's owner is the store's only writer; replicas of a shared store also write it,
    and this view lags their intents). The store's transaction, not this view, arbitrates
    every dispatch: it decides again when the context's intents are not the ones seen here,
    so a view that lags only costs that transaction a decision; a call the view knows is
    answered from the store (its status as committed, by whichever process)."""

    def __init__(self) -> None:
        self._known: dict[str, list[IntentRow]] = {}

    def of(self, store: DispatchStore, context_ref: str) -> list[IntentRow]:
        found = memo.cached(self._known, context_ref)
        if found is None:
            found = store.intents(context_ref)
            memo.keep(self._known, context_ref, found)
        return list(found)

    def opened(self, context_ref: str) -> None:
        """A context just saved has no intents yet (none read from the store for it)."""
        memo.keep(self._known, context_ref, [])

    def begun(self, intent: IntentRow) -> None:
        known = self._known.get(intent.context_ref)
        if known is not None and all(i.call_id != intent.call_id for i in known):
            known.append(intent)

    def completed(
        self, context_ref: str, call_id: str, status: str, reason: str | None, now: int
    ) -> None:
        known = self._known.get(context_ref) or []
        for i, intent in enumerate(known):
            if intent.call_id == call_id:
                known[i] = replace(intent, status=status, reason=reason, completed_at=now)

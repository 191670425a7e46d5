"""Plain records of the runtime's service layer (``servers.runtime.service``) and its bounded
caches."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from servers.store.dispatch import ApprovalRow, IntentRow, Store


@dataclass(frozen=True, slots=True)
class Seen:
    """What the engine decided a call on: the context's intents and approvals, and the time."""

    intents: list[IntentRow]
    approvals: list[ApprovalRow]
    now: int


@dataclass(slots=True)
class Pending:
    """A call that asked for approval, held in memory only (arguments included)."""

    context_ref: str
    tool: str
    call_id: str
    arguments: Any
    reason: str
    requested_at: int


KEPT = 4096
"""Entries of the runtime's in-memory caches of immutable values (the rest is rebuilt from the
store)."""


def keep(cache: dict[str, Any], key: str, value: Any) -> None:
    """Insert, dropping the oldest entry when full (dicts keep insertion order)."""
    if len(cache) >= KEPT:
        del cache[next(iter(cache))]
    cache[key] = value


class IntentsView:
    """Each context's intents for the engine's first look at a call, kept in memory: read
    from the store once, then kept up to date from this process's own commits (the data
    directory's owner is the store's only writer). The store's transaction, not this view,
    arbitrates every dispatch; a view that lags only costs that transaction a decision."""

    def __init__(self) -> None:
        self._known: dict[str, list[IntentRow]] = {}

    def of(self, store: Store, context_ref: str) -> list[IntentRow]:
        found = self._known.get(context_ref)
        if found is None:
            found = store.intents(context_ref)
            keep(self._known, context_ref, found)
        return list(found)

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

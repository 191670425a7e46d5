"""Plain records of the runtime's service layer (``servers.runtime``) and its bounded caches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servers.store import ApprovalRow, IntentRow


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

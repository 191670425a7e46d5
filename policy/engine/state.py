"""The state of one resolved context, as an immutable value.

Recording a dispatch or an approval returns a new state; nothing is changed in place. Times are
integer milliseconds since the Unix epoch (:func:`millis` converts an aware ``datetime``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import blake3

from policy.engine.disclosure import Disclosure, disclosure_context
from policy.engine.identity import argument_identity
from policy.json.value import EMPTY_MAP, FrozenMap, JsonValue

CONTEXT_TTL_MS = 15 * 60 * 1000
APPROVAL_TTL_MS = 5 * 60 * 1000

Instant = int | _dt.datetime


def millis(t: Instant) -> int:
    """Integer milliseconds since the epoch of an int or a timezone-aware ``datetime``."""
    if type(t) is int:  # the common case, first
        return t
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            raise ValueError("naive datetime: pass a timezone-aware UTC datetime")
        delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError("time must be int milliseconds or an aware datetime")
    return t


def fingerprint(arguments: JsonValue, key: bytes | None = None) -> str:
    """A keyed BLAKE3 fingerprint of the argument identity (hex); unkeyed when ``key`` is None."""
    data = argument_identity(arguments)
    hasher = blake3.blake3(data, key=key) if key is not None else blake3.blake3(data)
    return hasher.hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One call the model asks for: ``{tool, callId, arguments, approvalId?}``. ``tool`` is a
    tool id or the function name the model saw; a decision names the tool by its id."""

    tool: str
    call_id: str
    arguments: JsonValue = field(default_factory=dict)
    approval_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    tool: str
    fingerprint: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """An approval of exactly one call: its tool, callId and argument fingerprint."""

    tool: str
    call_id: str
    fingerprint: str
    expires_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextState:
    """What is known of one resolved context."""

    context_ref: str
    disclosure: Disclosure
    expires_at: int
    coordinates: FrozenMap = EMPTY_MAP
    fingerprint_key: bytes | None = None
    dispatched: FrozenMap = EMPTY_MAP
    approvals: FrozenMap = EMPTY_MAP
    counts: FrozenMap = EMPTY_MAP

    @classmethod
    def open(
        cls,
        context_ref: str,
        disclosure: Disclosure,
        now: Instant,
        *,
        coordinates: dict[str, Any] | None = None,
        fingerprint_key: bytes | None = None,
    ) -> ContextState:
        """A new context resolved at ``now``; it lives 15 minutes."""
        return cls(
            context_ref=context_ref,
            disclosure=disclosure,
            expires_at=millis(now) + CONTEXT_TTL_MS,
            coordinates=disclosure_context(disclosure.objective, coordinates),
            fingerprint_key=fingerprint_key,
        )

    def fingerprint(self, arguments: JsonValue) -> str:
        return fingerprint(arguments, self.fingerprint_key)

    def record_dispatch(self, call_id: str, tool: str, fingerprint: str) -> ContextState:
        dispatched = FrozenMap(
            {**self.dispatched, call_id: Dispatch(tool=tool, fingerprint=fingerprint)}
        )
        counts = FrozenMap({**self.counts, tool: self.counts.get(tool, 0) + 1})
        return replace(self, dispatched=dispatched, counts=counts)

    def record_approval(
        self, approval_id: str, *, tool: str, call_id: str, fingerprint: str, now: Instant
    ) -> ContextState:
        approval = Approval(
            tool=tool,
            call_id=call_id,
            fingerprint=fingerprint,
            expires_at=millis(now) + APPROVAL_TTL_MS,
        )
        return replace(self, approvals=FrozenMap({**self.approvals, approval_id: approval}))


def with_history(
    state: ContextState, dispatched: Iterable[Any], approvals: Iterable[Any] = ()
) -> ContextState:
    """``state`` plus recorded history: each item of ``dispatched`` has ``call_id``, ``tool``
    and ``fingerprint`` (every recorded dispatch counts, whatever its outcome), each approval
    ``approval_id``, ``tool``, ``call_id``, ``fingerprint`` and ``expires_at``."""
    calls = dict(state.dispatched)
    counts = dict(state.counts)
    for d in dispatched:
        calls[d.call_id] = Dispatch(tool=d.tool, fingerprint=d.fingerprint)
        counts[d.tool] = counts.get(d.tool, 0) + 1
    granted = dict(state.approvals)
    for a in approvals:
        granted[a.approval_id] = Approval(
            tool=a.tool, call_id=a.call_id, fingerprint=a.fingerprint, expires_at=a.expires_at
        )
    return replace(
        state, dispatched=FrozenMap(calls), counts=FrozenMap(counts), approvals=FrozenMap(granted)
    )

"""A dispatch store and a decision log kept in memory (``seif serve --store memory:``): the
store interface's contract, for trying seif and for tests, with nothing kept across a restart.

Within one process it keeps every promise of the others: a call id of a context is claimed once
(the claim decides and inserts without yielding to the event loop, so no other coroutine runs
between the engine's decision on the intents and the insert), a completion is final once, a
record given with a write is logged if and only if the write took effect, and the log's records
are the file log's bytes, chained by the same digests. What it cannot keep is anything past the
process: a restart forgets every context, every intent and the log, so a call id may run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import cbor2

from servers.log.chain import LogHead, record_digest
from servers.log.encoding import Admitted, DecisionLogError, admit, encoded
from servers.store.rows import (
    FINAL_STATUSES,
    PENDING,
    ApprovalRow,
    Claim,
    ContextRow,
    IntentRow,
    IntentUnknown,
    StoreError,
    check_fingerprint,
    check_id,
    check_ms,
    check_reason,
    pending_intent,
)

T = TypeVar("T")


class MemoryLog:
    """The decision log in memory (a :class:`~servers.store.interface.RecordLog`)."""

    def __init__(self) -> None:
        self._records: list[bytes] = []
        self._by_context: dict[str, list[int]] = {}
        self._head: str | None = None
        self._closed = False

    async def append_async(self, record: Mapping[str, Any]) -> int:
        return await self.append_admitted(admit(record))

    async def append_admitted(self, prepared: Admitted) -> int:
        """Append a checked record: its ``seq`` and ``prev`` set, encoded as the file log
        encodes it, chained to the record before it."""
        if self._closed:
            raise DecisionLogError("the decision log is closed")
        seq = len(self._records) + 1
        prepared["prev"] = self._head
        data = encoded(prepared, seq)
        self._records.append(data)
        self._head = record_digest(data)
        context_ref = prepared.get("contextRef")
        if isinstance(context_ref, str):
            self._by_context.setdefault(context_ref, []).append(seq - 1)
        return seq

    async def trace_async(self, context_ref: str, render: Callable[[list[dict[str, Any]]], T]) -> T:
        positions = self._by_context.get(context_ref, [])
        return render([cbor2.loads(self._records[i]) for i in positions])

    async def head_async(self) -> LogHead:
        return LogHead(len(self._records) or None, self._head)

    def observe_fsyncs(self, observe: Callable[[float], None]) -> None:
        del observe  # nothing is written to a disk

    def close(self) -> None:
        self._closed = True


class MemoryStore:
    """Contexts, intents and approvals in memory (a
    :class:`~servers.store.interface.DispatchStore`)."""

    def __init__(self, log: MemoryLog) -> None:
        self._log = log
        self._contexts: dict[str, ContextRow] = {}
        self._intents: dict[str, list[IntentRow]] = {}
        self._by_call: dict[str, list[tuple[str, str]]] = {}
        self._approvals: dict[str, list[ApprovalRow]] = {}
        self.interrupted: tuple[IntentRow, ...] = ()
        """Nothing was left by an earlier run: a memory store starts empty."""

    def context(self, context_ref: str) -> ContextRow | None:
        return self._contexts.get(context_ref)

    def intents(self, context_ref: str) -> list[IntentRow]:
        return list(self._intents.get(context_ref, ()))

    def intent(self, context_ref: str, call_id: str) -> IntentRow | None:
        return next((i for i in self._intents.get(context_ref, ()) if i.call_id == call_id), None)

    def intents_with_call(self, call_id: str) -> list[IntentRow]:
        found = (self.intent(ref, call) for ref, call in self._by_call.get(call_id, ()))
        return [intent for intent in found if intent is not None]

    def approvals(self, context_ref: str) -> list[ApprovalRow]:
        return list(self._approvals.get(context_ref, ()))

    async def save_context_async(self, row: ContextRow, *, record: Admitted | None = None) -> None:
        check_id("context_ref", row.context_ref)
        check_ms("resolved_at", row.resolved_at)
        check_ms("expires_at", row.expires_at)
        if row.context_ref in self._contexts:
            raise StoreError(f"context `{row.context_ref}` exists")
        self._contexts[row.context_ref] = row
        await self._logged(record)

    async def begin_intent_async(
        self,
        context_ref: str,
        call_id: str,
        tool: str,
        fingerprint: str,
        now_ms: int,
        *,
        decide: Callable[[list[IntentRow]], bool],
        seen: list[IntentRow] | None = None,
        record: Admitted | None = None,
    ) -> Claim:
        """Decide on the context's intents and insert, with no await between the two: no
        other claim runs in between (the event loop is this store's transaction)."""
        row = pending_intent(context_ref, call_id, tool, fingerprint, now_ms)
        intents = self._intents.setdefault(context_ref, [])
        allowed = (seen is not None and intents == seen) or decide(list(intents))
        existing = next((i for i in intents if i.call_id == call_id), None)
        if existing is not None:
            return Claim(False, existing)
        if not allowed:
            return Claim(False, None)
        intents.append(row)
        self._by_call.setdefault(call_id, []).append((context_ref, call_id))
        await self._logged(record)
        return Claim(True, row)

    async def complete_intent_async(
        self,
        context_ref: str,
        call_id: str,
        status: str,
        reason: str | None,
        now_ms: int,
        *,
        record: Admitted | None = None,
    ) -> bool:
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {sorted(FINAL_STATUSES)}, not `{status}`")
        check_reason(reason)
        check_ms("now_ms", now_ms)
        intents = self._intents.get(context_ref, [])
        at = next((n for n, i in enumerate(intents) if i.call_id == call_id), None)
        if at is None:
            raise IntentUnknown(f"no intent `{call_id}` in context `{context_ref}`")
        done = intents[at].status == PENDING
        if done:
            found = intents[at]
            intents[at] = IntentRow(
                context_ref=found.context_ref,
                call_id=found.call_id,
                tool=found.tool,
                fingerprint=found.fingerprint,
                status=status,
                reason=reason,
                created_at=found.created_at,
                completed_at=now_ms,
            )
        await self._logged(record)
        return done

    async def save_approval_async(
        self, row: ApprovalRow, *, record: Admitted | None = None
    ) -> None:
        check_id("approval_id", row.approval_id)
        check_fingerprint(row.fingerprint)
        check_ms("expires_at", row.expires_at)
        held = self._approvals.setdefault(row.context_ref, [])
        if any(a.approval_id == row.approval_id for a in held):
            raise StoreError(f"approval `{row.approval_id}` exists")
        held.append(row)
        await self._logged(record)

    async def _logged(self, record: Admitted | None) -> None:
        if record is not None:
            await self._log.append_admitted(record)

    def observe_commits(self, observe: Callable[[float], None]) -> None:
        del observe  # nothing to commit

    def close(self) -> None:
        pass

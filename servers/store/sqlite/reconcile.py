"""Start-up reconciliation of the dispatch store with the decision log.

The store is written first and the log right after each commit, so the log never holds a
dispatch the store did not commit. A store that lacks what the log holds has lost commits: a
lost WAL tail, or a ``dispatch.sqlite`` restored from an older backup. Such a call may have
been dispatched already; it must never be dispatched again. So, at start:

- every call the log records (``INTENT``, ``RESULT`` or ``UNKNOWN``) that the store does not
  know is put into the store as ``UNKNOWN`` with reason ``RECONCILED`` (a retry of that callId
  is a duplicate, never a dispatch), and logged as ``UNKNOWN``, once;
- every context the log disclosed (``DISCLOSED``) that the store does not know is put back
  as it was resolved (its expiry as before), so that such a retry finds its context;
- approvals are not put back: a lost approval must be given again (fail closed).

Only the records after the store's mark (``Store.log_mark``, the log's seq the store had seen
durable) are considered: the store holds everything before it. The records are looked at during
the one pass the log makes when it opens (:class:`LogFacts` is its visitor); candidates are
checked against the store :data:`CHUNK` at a time, and only the positions of what the store
lacks are kept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any, TypeGuard

from policy.engine.state import CONTEXT_TTL_MS
from policy.json.canonical import EncodingError, canonical_cbor, canonical_json
from servers.log.decision_log import DecisionLog, DecisionLogError, admit
from servers.log.reading import read_at
from servers.store.rows import (
    MAX_ID_CHARS,
    Reconciled,
    check_fingerprint,
)
from servers.store.sqlite.schema import (
    insert_row,
)
from servers.store.sqlite.store import RECONCILED, UNKNOWN, ContextRow, IntentRow, Store

CHUNK = 2048
"""Candidates checked against the store in one query; records restored in one transaction."""
DISPATCH_EVENTS = frozenset({"INTENT", "RESULT", "UNKNOWN"})
_CARRIED = ("build", "environment", "bindingRevision", "coordinates", "contextRef")
"""Fields of the log's own record of a call that its ``UNKNOWN`` (``RECONCILED``) repeats."""
_NO_FINGERPRINT = "0" * 64

Position = tuple[int, int]


class LogFacts:
    """The visitor of the log's pass at open: whether any record carries a fingerprint, and
    the positions of the calls and contexts after ``mark`` that ``store`` lacks (with no store,
    only the former)."""

    def __init__(self, store: Store | None, mark: int) -> None:
        self._store = store
        self._mark = mark
        self.fingerprints = False
        self._calls: dict[tuple[str, str], Position] = {}
        self._contexts: dict[str, Position] = {}
        self.missing_calls: dict[tuple[str, str], Position] = {}
        """(contextRef, callId) -> the position of the log's last record of that call."""
        self.missing_contexts: dict[str, Position] = {}
        """contextRef -> the position of its ``DISCLOSED`` record."""

    def __call__(self, offset: int, length: int, record: dict[str, Any]) -> None:
        if not self.fingerprints and "fingerprint" in record:
            self.fingerprints = True
        if self._store is None or record["seq"] <= self._mark:
            return
        ref, event = record.get("contextRef"), record.get("event")
        if type(ref) is not str:
            return
        if event == "DISCLOSED":
            self._contexts[ref] = (offset, length)
        elif event in DISPATCH_EVENTS and type(record.get("callId")) is str:
            self._calls[(ref, record["callId"])] = (offset, length)
        if len(self._calls) + len(self._contexts) >= CHUNK:
            self._sift()

    def finish(self) -> None:
        """Check the last candidates (after the pass)."""
        self._sift()

    def _sift(self) -> None:
        store, calls, contexts = self._store, self._calls, self._contexts
        self._calls, self._contexts = {}, {}
        if store is None:
            return
        for key in _unknown_calls(store, list(calls)):
            self.missing_calls[key] = calls[key]
        for ref in _unknown_contexts(store, list(contexts)):
            self.missing_contexts[ref] = contexts[ref]


def _unknown_calls(store: Store, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if not keys:
        return []
    values = ", ".join("(?, ?)" for _ in keys)
    sql = (
        f"WITH k(c, i) AS (VALUES {values}) SELECT c, i FROM k WHERE NOT EXISTS"
        " (SELECT 1 FROM intents WHERE context_ref = k.c AND call_id = k.i)"
    )
    params = tuple(part for key in keys for part in key)
    return [(str(r[0]), str(r[1])) for r in store.select(sql, params)]


def _unknown_contexts(store: Store, refs: list[str]) -> list[str]:
    if not refs:
        return []
    values = ", ".join("(?)" for _ in refs)
    sql = (
        f"WITH k(c) AS (VALUES {values}) SELECT c FROM k WHERE NOT EXISTS"
        " (SELECT 1 FROM contexts WHERE context_ref = k.c)"
    )
    return [str(r[0]) for r in store.select(sql, tuple(refs))]


def reconcile(store: Store, log: DecisionLog, facts: LogFacts, now_ms: int) -> Reconciled:
    """Put back what ``facts`` found missing: contexts first, then calls (each chunk
    committed, then its ``UNKNOWN`` records logged with one fsync)."""
    contexts = 0
    for chunk in _chunks(list(facts.missing_contexts.values())):
        rows = [r for r in map(_context_row, read_at(log.path, chunk)) if r is not None]
        contexts += _insert_inline(store, "contexts", rows)
    calls = 0
    for chunk in _chunks(list(facts.missing_calls.values())):
        found = [(record, _intent_row(record, now_ms)) for record in read_at(log.path, chunk)]
        kept = [(record, row) for record, row in found if row is not None]
        calls += _insert_inline(store, "intents", [row for _, row in kept])
        _log_unknown(log, kept, now_ms)
    return Reconciled(calls=calls, contexts=contexts)


def _insert_inline(store: Store, table: str, rows: list[Any]) -> int:
    return store.run_inline(lambda db: _insert(db, table, rows))


def _chunks(positions: list[Position]) -> Iterator[list[int]]:
    for start in range(0, len(positions), CHUNK):
        yield [n for position in positions[start : start + CHUNK] for n in position]


def _insert(db: sqlite3.Connection, table: str, rows: list[Any]) -> int:
    inserted = 0
    for row in rows:
        try:
            insert_row(db, table, row, **_encoded(row))
        except sqlite3.IntegrityError:
            continue  # there already (the store is never overwritten)
        inserted += 1
    return inserted


def _encoded(row: Any) -> dict[str, object]:
    """The columns stored encoded (as ``servers.store.sqlite.jobs`` writes them)."""
    if isinstance(row, ContextRow):
        principal = None if row.principal is None else canonical_json(row.principal)
        return {"coordinates": canonical_json(row.coordinates), "principal": principal}
    return {}


def _valid_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS


def _context_row(record: dict[str, Any]) -> ContextRow | None:
    """The store's row of a context, from its ``DISCLOSED`` record; None if the record lacks
    what the row needs (the context then stays unknown: fail closed)."""
    ref, build, objective = record.get("contextRef"), record.get("build"), record.get("objective")
    resolved, coordinates = record.get("resolvedAt"), record.get("coordinates")
    revision, owner = record.get("bindingRevision"), record.get("credential")
    principal = record.get("principal")
    if not (_valid_id(ref) and _valid_id(build) and _valid_id(objective)):
        return None
    if type(resolved) is not int or not isinstance(coordinates, dict):
        return None
    if revision is not None and type(revision) is not int:
        return None
    if principal is not None and not isinstance(principal, dict):
        return None
    try:
        observations = canonical_cbor(record.get("observations", {}))
    except EncodingError:
        return None
    return ContextRow(
        context_ref=ref,
        build=build,
        objective=objective,
        coordinates=coordinates,
        observations=observations,
        resolved_at=resolved,
        expires_at=resolved + CONTEXT_TTL_MS,
        binding_revision=revision,
        credential_id=owner if _valid_id(owner) else None,  # none: it belongs to no one
        principal=principal,  # with the subject's fingerprint: it belongs to that subject
    )


def _intent_row(record: dict[str, Any], now_ms: int) -> IntentRow | None:
    ref, call, tool = record.get("contextRef"), record.get("callId"), record.get("tool")
    if not (_valid_id(ref) and _valid_id(call)):
        return None
    fingerprint = _fingerprint(record.get("fingerprint"))
    at = record.get("at")
    return IntentRow(
        context_ref=ref,
        call_id=call,
        tool=tool if _valid_id(tool) else "unknown",
        fingerprint=fingerprint,
        status=UNKNOWN,
        reason=RECONCILED,
        created_at=at if type(at) is int else now_ms,
        completed_at=now_ms,
    )


def _fingerprint(value: object) -> str:
    try:
        check_fingerprint(value)
    except ValueError:
        return _NO_FINGERPRINT  # a retry is then a conflict: still never a dispatch
    return str(value)


def _log_unknown(log: DecisionLog, kept: list[tuple[dict[str, Any], IntentRow]], now: int) -> None:
    records = []
    for source, row in kept:
        fields = {
            "event": UNKNOWN,
            "at": now,
            "tool": row.tool,
            "callId": row.call_id,
            "fingerprint": row.fingerprint,
            "status": UNKNOWN,
            "reason": RECONCILED,
        }
        carried = {k: source[k] for k in _CARRIED if k in source}
        try:
            records.append(admit({**carried, **fields}))
        except DecisionLogError:  # a field the log holds but no longer admits: leave it out
            records.append(admit({**fields, "contextRef": row.context_ref}))
    for result in log.write_now(records):
        if isinstance(result, Exception):
            raise result

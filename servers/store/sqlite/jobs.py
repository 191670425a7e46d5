"""The writes of the dispatch store, as jobs for its writer thread
(``servers.store.sqlite.writer``).

Each builder checks its input in the caller's thread and returns a job that writes with one
statement, after every check that may raise, so that a job that raises has written nothing.
A selector says what the decision log records once a job has committed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from policy.json.canonical import canonical_json, decode_canonical_cbor
from servers.log.decision_log import Admitted
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
)
from servers.store.sqlite.schema import (
    INTENTS_OF_CONTEXT,
    insert_row,
    intent_row,
)
from servers.support.memo import remembered

Selector = Callable[[Any], Admitted | None]


def always(record: Admitted | None) -> Selector | None:
    """Log ``record`` (if any) once the job has committed."""
    return None if record is None else (lambda _result: record)


def if_inserted(record: Admitted | None) -> Selector | None:
    """Log ``record`` (if any) once the claim has committed, if it inserted the intent."""
    return None if record is None else (lambda claim: record if claim[0] else None)


_CANONICAL_OBSERVATIONS: dict[bytes, bool] = {}
"""Observations already found canonical (a pure check; resolves repeat the same few)."""
_STRING = json.JSONEncoder(ensure_ascii=False).encode  # what ``canonical_json`` writes a str as


def _coordinates_json(coordinates: Mapping[str, Any]) -> str:
    """``canonical_json`` of the coordinates; directly for a map of strings with ASCII keys
    (whose UTF-16 order, which JCS sorts by, is their plain order). Not cached: the trace and
    the context make nearly every map distinct."""
    if all(type(k) is str and k.isascii() and type(v) is str for k, v in coordinates.items()):
        return _json_of_strings(tuple(sorted(coordinates.items())))
    return canonical_json(coordinates)


def _canonical(observations: bytes) -> bool:
    decode_canonical_cbor(observations)  # EncodingError unless canonical CBOR
    return True


def _json_of_strings(items: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f"{_STRING(k)}:{_STRING(v)}" for k, v in items) + "}"


def context_job(row: ContextRow) -> Callable[[sqlite3.Connection], None]:
    check_id("context_ref", row.context_ref)
    check_ms("resolved_at", row.resolved_at)
    check_ms("expires_at", row.expires_at)
    if row.credential_id is not None:
        check_id("credential_id", row.credential_id)
    remembered(_CANONICAL_OBSERVATIONS, row.observations, _canonical, 256)
    coordinates = _coordinates_json(row.coordinates)
    principal = None if row.principal is None else canonical_json(row.principal)
    exists = f"context `{row.context_ref}` exists"
    return lambda db: insert_once(
        db, "contexts", row, exists, coordinates=coordinates, principal=principal
    )


def complete_job(
    context_ref: str, call_id: str, status: str, reason: str | None, now_ms: int
) -> Callable[[sqlite3.Connection], bool]:
    if status not in FINAL_STATUSES:
        raise ValueError(f"status must be one of {sorted(FINAL_STATUSES)}, not `{status}`")
    check_reason(reason)
    check_ms("now_ms", now_ms)
    return lambda db: _complete(db, context_ref, call_id, status, reason, now_ms)


def approval_job(row: ApprovalRow) -> Callable[[sqlite3.Connection], None]:
    check_id("approval_id", row.approval_id)
    check_id("context_ref", row.context_ref)
    check_id("tool", row.tool)
    check_id("call_id", row.call_id)
    check_fingerprint(row.fingerprint)
    check_ms("expires_at", row.expires_at)
    exists = f"approval `{row.approval_id}` exists"
    return lambda db: insert_once(db, "approvals", row, exists)


def begin(
    db: sqlite3.Connection,
    row: IntentRow,
    decide: Callable[[list[IntentRow]], bool],
    seen: list[IntentRow] | None,
) -> Claim:
    intents = [intent_row(r) for r in db.execute(INTENTS_OF_CONTEXT, (row.context_ref,))]
    allowed = (seen is not None and intents == seen) or decide(list(intents))
    existing = next((i for i in intents if i.call_id == row.call_id), None)
    if existing is not None:
        return Claim(False, existing)
    if not allowed:
        return Claim(False, None)
    insert_row(db, "intents", row)
    return Claim(True, row)


def _complete(
    db: sqlite3.Connection,
    context_ref: str,
    call_id: str,
    status: str,
    reason: str | None,
    now_ms: int,
) -> bool:
    changed = db.execute(
        "UPDATE intents SET status = ?, reason = ?, completed_at = ?"
        " WHERE context_ref = ? AND call_id = ? AND status = ?",
        (status, reason, now_ms, context_ref, call_id, PENDING),
    ).rowcount
    if changed:
        return True
    found = db.execute(
        "SELECT 1 FROM intents WHERE context_ref = ? AND call_id = ?", (context_ref, call_id)
    ).fetchone()
    if found is None:
        raise IntentUnknown(f"no intent `{call_id}` in context `{context_ref}`")
    return False


def insert_once(
    db: sqlite3.Connection, table: str, row: Any, exists: str, **encoded: object
) -> None:
    try:
        insert_row(db, table, row, **encoded)
    except sqlite3.IntegrityError:
        raise StoreError(exists) from None

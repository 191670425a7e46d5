"""The dispatch store's schema, its rows and the checks on what goes into them.

Nothing here holds raw arguments, outputs, approval reasons or secrets: an intent or an approval
carries the keyed argument fingerprint, and the columns that take text from outside are checked
(fingerprints are 64 lowercase hex digits, reasons are reason codes) by Python and by SQL
``CHECK`` constraints alike.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from policy.json.strict import loads
from policy.json.value import EMPTY_MAP, freeze
from servers.wire import reasons

PENDING, SUCCEEDED, FAILED, UNKNOWN = "PENDING", "SUCCEEDED", "FAILED", "UNKNOWN"
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, UNKNOWN})
TURN_OUTCOMES = frozenset({"COMPLETED", "FAILED"})
INTERRUPTED = reasons.INTERRUPTED
"""The reason of an intent that was still ``PENDING`` when the store was opened."""
RECONCILED = reasons.RECONCILED
"""The reason of an intent the decision log recorded and the store had lost (a lost WAL tail,
a store restored from an older backup), put back as ``UNKNOWN`` at start."""

SCHEMA_VERSION = 4
MAX_ID_CHARS = 1024
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")

SCHEMA = """
CREATE TABLE contexts (
    context_ref TEXT PRIMARY KEY,
    build TEXT NOT NULL,
    objective TEXT NOT NULL,
    coordinates TEXT NOT NULL,
    observations BLOB NOT NULL,
    resolved_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    binding_revision INTEGER,
    turn_id TEXT,
    credential_id TEXT
) STRICT;
CREATE TABLE intents (
    context_ref TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL
        CHECK (length(fingerprint) = 64 AND fingerprint NOT GLOB '*[^0-9a-f]*'),
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    reason TEXT CHECK (reason IS NULL
        OR (length(reason) BETWEEN 1 AND 64 AND reason NOT GLOB '*[^A-Z0-9_]*')),
    created_at INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (context_ref, call_id)
) STRICT;
CREATE TABLE approvals (
    approval_id TEXT PRIMARY KEY,
    context_ref TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL
        CHECK (length(fingerprint) = 64 AND fingerprint NOT GLOB '*[^0-9a-f]*'),
    expires_at INTEGER NOT NULL,
    approver_id TEXT
) STRICT;
CREATE INDEX approvals_by_context ON approvals (context_ref);
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY,
    credential_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    outcome TEXT CHECK (outcome IS NULL OR outcome IN ('COMPLETED', 'FAILED'))
) STRICT;
"""
LOG_MARK_SCHEMA = """
CREATE TABLE log_mark (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL CHECK (seq >= 0)
) STRICT;
INSERT INTO log_mark (id, seq) VALUES (1, 0);
"""
"""Version 2: the decision log's seq the store has seen durable (see ``Store.log_mark``)."""
OWNER_SCHEMA = "ALTER TABLE contexts ADD COLUMN credential_id TEXT;"
"""Version 3: the id of the credential that resolved each context (its owner; NULL for a
context of an older runtime, which then belongs to no credential: fail closed)."""
CALL_INDEX_SCHEMA = "CREATE INDEX IF NOT EXISTS intents_by_call ON intents (call_id);"
"""Version 4: intents by call id, whatever their context (an MCP client's call id names one
call of its credential and objective across its sessions: ``Store.intents_with_call``)."""


class StoreError(Exception):
    """A store that cannot be used, or a request that names something the store lacks."""


class StoreUnanswered(StoreError):
    """A write sent to a shared store whose answer never came (a connection lost mid-way):
    it may or may not have taken effect. Every other ``StoreError`` of a write means it did
    not."""


class IntentUnknown(StoreError):
    """A completion of a call id the context has no intent of."""


class StoreDamaged(StoreError):
    """A store file that is not a SQLite database, or one that fails ``PRAGMA quick_check``."""


def check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} chars")


def check_fingerprint(value: object) -> None:
    if not isinstance(value, str) or _FINGERPRINT.fullmatch(value) is None:
        raise ValueError("fingerprint must be 64 lowercase hex digits (a keyed BLAKE3 digest)")


def check_reason(value: object) -> None:
    if value is not None and (not isinstance(value, str) or _REASON.fullmatch(value) is None):
        raise ValueError("reason must be a reason code such as `RESULT_INVALID`, or None")


def check_ms(name: str, value: object) -> None:
    if type(value) is not int:
        raise TypeError(f"{name} must be integer milliseconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One resolved context: its coordinates (a JSON map, frozen) and the availability
    observations it used, as canonical CBOR bytes (``policy.json.canonical.canonical_cbor``)."""

    context_ref: str
    build: str
    objective: str
    coordinates: Mapping[str, Any] = EMPTY_MAP
    observations: bytes = b"\xa0"  # the empty map
    resolved_at: int
    expires_at: int
    binding_revision: int | None = None
    turn_id: str | None = None
    credential_id: str | None = None
    """The credential that resolved the context: to any other it does not exist."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "coordinates", freeze(self.coordinates))

    def owned_by(self, credential: str) -> bool:
        """Whether ``credential`` resolved this context (one that names no owner has none)."""
        return self.credential_id is not None and self.credential_id == credential


@dataclass(frozen=True, slots=True, kw_only=True)
class IntentRow:
    """A dispatch intent: committed ``PENDING`` before any I/O, then made final once."""

    context_ref: str
    call_id: str
    tool: str
    fingerprint: str
    status: str
    reason: str | None = None
    created_at: int
    completed_at: int | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRow:
    """An approval of exactly one call (the approval's reason is never stored)."""

    approval_id: str
    context_ref: str
    tool: str
    call_id: str
    fingerprint: str
    expires_at: int
    approver_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    turn_id: str
    credential_id: str
    expires_at: int
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What the start-up reconciliation of a data directory put back into its store from its
    decision log (nothing for a shared store, which keeps both in one database)."""

    calls: int = 0
    contexts: int = 0


class Claim(NamedTuple):
    """What :meth:`Store.begin_intent` decided; unpacks as ``(dispatch, intent)``.

    - ``(True, row)``: the ``PENDING`` intent ``row`` is committed; the caller dispatches.
    - ``(False, row)``: an intent with this callId already exists (``row``, any status);
      nothing was inserted, whatever ``decide`` said. The caller must not dispatch.
    - ``(False, None)``: ``decide`` refused; nothing was inserted.
    """

    dispatch: bool
    intent: IntentRow | None

    @property
    def existing(self) -> bool:
        return not self.dispatch and self.intent is not None

    @property
    def refused(self) -> bool:
        return not self.dispatch and self.intent is None


def row_fields(r: sqlite3.Row) -> dict[str, Any]:
    return dict(zip(r.keys(), r, strict=True))


def intent_row(r: sqlite3.Row) -> IntentRow:
    return IntentRow(**row_fields(r))


def approval_row(r: sqlite3.Row) -> ApprovalRow:
    return ApprovalRow(**row_fields(r))


def context_row(r: sqlite3.Row) -> ContextRow:
    decoded = {"coordinates": loads(r["coordinates"]), "observations": r["observations"]}
    return ContextRow(**{**row_fields(r), **decoded})


_INSERTS: dict[tuple[str, type], tuple[tuple[str, ...], str]] = {}


def insert_row(db: sqlite3.Connection, table: str, row: Any, **encoded: object) -> None:
    """INSERT one row dataclass, its field names being the table's column names (the
    statement is built once per table and row type)."""
    found = _INSERTS.get((table, type(row)))
    if found is None:
        names = tuple(f.name for f in fields(row))
        columns, marks = ", ".join(names), ", ".join(f":{name}" for name in names)
        found = names, f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        _INSERTS[(table, type(row))] = found
    names, sql = found
    values = {name: getattr(row, name) for name in names}
    values.update(encoded)
    db.execute(sql, values)


INTENT_COLUMNS = "context_ref, call_id, tool, fingerprint, status, reason, created_at, completed_at"
APPROVAL_COLUMNS = "approval_id, context_ref, tool, call_id, fingerprint, expires_at, approver_id"
INTENTS_OF_CONTEXT = f"SELECT {INTENT_COLUMNS} FROM intents WHERE context_ref = ? ORDER BY rowid"

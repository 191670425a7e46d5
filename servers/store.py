"""The dispatch store: contexts, dispatch intents, approvals and turns in SQLite.

The store is the arbiter of once-only dispatch. :meth:`Store.begin_intent` reads a context's
intents, lets the caller re-run the pure engine on them and inserts the ``PENDING`` intent in one
``BEGIN IMMEDIATE`` transaction, committed durably (WAL, ``synchronous=FULL``) before it returns:
two callers, in two threads or two processes, can never both be told to dispatch one callId, nor
together exceed a call limit.

Nothing here holds raw arguments, outputs, approval reasons or secrets: an intent or an approval
carries the keyed argument fingerprint, and the columns that take text from outside are checked
(fingerprints are 64 lowercase hex digits, reasons are reason codes) by Python and by SQL
``CHECK`` constraints alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

from policy.canonical import canonical_json, decode_canonical_cbor
from policy.jsonvalue import EMPTY_MAP, freeze

PENDING, SUCCEEDED, FAILED, UNKNOWN = "PENDING", "SUCCEEDED", "FAILED", "UNKNOWN"
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, UNKNOWN})
TURN_OUTCOMES = frozenset({"COMPLETED", "FAILED"})
INTERRUPTED = "INTERRUPTED"
"""The reason of an intent that was still ``PENDING`` when the store was opened."""

SCHEMA_VERSION = 1
MAX_ID_CHARS = 1024
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_REASON = re.compile(r"[A-Z][A-Z0-9_]{0,63}")

_SCHEMA = """
CREATE TABLE contexts (
    context_ref TEXT PRIMARY KEY,
    build TEXT NOT NULL,
    objective TEXT NOT NULL,
    coordinates TEXT NOT NULL,
    observations BLOB NOT NULL,
    resolved_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    binding_revision INTEGER,
    turn_id TEXT
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


class StoreError(Exception):
    """A store that cannot be used, or a request that names something the store lacks."""


def _check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} chars")


def _check_fingerprint(value: object) -> None:
    if not isinstance(value, str) or _FINGERPRINT.fullmatch(value) is None:
        raise ValueError("fingerprint must be 64 lowercase hex digits (a keyed BLAKE3 digest)")


def _check_reason(value: object) -> None:
    if value is not None and (not isinstance(value, str) or _REASON.fullmatch(value) is None):
        raise ValueError("reason must be a reason code such as `RESULT_INVALID`, or None")


def _check_ms(name: str, value: object) -> None:
    if type(value) is not int:
        raise TypeError(f"{name} must be integer milliseconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One resolved context: its coordinates (a JSON map, frozen) and the availability
    observations it used, as canonical CBOR bytes (``policy.canonical.canonical_cbor``)."""

    context_ref: str
    build: str
    objective: str
    coordinates: Mapping[str, Any] = EMPTY_MAP
    observations: bytes = b"\xa0"  # the empty map
    resolved_at: int
    expires_at: int
    binding_revision: int | None = None
    turn_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "coordinates", freeze(self.coordinates))


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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _fields(r: sqlite3.Row) -> dict[str, Any]:
    return dict(zip(r.keys(), r, strict=True))


def _intent_row(r: sqlite3.Row) -> IntentRow:
    return IntentRow(**_fields(r))


def _approval_row(r: sqlite3.Row) -> ApprovalRow:
    return ApprovalRow(**_fields(r))


def _context_row(r: sqlite3.Row) -> ContextRow:
    decoded = {"coordinates": json.loads(r["coordinates"]), "observations": r["observations"]}
    return ContextRow(**{**_fields(r), **decoded})


def _insert(db: sqlite3.Connection, table: str, row: Any, **encoded: object) -> None:
    """INSERT one row dataclass, its field names being the table's column names."""
    values = {f.name: getattr(row, f.name) for f in fields(row)} | encoded
    names = ", ".join(values)
    marks = ", ".join(f":{name}" for name in values)
    db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)


_INTENT_COLUMNS = (
    "context_ref, call_id, tool, fingerprint, status, reason, created_at, completed_at"
)
_APPROVAL_COLUMNS = "approval_id, context_ref, tool, call_id, fingerprint, expires_at, approver_id"


class Store:
    """The dispatch store of one data directory. Thread-safe: one connection, one lock."""

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self.path = path
        self._db = db
        self._lock = threading.Lock()
        self.interrupted: tuple[IntentRow, ...] = ()
        """The intents this open turned from ``PENDING`` into ``UNKNOWN`` (``INTERRUPTED``)."""

    @classmethod
    def open(cls, path: Path, *, busy_timeout_ms: int = 10_000, now_ms: int | None = None) -> Store:
        """Open (creating the schema if needed) and recover: every intent still ``PENDING``,
        left by a crash, becomes ``UNKNOWN`` with reason ``INTERRUPTED``. Only the data
        directory's owner may open the store."""
        path = Path(path)
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        db = sqlite3.connect(
            str(path),
            isolation_level=None,  # autocommit; transactions are explicit BEGIN IMMEDIATE
            check_same_thread=False,  # every use goes through Store._lock
            timeout=busy_timeout_ms / 1000,
        )
        try:
            db.row_factory = sqlite3.Row
            _configure(db, busy_timeout_ms)
            store = cls(path, db)
            store._migrate()
            store.interrupted = store._recover(_now_ms() if now_ms is None else now_ms)
        except BaseException:
            db.close()
            raise
        return store

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front (``BEGIN IMMEDIATE``) so that reads inside it
        see exactly what the write builds on; the commit is durable when this exits."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _migrate(self) -> None:
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise StoreError(f"`{self.path}` has schema version {version}, not 1")

    def _recover(self, now_ms: int) -> tuple[IntentRow, ...]:
        with self._write() as db:
            rows = db.execute(
                f"SELECT {_INTENT_COLUMNS} FROM intents WHERE status = ? ORDER BY rowid",
                (PENDING,),
            ).fetchall()
            db.execute(
                "UPDATE intents SET status = ?, reason = ?, completed_at = ? WHERE status = ?",
                (UNKNOWN, INTERRUPTED, now_ms, PENDING),
            )
        return tuple(
            replace(_intent_row(r), status=UNKNOWN, reason=INTERRUPTED, completed_at=now_ms)
            for r in rows
        )

    # contexts

    def save_context(self, row: ContextRow) -> None:
        """Record a resolved context; a contextRef is saved once (:class:`StoreError`)."""
        _check_id("context_ref", row.context_ref)
        _check_ms("resolved_at", row.resolved_at)
        _check_ms("expires_at", row.expires_at)
        decode_canonical_cbor(row.observations)  # EncodingError unless canonical CBOR
        coordinates = canonical_json(row.coordinates)
        try:
            with self._write() as db:
                _insert(db, "contexts", row, coordinates=coordinates)
        except sqlite3.IntegrityError:
            raise StoreError(f"context `{row.context_ref}` exists") from None

    def context(self, context_ref: str) -> ContextRow | None:
        rows = self._query("SELECT * FROM contexts WHERE context_ref = ?", (context_ref,))
        return _context_row(rows[0]) if rows else None

    # intents

    def intents(self, context_ref: str) -> list[IntentRow]:
        """The context's intents, in the order they were begun."""
        sql = f"SELECT {_INTENT_COLUMNS} FROM intents WHERE context_ref = ? ORDER BY rowid"
        return [_intent_row(r) for r in self._query(sql, (context_ref,))]

    def intent(self, context_ref: str, call_id: str) -> IntentRow | None:
        sql = f"SELECT {_INTENT_COLUMNS} FROM intents WHERE context_ref = ? AND call_id = ?"
        rows = self._query(sql, (context_ref, call_id))
        return _intent_row(rows[0]) if rows else None

    def begin_intent(
        self,
        context_ref: str,
        call_id: str,
        tool: str,
        fingerprint: str,
        now_ms: int,
        *,
        decide: Callable[[list[IntentRow]], bool],
    ) -> Claim:
        """Decide and record a dispatch in one durable transaction (see :class:`Claim`).

        ``decide`` is called exactly once, inside the transaction and holding the database's
        write lock, with every intent of the context (an earlier one with this callId
        included, so the engine reports the duplicate or the conflict in its own order of
        checks); it must be quick and pure. True means the engine allows the call. If it
        raises, nothing is written and the exception propagates. When another process holds
        the write lock for longer than the busy timeout, ``sqlite3.OperationalError`` is raised.
        """
        _check_id("context_ref", context_ref)
        _check_id("call_id", call_id)
        _check_id("tool", tool)
        _check_fingerprint(fingerprint)
        _check_ms("now_ms", now_ms)
        with self._write() as db:
            sql = f"SELECT {_INTENT_COLUMNS} FROM intents WHERE context_ref = ? ORDER BY rowid"
            intents = [_intent_row(r) for r in db.execute(sql, (context_ref,))]
            allowed = decide(list(intents))
            existing = next((i for i in intents if i.call_id == call_id), None)
            if existing is not None:
                return Claim(False, existing)
            if not allowed:
                return Claim(False, None)
            row = IntentRow(
                context_ref=context_ref,
                call_id=call_id,
                tool=tool,
                fingerprint=fingerprint,
                status=PENDING,
                created_at=now_ms,
            )
            _insert(db, "intents", row)
            return Claim(True, row)

    def complete_intent(
        self, context_ref: str, call_id: str, status: str, reason: str | None, now_ms: int
    ) -> bool:
        """Make a ``PENDING`` intent final. A final status is never overwritten: completing
        twice is a no-op that returns False. An unknown intent is a :class:`StoreError`."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {sorted(FINAL_STATUSES)}, not `{status}`")
        _check_reason(reason)
        _check_ms("now_ms", now_ms)
        with self._write() as db:
            changed = db.execute(
                "UPDATE intents SET status = ?, reason = ?, completed_at = ?"
                " WHERE context_ref = ? AND call_id = ? AND status = ?",
                (status, reason, now_ms, context_ref, call_id, PENDING),
            ).rowcount
            if changed:
                return True
            found = db.execute(
                "SELECT 1 FROM intents WHERE context_ref = ? AND call_id = ?",
                (context_ref, call_id),
            ).fetchone()
        if found is None:
            raise StoreError(f"no intent `{call_id}` in context `{context_ref}`")
        return False

    # approvals

    def save_approval(self, row: ApprovalRow) -> None:
        _check_id("approval_id", row.approval_id)
        _check_id("context_ref", row.context_ref)
        _check_id("tool", row.tool)
        _check_id("call_id", row.call_id)
        _check_fingerprint(row.fingerprint)
        _check_ms("expires_at", row.expires_at)
        try:
            with self._write() as db:
                _insert(db, "approvals", row)
        except sqlite3.IntegrityError:
            raise StoreError(f"approval `{row.approval_id}` exists") from None

    def approvals(self, context_ref: str) -> list[ApprovalRow]:
        sql = f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE context_ref = ? ORDER BY rowid"
        return [_approval_row(r) for r in self._query(sql, (context_ref,))]

    # turns

    def save_turn(self, row: TurnRow) -> None:
        _check_id("turn_id", row.turn_id)
        _check_id("credential_id", row.credential_id)
        _check_ms("expires_at", row.expires_at)
        if row.outcome is not None and row.outcome not in TURN_OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(TURN_OUTCOMES)} or None")
        try:
            with self._write() as db:
                _insert(db, "turns", row)
        except sqlite3.IntegrityError:
            raise StoreError(f"turn `{row.turn_id}` exists") from None

    def turn(self, turn_id: str) -> TurnRow | None:
        rows = self._query("SELECT * FROM turns WHERE turn_id = ?", (turn_id,))
        return TurnRow(**_fields(rows[0])) if rows else None

    def complete_turn(self, turn_id: str, outcome: str) -> bool:
        """Record a turn's outcome once; a second completion is a no-op that returns False."""
        if outcome not in TURN_OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(TURN_OUTCOMES)}")
        with self._write() as db:
            changed = db.execute(
                "UPDATE turns SET outcome = ? WHERE turn_id = ? AND outcome IS NULL",
                (outcome, turn_id),
            ).rowcount
            found = db.execute("SELECT 1 FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
        if found is None:
            raise StoreError(f"no turn `{turn_id}`")
        return changed > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _configure(db: sqlite3.Connection, busy_timeout_ms: int) -> None:
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"cannot use write-ahead logging (journal mode `{mode}`)")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("PRAGMA trusted_schema = OFF")

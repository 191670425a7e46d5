"""The dispatch store: contexts, dispatch intents and approvals in SQLite.

The store is the arbiter of once-only dispatch. :meth:`Store.begin_intent_async` reads a context's
intents, lets the caller re-run the pure engine on them and inserts the ``PENDING`` intent in one
``BEGIN IMMEDIATE`` transaction, committed durably (WAL, ``synchronous=FULL``) before it returns:
two callers, in two threads or two processes, can never both be told to dispatch one callId, nor
together exceed a call limit.

Writes are group-committed (``servers.store.sqlite.writer``): one thread runs every write queued, in
order, in one transaction per batch, and answers the callers after the commit. Writes are
coroutines of an event loop, whose waiters the writer thread wakes with one call per batch.
Reads never wait for a write: each thread reads on its own connection, and WAL readers see the
last commit without taking the write lock.

Nothing here holds raw arguments, outputs, approval reasons or secrets (``servers.store.rows``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from servers.log.decision_log import Admitted, DecisionLog
from servers.store.rows import (
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    MAX_ID_CHARS,
    PENDING,
    RECONCILED,
    SUCCEEDED,
    TURN_OUTCOMES,
    UNKNOWN,
    ApprovalRow,
    Claim,
    ContextRow,
    IntentRow,
    StoreDamaged,
    StoreError,
    TurnRow,
    pending_intent,
)
from servers.store.sqlite import jobs
from servers.store.sqlite.schema import (
    APPROVAL_COLUMNS,
    CALL_INDEX_SCHEMA,
    INTENT_COLUMNS,
    INTENTS_OF_CONTEXT,
    LOG_MARK_SCHEMA,
    OWNER_SCHEMA,
    PRINCIPAL_SCHEMA,
    SCHEMA,
    SCHEMA_VERSION,
    approval_row,
    context_row,
    intent_row,
)
from servers.store.sqlite.writer import GroupWriter, WriterClosed
from servers.support.memo import cached, keep

T = TypeVar("T")
__all__ = [
    "PENDING",
    "SUCCEEDED",
    "FAILED",
    "UNKNOWN",
    "FINAL_STATUSES",
    "TURN_OUTCOMES",
    "INTERRUPTED",
    "RECONCILED",
    "SCHEMA_VERSION",
    "MAX_ID_CHARS",
    "StoreError",
    "StoreDamaged",
    "ContextRow",
    "IntentRow",
    "ApprovalRow",
    "TurnRow",
    "Claim",
    "Store",
]

CONTEXT_CACHE = 4096
"""Contexts kept in memory (a context never changes once saved)."""
_DAMAGE = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
_HAS_ROWS = " OR ".join(
    f"EXISTS (SELECT 1 FROM {table})" for table in ("contexts", "intents", "approvals", "turns")
)


MIGRATIONS = {
    0: SCHEMA + LOG_MARK_SCHEMA + CALL_INDEX_SCHEMA,  # a new file: the whole schema
    1: LOG_MARK_SCHEMA + OWNER_SCHEMA + CALL_INDEX_SCHEMA + PRINCIPAL_SCHEMA,
    2: OWNER_SCHEMA + CALL_INDEX_SCHEMA + PRINCIPAL_SCHEMA,
    3: CALL_INDEX_SCHEMA + PRINCIPAL_SCHEMA,
    4: PRINCIPAL_SCHEMA,
}
"""What brings a store of each older schema version to :data:`SCHEMA_VERSION`."""


class _LogMark:
    """The batch hook that keeps the store's mark of the decision log: the last seq the log
    had made durable when a batch began. Every record up to it is in the log, so a log that
    ends before it has lost records (see ``servers.store.sqlite.opening``). A lower bound: the
    records of the last batches before a crash may be in the log and not covered."""

    __slots__ = ("log", "stamped")

    def __init__(self) -> None:
        self.log: DecisionLog | None = None
        self.stamped = 0

    def __call__(self, db: sqlite3.Connection) -> None:
        seq = 0 if self.log is None else self.log.durable_seq
        if seq > self.stamped:
            db.execute("UPDATE log_mark SET seq = ? WHERE id = 1 AND seq < ?", (seq, seq))
            self.stamped = seq


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Store:
    """The dispatch store of one data directory. Thread-safe.

    Writes go through one writer thread (:class:`~servers.store.sqlite.writer.GroupWriter`) that
    commits them in batches, one durable transaction each; the ``submit_*`` methods return its
    futures and the plain methods wait for them. Reads use a connection per thread (WAL: a
    reader never waits for a writer) and see every write whose method has returned. Contexts,
    never changed once saved, are cached."""

    def __init__(self, path: Path, db: sqlite3.Connection, busy_timeout_ms: int = 10_000) -> None:
        self.path = path
        self._db = db
        self._busy_timeout_ms = busy_timeout_ms
        self._mark = _LogMark()
        self._writer = GroupWriter(db, name="dispatch-store-writer", on_batch=self._mark)
        weakref.finalize(self, self._writer.stop_soon)
        self._lock = threading.Lock()  # the readers' registry
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._contexts: dict[str, ContextRow] = {}
        self._log: DecisionLog | None = None
        self._closed = False
        self.interrupted: tuple[IntentRow, ...] = ()
        """The intents this open turned from ``PENDING`` into ``UNKNOWN`` (``INTERRUPTED``)."""

    @classmethod
    def open(cls, path: Path, *, busy_timeout_ms: int = 10_000, now_ms: int | None = None) -> Store:
        """Open (creating the schema if needed), check (``PRAGMA quick_check``: a damaged file
        is a :class:`StoreDamaged`) and recover: every intent still ``PENDING``, left by a
        crash, becomes ``UNKNOWN`` with reason ``INTERRUPTED``. Only the data directory's
        owner may open the store."""
        path = Path(path)
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        try:
            return cls._open(path, busy_timeout_ms, now_ms)
        except sqlite3.DatabaseError as exc:
            if exc.sqlite_errorname in _DAMAGE:
                raise StoreDamaged(f"`{path}` is damaged ({exc})") from None
            raise

    @classmethod
    def _open(cls, path: Path, busy_timeout_ms: int, now_ms: int | None) -> Store:
        db = _connect(path, busy_timeout_ms)
        try:
            _configure(db, busy_timeout_ms)
            _quick_check(db, path)
            store = cls(path, db, busy_timeout_ms)
            store._writer.run_inline(store._migrate)
            store._mark.stamped = store.log_mark
            now = _now_ms() if now_ms is None else now_ms
            store.interrupted = store._writer.run_inline(lambda db: _recover(db, now))
        except BaseException:
            db.close()
            raise
        return store

    def attach_log(self, log: DecisionLog) -> None:
        """The decision log that the ``record`` of an ``*_async`` write goes to, and whose
        durable seq every batch records (:attr:`log_mark`)."""
        self._log = log
        self._mark.log = log

    @property
    def log_mark(self) -> int:
        """The decision log's seq that the store has recorded as durable: a log that ends
        before it has lost records the store has seen."""
        rows = self._query("SELECT seq FROM log_mark WHERE id = 1", ())
        return int(rows[0][0]) if rows else 0

    def mark_log(self) -> None:
        """Record the attached log's durable seq now (at start, before the writer thread)."""
        self._writer.run_inline(self._mark)

    def has_rows(self) -> bool:
        """Whether the store holds anything: a context, an intent, an approval or a turn."""
        return bool(self._query(f"SELECT {_HAS_ROWS}", ())[0][0])

    def has_fingerprints(self) -> bool:
        """Whether the store holds an argument fingerprint (an intent or an approval)."""
        sql = "SELECT EXISTS (SELECT 1 FROM intents) OR EXISTS (SELECT 1 FROM approvals)"
        return bool(self._query(sql, ())[0][0])

    def select(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        """A read on this thread's connection (the start-up reconciliation's queries)."""
        return self._query(sql, params)

    def run_inline(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run a write in this thread, in its own transaction; only at start, before the
        first write is queued (the start-up reconciliation)."""
        return self._writer.run_inline(job)

    async def _run(
        self, job: Callable[[sqlite3.Connection], T], record: jobs.Selector | None = None
    ) -> T:
        """Run a write in the writer thread; its result once it is durable. ``record(result)``,
        if given, is appended to the attached log after the commit, before this returns (one
        hand-off for both)."""
        logged = None
        if record is not None:
            if self._log is None:
                raise StoreError("a record was given but no decision log is attached")
            logged = (self._log, record)
        try:
            return await self._writer.run(job, logged)
        except WriterClosed:
            raise StoreError(f"the store `{self.path}` is closed") from None

    def _reader(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            with self._lock:
                if self._closed:
                    raise StoreError(f"the store `{self.path}` is closed")
                db = _connect(self.path, self._busy_timeout_ms)
                db.execute("PRAGMA query_only = ON")
                db.execute("PRAGMA trusted_schema = OFF")
                self._readers.append(db)
            self._local.db = db
        return db

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        # fetchall: the statement, and with it the read transaction, ends here
        return self._reader().execute(sql, params).fetchall()

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Version 0 (a new file): the schema; version 1: add the log mark (at 0, so the
        next reconciliation reads the whole log once); version 2: add the contexts' owners
        (NULL for the contexts already stored: they belong to no credential); version 3: add
        the index of intents by call id."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        steps = MIGRATIONS.get(version)
        if steps is None:
            raise StoreError(
                f"`{self.path}` has schema version {version}, not {SCHEMA_VERSION}"
                " (written by a newer runtime?)"
            )
        for statement in steps.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # contexts

    def observe_commits(self, observe: Callable[[float], None]) -> None:
        """Tell ``observe`` the seconds of every commit of the writer (a metric)."""
        self._writer.on_commit = observe

    async def save_context_async(self, row: ContextRow, *, record: Admitted | None = None) -> None:
        """Record a resolved context, once (a contextRef saved again is a
        :class:`StoreError`); ``record`` is logged once it is saved."""
        await self._run(jobs.context_job(row), jobs.always(record))

    def context(self, context_ref: str) -> ContextRow | None:
        found = cached(self._contexts, context_ref)
        if found is not None:
            return found
        rows = self._query("SELECT * FROM contexts WHERE context_ref = ?", (context_ref,))
        if not rows:
            return None
        found = context_row(rows[0])
        keep(self._contexts, context_ref, found, CONTEXT_CACHE)  # a context row never changes
        return found

    # intents

    def intents(self, context_ref: str) -> list[IntentRow]:
        """The context's intents, in the order they were begun."""
        return [intent_row(r) for r in self._query(INTENTS_OF_CONTEXT, (context_ref,))]

    def intents_with_call(self, call_id: str) -> list[IntentRow]:
        """The intents of ``call_id`` in any context, oldest first (an index lookup)."""
        sql = f"SELECT {INTENT_COLUMNS} FROM intents WHERE call_id = ? ORDER BY rowid"
        return [intent_row(r) for r in self._query(sql, (call_id,))]

    def intent(self, context_ref: str, call_id: str) -> IntentRow | None:
        sql = f"SELECT {INTENT_COLUMNS} FROM intents WHERE context_ref = ? AND call_id = ?"
        rows = self._query(sql, (context_ref, call_id))
        return intent_row(rows[0]) if rows else None

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
        """Decide and record a dispatch in one durable transaction (see :class:`Claim`),
        committed (``synchronous=FULL``) before this returns.

        ``decide`` is called at most once, in the writer thread, inside the transaction and
        holding the database's write lock, with every intent of the context (those committed,
        by any process, and those begun earlier in the same batch; an earlier one with this
        callId included, so the engine reports the duplicate or the conflict in its own order
        of checks); it must be quick and pure. True means the engine allows the call. If it
        raises, nothing is written and the exception propagates. ``seen``: the intents the
        caller has already run the engine on, and been allowed; when the context's intents are
        exactly these, ``decide`` would answer the same (it is pure) and is not called. When
        another process holds the write lock for longer than the busy timeout,
        ``sqlite3.OperationalError`` is raised.

        ``record`` is logged if, and once, the intent was inserted."""
        row = pending_intent(context_ref, call_id, tool, fingerprint, now_ms)
        job = partial(jobs.begin, row=row, decide=decide, seen=seen)
        return await self._run(job, jobs.if_inserted(record))

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
        """Make a ``PENDING`` intent final. A final status is never overwritten: completing
        twice is a no-op that returns False. An unknown intent is an :class:`IntentUnknown`.
        ``record`` is logged once it is done."""
        job = jobs.complete_job(context_ref, call_id, status, reason, now_ms)
        return await self._run(job, jobs.always(record))

    # approvals

    async def save_approval_async(
        self, row: ApprovalRow, *, record: Admitted | None = None
    ) -> None:
        """Record an approval, once; ``record`` is logged once it is saved."""
        await self._run(jobs.approval_job(row), jobs.always(record))

    def approvals(self, context_ref: str) -> list[ApprovalRow]:
        sql = f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE context_ref = ? ORDER BY rowid"
        return [approval_row(r) for r in self._query(sql, (context_ref,))]

    def close(self) -> None:
        """Commit what is queued, then close every connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            readers, self._readers = self._readers, []
        self._writer.close()
        for db in readers:
            db.close()
        try:
            self._mark(self._db)  # the log's records of the last batches, now durable
        except sqlite3.Error:
            pass  # the mark stays a lower bound: nothing is lost by not raising it
        finally:
            self._db.close()


def _recover(db: sqlite3.Connection, now_ms: int) -> tuple[IntentRow, ...]:
    rows = db.execute(
        f"SELECT {INTENT_COLUMNS} FROM intents WHERE status = ? ORDER BY rowid", (PENDING,)
    ).fetchall()
    db.execute(
        "UPDATE intents SET status = ?, reason = ?, completed_at = ? WHERE status = ?",
        (UNKNOWN, INTERRUPTED, now_ms, PENDING),
    )
    return tuple(
        replace(intent_row(r), status=UNKNOWN, reason=INTERRUPTED, completed_at=now_ms)
        for r in rows
    )


def _quick_check(db: sqlite3.Connection, path: Path) -> None:
    """``PRAGMA quick_check``: a pass over every page of the file (not the indexes' contents)."""
    rows = db.execute("PRAGMA quick_check(3)").fetchall()
    found = [str(r[0]) for r in rows]
    if found != ["ok"]:
        lines = "; ".join(line for text in found for line in text.splitlines()[:3])
        raise StoreDamaged(f"`{path}` fails `PRAGMA quick_check`: {lines[:300]}")


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    db = sqlite3.connect(
        str(path),
        isolation_level=None,  # autocommit; transactions are explicit BEGIN IMMEDIATE
        check_same_thread=False,  # one thread uses it at a time; close() may be elsewhere
        timeout=busy_timeout_ms / 1000,
    )
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return db


def _configure(db: sqlite3.Connection, busy_timeout_ms: int) -> None:
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"cannot use write-ahead logging (journal mode `{mode}`)")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("PRAGMA trusted_schema = OFF")

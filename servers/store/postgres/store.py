"""The dispatch store on PostgreSQL: one database that every replica of the runtime shares.

It has the methods and the semantics of the SQLite store (``servers.store.sqlite.store.Store``)
that the runtime uses, and the same rows and checks (``servers.store.rows``): nothing stored
holds raw arguments, outputs, approval reasons or secrets.

- Reads are plain methods, called on the event loop as the SQLite store's are: one statement
  on the calling thread's own autocommit connection, so each sees every commit made before it,
  by any replica, and holds no transaction open. Contexts, which never change, are cached.
- Writes are coroutines on psycopg's ``AsyncConnectionPool`` (opened in the event loop of the
  first write). Each is one transaction, committed (``synchronous_commit`` on) before it
  returns, that inserts its decision-log record itself (``servers.store.postgres.log``): the record
  exists iff the write committed. Most are one statement, one round trip (a claim that must
  call ``decide`` is a transaction of six).
- Once-only dispatch: the arbiter is the intents' primary key ``(context_ref, call_id)``.
  :meth:`PgStore.begin_intent_async` locks the context's row, re-decides on its intents and
  inserts with ``ON CONFLICT DO NOTHING``: whichever replica receives a callId, one claim
  inserts it, and the claims of one context are decided one after the other.
- Replicas: each holds a lease in ``replicas``, renewed by :meth:`PgStore.renew_lease`. One
  whose lease lapsed claims no more, and any other's :meth:`PgStore.reap` turns its
  ``PENDING`` intents ``UNKNOWN`` (``REPLICA_LOST``, logged), never to be dispatched again.

Every ``now_ms`` must come from one clock, the runtime's.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.errors import ReadOnlySqlTransaction
from psycopg.rows import RowFactory, class_row, dict_row, tuple_row
from psycopg_pool import PoolTimeout

from servers.log.decision_log import Admitted, observed
from servers.store import keycheck
from servers.store.postgres import schema
from servers.store.postgres.log import (
    RELEASE,
    REPLICA_LOST,
    Entry,
    LostRecord,
    PgDecisionLog,
    Sequencer,
    entry,
    lost_record,
    reap,
    register,
    renew,
)
from servers.store.rows import (
    FINAL_STATUSES,
    TURN_OUTCOMES,
    ApprovalRow,
    Claim,
    ContextRow,
    IntentRow,
    IntentUnknown,
    StoreError,
    StoreUnanswered,
    TurnRow,
    check_id,
    check_ms,
    check_reason,
    pending_intent,
)
from servers.support.memo import cached, keep

__all__ = ["DEFAULT_LEASE_MS", "REPLICA_LOST", "LostRecord", "PgDecisionLog", "PgStore"]
R = TypeVar("R")
DEFAULT_LEASE_MS = 15_000
POOL_MIN, POOL_MAX = 1, 8
CONNECT_TIMEOUT_S = 10
CONTEXT_CACHE = 4096
LOCK_RETRY_S = 0.02
EXCLUSIVE_WAIT_S = 10.0
"""How long :meth:`PgStore.exclusive` waits for a lock another replica holds, by default."""


class PgStore:
    """One replica's dispatch store on a shared database; thread-safe, writes in one loop."""

    def __init__(
        self, url: str, conn: psycopg.Connection[Any], replica_id: str, last_seq: int, **kw: int
    ) -> None:
        self._url = url
        self.where = schema.redacted(url)
        """The store as messages name it (no password)."""
        self.replica_id = replica_id
        self.lease_ms = kw["lease_ms"]
        self._sizes = (kw["pool_min"], kw["pool_max"])
        self._timeout_s = kw["timeout_s"]
        self._sequencer = Sequencer(replica_id, last_seq)
        self._maint = conn  # migrations, the lease, reaping: under _maint_lock
        self._maint_lock = threading.Lock()
        self._lock = threading.Lock()  # the registry of connections
        self._local = threading.local()
        self._readers: list[psycopg.Connection[Any]] = []
        self._pool: schema.Pool | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._pool_opened: asyncio.Task[None] | None = None
        self._contexts: dict[str, ContextRow] = {}
        self._on_commit: Callable[[float], None] | None = None
        self.log = PgDecisionLog(self)
        """The decision log in this store (every replica's records), as the runtime uses it."""
        self._lost = False
        self._closed = False
        self.incarnation = ""
        """This process's hold on the replica id (random, taken at open)."""
        self.interrupted: tuple[IntentRow, ...] = ()
        """This replica's intents of an earlier run that this open made ``UNKNOWN``
        (``INTERRUPTED``), for the runtime to log as the SQLite store's."""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        replica_id: str,
        lease_ms: int = DEFAULT_LEASE_MS,
        now_ms: int | None = None,
        pool_min: int = POOL_MIN,
        pool_max: int = POOL_MAX,
        timeout_s: int = CONNECT_TIMEOUT_S,
        key_check: str | None = None,
    ) -> PgStore:
        """Connect, migrate (``servers.store.postgres.schema.migrate``), check the fingerprint key's
        ``key_check`` value when given (``servers.store.keycheck.claim``: a store that records
        another is a :class:`~servers.store.keycheck.KeyChanged`, before anything else is
        written) and register the replica with a lease until ``now_ms + lease_ms``; any other
        refusal is a :class:`StoreError` (another process holding a live lease under this id,
        say). This replica's intents left ``PENDING`` by an earlier run become ``UNKNOWN``
        (``INTERRUPTED``: :attr:`interrupted`)."""
        check_id("replica_id", replica_id)
        if type(lease_ms) is not int or lease_ms <= 0:
            raise ValueError("lease_ms must be a positive integer")
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        check_ms("now_ms", now)
        conn, where = schema.connect(url, timeout_s), schema.redacted(url)
        try:
            schema.migrate(conn, where)
            if key_check is not None:
                keycheck.claim(conn, key_check, where)
            incarnation = secrets.token_hex(8)
            interrupted, last = register(conn, replica_id, incarnation, now, lease_ms)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.Error):  # the database refused: no password in it
                message = schema.scrubbed(str(exc).strip(), url)
                raise StoreError(f"the store `{where}` cannot be opened: {message}") from None
            raise
        sizes = {"pool_min": pool_min, "pool_max": pool_max, "timeout_s": timeout_s}
        store = cls(url, conn, replica_id, last, lease_ms=lease_ms, **sizes)
        store.interrupted, store.incarnation = interrupted, incarnation
        return store

    @property
    def lease_lost(self) -> bool:
        """Whether the lease was found lapsed (or reaped): this replica claims no more."""
        return self._lost

    # connections

    def _here(self) -> psycopg.Connection[Any]:
        """This thread's connection (made again when it broke)."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            with self._lock:
                if self._closed:
                    raise StoreError(f"the store `{self.where}` is closed")
                self._readers = [c for c in self._readers if c is not conn]
                conn = schema.connect(self._url, self._timeout_s)
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    def _rows(self, sql: str, params: Any, factory: RowFactory[R]) -> list[R]:
        try:
            with self._here().cursor(row_factory=factory) as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        except (psycopg.DataError, UnicodeEncodeError):
            if schema.storable(params):
                raise
            return []  # a key no stored text can equal (a NUL, a lone surrogate) matches none
        except psycopg.OperationalError as exc:  # the server went away: say so, not a bug
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: Exception, kind: type[StoreError] = StoreError) -> StoreError:
        message = schema.scrubbed(str(exc).strip(), self._url)
        return kind(f"the store `{self.where}` did not answer: {message}")

    def select(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """A read on this thread's connection (the decision log's traces)."""
        return self._rows(sql, params, tuple_row)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> int:
        """One statement on this thread's connection (autocommit: durable on return); the
        rows it changed."""
        try:
            with self._here().cursor() as cur:
                cur.execute(sql, params)
                return cur.rowcount
        except (psycopg.OperationalError, ReadOnlySqlTransaction) as exc:
            raise self._unavailable(exc) from None

    def maintain(self, *statements: tuple[str, Sequence[Any] | Mapping[str, Any]]) -> None:
        """Statements of the replica's upkeep, each its own transaction, on the maintenance
        connection (that of the lease: a thread of the default executor adds none)."""
        try:
            with self._maintenance() as conn:
                for sql, params in statements:
                    conn.execute(sql, params)
        except (psycopg.OperationalError, ReadOnlySqlTransaction) as exc:
            raise self._unavailable(exc) from None

    def stream(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """The rows of ``sql`` from one snapshot (``pg_schema.snapshot``: an export)."""
        return schema.snapshot(self._url, self._timeout_s, sql)

    async def _open_pool(self) -> schema.Pool:
        loop = asyncio.get_running_loop()
        if self._closed:
            raise StoreError(f"the store `{self.where}` is closed")
        if self._pool is None:
            name = f"seif-store-{self.replica_id}"
            self._pool = schema.new_pool(self._url, self._sizes, self._timeout_s, name)
            self._pool_loop = loop
            opening = self._pool.open(wait=True, timeout=self._timeout_s)
            self._pool_opened = loop.create_task(opening)
        elif self._pool_loop is not loop:
            raise StoreError("the store's writes belong to another event loop")
        if self._pool_opened is not None:
            opened, pool = self._pool_opened, self._pool
            try:
                await asyncio.shield(opened)
            except (psycopg.Error, PoolTimeout) as exc:  # the next write opens it anew
                if self._pool is pool:
                    self._pool, self._pool_opened = None, None
                    await pool.close()
                raise self._unavailable(exc) from None
            self._pool_opened = None
        return self._pool

    def observe_commits(self, observe: Callable[[float], None]) -> None:
        """Tell ``observe`` the seconds of every write (each one transaction: a metric)."""
        self._on_commit = observe

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        pool = await self._open_pool()
        try:
            async with pool.connection() as conn:
                began = time.perf_counter()
                yield conn
                observed(self._on_commit, time.perf_counter() - began)
        except (PoolTimeout, ReadOnlySqlTransaction) as exc:  # every connection busy past
            raise self._unavailable(exc) from None  # the timeout, or a standby: not written
        except psycopg.OperationalError as exc:  # cut mid-way: written, or not
            await pool.check()  # the others cut with it are replaced, not failed in turn
            raise self._unavailable(exc, StoreUnanswered) from None

    @contextmanager
    def _maintenance(self) -> Iterator[psycopg.Connection[Any]]:
        with self._maint_lock:
            if self._closed:
                raise StoreError(f"the store `{self.where}` is closed")
            if self._maint.closed:
                self._maint = schema.connect(self._url, self._timeout_s)
            yield self._maint

    # reads

    def context(self, context_ref: str) -> ContextRow | None:
        found = cached(self._contexts, context_ref)
        if found is not None:
            return found
        rows = self._rows(schema.CONTEXT, (context_ref,), dict_row)
        if not rows:
            return None
        found = schema.context_row(rows[0])
        keep(self._contexts, context_ref, found, CONTEXT_CACHE)  # a context row never changes
        return found

    def intents(self, context_ref: str) -> list[IntentRow]:
        """The context's intents, in the order they were begun."""
        return self._rows(schema.INTENTS_OF_CONTEXT, (context_ref,), class_row(IntentRow))

    def intents_with_call(self, call_id: str) -> list[IntentRow]:
        """The intents of ``call_id`` in any context, oldest first (an index lookup)."""
        return self._rows(schema.INTENTS_WITH_CALL, (call_id,), class_row(IntentRow))

    def intent(self, context_ref: str, call_id: str) -> IntentRow | None:
        rows = self._rows(schema.INTENT, (context_ref, call_id), class_row(IntentRow))
        return rows[0] if rows else None

    def approvals(self, context_ref: str) -> list[ApprovalRow]:
        """The context's approvals, in the order they were saved."""
        return self._rows(schema.APPROVALS_OF_CONTEXT, (context_ref,), class_row(ApprovalRow))

    def turn(self, turn_id: str) -> TurnRow | None:
        rows = self._rows(schema.TURN, (turn_id,), class_row(TurnRow))
        return rows[0] if rows else None

    def has_rows(self) -> bool:
        """Whether the store holds anything: a context, an intent, an approval or a turn."""
        return bool(self.select(schema.HAS_ROWS, ())[0][0])

    def has_fingerprints(self) -> bool:
        """Whether the store holds an argument fingerprint (an intent or an approval)."""
        return bool(self.select(schema.HAS_FINGERPRINTS, ())[0][0])

    # writes

    async def _insert_once(
        self, sql: dict[bool, str], params: dict[str, Any], record: Admitted | None
    ) -> int:
        params.update(self._sequencer.params(None if record is None else entry(record)))
        logged = record is not None
        async with self._connection() as conn:
            found = await (await conn.execute(sql[logged], params)).fetchone()
        return int(found[0]) if found is not None else 0

    async def save_context_async(self, row: ContextRow, *, record: Admitted | None = None) -> None:
        """Record a resolved context and, in the same transaction, ``record``; a contextRef
        is saved once (:class:`StoreError`, nothing logged)."""
        if not await self._insert_once(schema.SAVE_CONTEXT, schema.context_params(row), record):
            raise StoreError(f"context `{row.context_ref}` exists")
        keep(self._contexts, row.context_ref, row, CONTEXT_CACHE)  # as saved: never changed

    async def save_approval_async(
        self, row: ApprovalRow, *, record: Admitted | None = None
    ) -> None:
        """Record an approval and, in the same transaction, ``record``; an approvalId is saved
        once (:class:`StoreError`, nothing logged)."""
        if not await self._insert_once(schema.SAVE_APPROVAL, schema.approval_params(row), record):
            raise StoreError(f"approval `{row.approval_id}` exists")

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
        """Decide and record a dispatch in one transaction (see :class:`Claim`), committed
        before this returns; ``record`` is inserted with the intent, iff it is inserted.

        Holding the context's row lock (an unknown context is a :class:`StoreError`), on
        the intents committed by any replica: ``decide`` is called once, unless they are
        exactly ``seen`` (then one statement, ``seif_claim``, does it all); then an existing
        intent of this callId is the claim, else a refusal, else the insert. A replica whose
        lease lapsed (by ``now_ms``) or was reaped claims nothing (:class:`StoreError`)."""
        row = pending_intent(context_ref, call_id, tool, fingerprint, now_ms)
        if self._lost:
            raise self._lease_lost()
        found = None if record is None else entry(record)  # encoded before any lock is held
        if seen is not None and all(i.context_ref == context_ref for i in seen):
            claim = await self._claim_seen(row, seen, found)
            if claim is not None:
                return claim
        return await self._claim_deciding(row, decide, seen, found)

    async def _claim_seen(
        self, row: IntentRow, seen: list[IntentRow], found: Entry | None
    ) -> Claim | None:
        """The claim in one statement; None when the intents are no longer ``seen``."""
        params = {**schema.row_fields(row), "replica_id": self.replica_id}
        params.update(incarnation=self.incarnation, seen=schema.seen(seen))
        params.update(self._sequencer.params(found))
        async with self._connection() as conn:
            answer = await (await conn.execute(schema.CLAIM_SEEN, params)).fetchone()
            outcome = answer[0] if answer is not None else None
            if outcome == "EXISTS":
                key = (row.context_ref, row.call_id)
                read = conn.cursor(row_factory=class_row(IntentRow))
                return Claim(False, await (await read.execute(schema.INTENT, key)).fetchone())
        if outcome == "INSERTED":
            return Claim(True, row)
        if outcome == "LEASE_LOST":
            self._lost = True
            raise self._lease_lost()
        if outcome == "NO_CONTEXT":
            raise StoreError(f"no context `{row.context_ref}`")
        return None  # CHANGED

    async def _claim_deciding(
        self,
        row: IntentRow,
        decide: Callable[[list[IntentRow]], bool],
        seen: list[IntentRow] | None,
        found: Entry | None,
    ) -> Claim:
        """The claim in a transaction that holds the context's row while ``decide`` runs."""
        params = {**schema.row_fields(row), "replica_id": self.replica_id}
        async with self._connection() as conn, conn.transaction():
            claim = await self._arbitrate(conn, row, decide, seen)
            if claim is not None:
                return claim
            params.update(self._sequencer.params(found))
            inserted = await conn.execute(schema.CLAIM[found is not None], params)
            count = await inserted.fetchone()
        if count is not None and count[0]:
            return Claim(True, row)
        return Claim(False, self.intent(row.context_ref, row.call_id))  # another writer's

    async def _arbitrate(
        self,
        conn: psycopg.AsyncConnection[Any],
        row: IntentRow,
        decide: Callable[[list[IntentRow]], bool],
        seen: list[IntentRow] | None,
    ) -> Claim | None:
        """The lease, the context's lock, its intents; then the claim that inserts nothing,
        or None to insert."""
        lease = await (await conn.execute(schema.LEASE, (self.replica_id,))).fetchone()
        if lease is None or lease[1:] != (None, self.incarnation) or lease[0] <= row.created_at:
            self._lost = True
            raise self._lease_lost()
        locked = await (await conn.execute(schema.LOCK_CONTEXT, (row.context_ref,))).fetchone()
        if locked is None:
            raise StoreError(f"no context `{row.context_ref}`")
        read = conn.cursor(row_factory=class_row(IntentRow))
        await read.execute(schema.INTENTS_OF_CONTEXT, (row.context_ref,))
        intents = await read.fetchall()
        allowed = (seen is not None and intents == seen) or decide(list(intents))
        existing = next((i for i in intents if i.call_id == row.call_id), None)
        if existing is not None:
            return Claim(False, existing)
        return None if allowed else Claim(False, None)

    def _lease_lost(self) -> StoreError:
        return StoreError(f"replica `{self.replica_id}` has lost its lease: it claims no more")

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
        """Make a ``PENDING`` intent final, holding the context's row lock, and insert
        ``record``, in one statement (``seif_complete``). A final status is never
        overwritten: completing twice returns False (the record is logged all the same, as
        the SQLite store logs it). An unknown intent is a :class:`StoreError`, and nothing is
        logged."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {sorted(FINAL_STATUSES)}, not `{status}`")
        check_reason(reason)
        check_ms("now_ms", now_ms)
        params: dict[str, Any] = {"context_ref": context_ref, "call_id": call_id, "now": now_ms}
        params.update(status=status, reason=reason)
        params.update(self._sequencer.params(None if record is None else entry(record)))
        async with self._connection() as conn:
            answer = await (await conn.execute(schema.COMPLETE, params)).fetchone()
        if answer is None or answer[0] == "NO_INTENT":
            raise IntentUnknown(f"no intent `{call_id}` in context `{context_ref}`")
        return bool(answer[0] == "DONE")

    async def append_entry(self, found: Entry) -> int:
        """Append one record on its own (``PgDecisionLog.append_admitted``); its ``seq``."""
        async with self._connection() as conn:
            cur = await conn.execute(schema.APPEND, self._sequencer.params(found))
            row = await cur.fetchone()
        if row is None:
            raise StoreError("the record was not appended")
        return int(row[0])

    @asynccontextmanager
    async def exclusive(self, name: str, wait_s: float = EXCLUSIVE_WAIT_S) -> AsyncIterator[None]:
        """Held by one replica at a time: a session advisory lock of ``name`` on a connection
        of its own, opened for it and closed at the end, which releases it whatever ended the
        hold (a cancellation, an error, a lost connection: no lock outlives its holder, and
        none is shared). Taken with ``pg_try_advisory_lock``, tried again every
        :data:`LOCK_RETRY_S` while another replica holds it; a :class:`StoreError` past
        ``wait_s``. Callers in this process serialize on ``name`` first."""
        if self._closed:
            raise StoreError(f"the store `{self.where}` is closed")
        conn = await schema.connect_async(self._url, self._timeout_s)
        try:
            deadline = asyncio.get_running_loop().time() + wait_s
            while not await self._try_lock(conn, name):
                if asyncio.get_running_loop().time() >= deadline:
                    raise StoreError(f"another replica held a lock for {wait_s:g} s")
                await asyncio.sleep(LOCK_RETRY_S)
            yield
        finally:
            conn.pgconn.finish()  # a plain call (no await): nothing interrupts the release

    async def _try_lock(self, conn: psycopg.AsyncConnection[Any], name: str) -> bool:
        try:
            found = await (await conn.execute(schema.TRY_LOCK_NAMED, (name,))).fetchone()
        except (psycopg.OperationalError, ReadOnlySqlTransaction) as exc:
            raise self._unavailable(exc) from None
        return bool(found is not None and found[0])

    # turns (writes on the calling thread's connection: one statement each)

    def save_turn(self, row: TurnRow) -> None:
        if not self._rows(schema.SAVE_TURN, schema.turn_params(row), tuple_row)[0][0]:
            raise StoreError(f"turn `{row.turn_id}` exists")

    def complete_turn(self, turn_id: str, outcome: str) -> bool:
        """Record a turn's outcome once; a second completion is a no-op that returns False."""
        if outcome not in TURN_OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(TURN_OUTCOMES)}")
        params = {"turn_id": turn_id, "outcome": outcome}
        changed, exists = self._rows(schema.COMPLETE_TURN, params, tuple_row)[0]
        if not exists:
            raise StoreError(f"no turn `{turn_id}`")
        return bool(changed)

    def trim_turns(self, credential_id: str, keep: int) -> None:
        """Forget the credential's turns but its newest ``keep``."""
        self.execute(schema.TRIM_TURNS, (credential_id, keep))

    # leases

    def renew_lease(self, now_ms: int) -> bool:
        """Extend the lease to ``now_ms + lease_ms``; False, for good, when it had lapsed by
        ``now_ms`` or was reaped: the replica must stop (it claims no more)."""
        check_ms("now_ms", now_ms)
        if not self._lost:
            with self._maintenance() as conn:
                held = renew(conn, self.replica_id, self.incarnation, now_ms, self.lease_ms)
            self._lost = not held
        return not self._lost

    def reap(self, now_ms: int, *, record: LostRecord | None = None) -> tuple[IntentRow, ...]:
        """Turn every ``PENDING`` intent of the other replicas whose lease lapsed by ``now_ms``
        into ``UNKNOWN`` (``REPLICA_LOST``), each with its ``UNKNOWN`` record (``record``,
        default :func:`lost_record`), in one transaction; those replicas are marked reaped and
        claim no more. Waits for their claims in flight; returns the intents, in begin order."""
        check_ms("now_ms", now_ms)
        with self._maintenance() as conn:
            return reap(conn, self._sequencer, now_ms, record or lost_record)

    async def renew_lease_async(self, now_ms: int) -> bool:
        """:meth:`renew_lease` off the event loop."""
        return await asyncio.to_thread(self.renew_lease, now_ms)

    async def reap_async(
        self, now_ms: int, *, record: LostRecord | None = None
    ) -> tuple[IntentRow, ...]:
        """:meth:`reap` off the event loop (it may wait for claims in flight)."""
        return await asyncio.to_thread(partial(self.reap, now_ms, record=record))

    # closing

    async def aclose(self) -> None:
        """:meth:`close`, closing the pool in its event loop (call it there)."""
        pool = self._shut()
        if pool is not None:
            await pool.close()

    def close(self) -> None:
        """Release the lease (a replica that closes has nothing in flight: whatever it left
        ``PENDING`` is reapable at once), then close every connection. The pool closes in
        its event loop: from that loop, prefer :meth:`aclose`. Idempotent."""
        pool = self._shut()
        if pool is not None:
            schema.close_pool(pool, self._pool_loop)

    def _shut(self) -> schema.Pool | None:
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            readers, self._readers = self._readers, []
        self.log.close()
        with self._maint_lock:
            try:
                if not self._lost and not self._maint.closed:
                    self._maint.execute(RELEASE, (self.replica_id, self.incarnation))
            except psycopg.Error:
                pass  # the lease lapses by itself
            finally:
                self._maint.close()
        for conn in readers:
            conn.close()
        pool, self._pool = self._pool, None
        return pool

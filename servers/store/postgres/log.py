"""The decision log as the append-only table ``decision_log`` of the PostgreSQL store.

Each row holds one record's bytes as the file log (``servers.log.decision_log``) encodes them:
the canonical CBOR of the record with its envelope ``v``, ``seq`` and ``at``, but in record
format 1, without ``prev``: the table is not hash-chained. A record's ``prev`` would be the
digest of the record before it, whose bytes hold the ``seq`` the database assigns in the very
statement that inserts it, so every replica's log writes would have to wait for one another;
``GET /v1/traces/head`` (:meth:`PgDecisionLog.head`) is what an operator anchors instead.

``seq`` is the table's own (a sequence, so it increases across every replica), taken by the
very statement that inserts the row: the record is encoded beforehand with the bytes before
and after its ``seq`` value apart (:func:`entry`), and the database function ``seif_log`` joins
them around the canonical CBOR of the ``seq`` it takes (``servers.store.postgres.schema``). Every
row also names its replica and a per-replica sequence (``replica``, ``replica_seq``:
:class:`Sequencer`).

A write of the store inserts its record in the same transaction as the write (it is there iff
the write committed); the records of a context's claims and completions take their ``seq``
holding the context's row lock, so that a context's records are in the order its writes were.
``SELECT record FROM decision_log ORDER BY seq`` is a decision-log file, byte for byte
(:meth:`PgDecisionLog.record_bytes`).

The replicas' leases are here too, since what a replica leaves behind ends in the log:
:func:`register` takes a replica id's lease at open (its own ``PENDING`` intents of an earlier
run become ``UNKNOWN``, ``INTERRUPTED``), and :func:`reap` is the one write that logs for other
replicas (the intents a lapsed one left ``PENDING`` become ``UNKNOWN``, ``REPLICA_LOST``, each
with its ``UNKNOWN`` record: :func:`lost_record`).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import cbor2
import psycopg
from psycopg.rows import class_row, dict_row

from servers.log import encoding
from servers.log.chain import EMPTY, LogHead, record_digest
from servers.log.decision_log import TRACE_READERS, Admitted, DecisionLogError, admit
from servers.log.encoding import encoded
from servers.store.postgres import schema
from servers.store.rows import INTERRUPTED, PENDING, UNKNOWN, ContextRow, IntentRow, StoreError
from servers.wire import reasons

T = TypeVar("T")
REPLICA_LOST = reasons.REPLICA_LOST
"""The reason of an intent left ``PENDING`` by a replica whose lease lapsed."""
_SEQ_ZERO = b"\x63seq\x00"
"""The key ``seq`` and the value 0, in canonical CBOR."""
COORDINATES = ("objective", "consumer", "environment", "deployment", "trace")
LostRecord = Callable[[IntentRow, ContextRow | None], Mapping[str, Any]]
"""The ``UNKNOWN`` record of a reaped intent (and its context, if stored)."""
_NO_RECORD = ("log_replica", "log_replica_seq", "log_ref", "log_event", "log_head", "log_tail")
TRACE = "SELECT record FROM decision_log WHERE context_ref = %s ORDER BY seq"
EVERY_RECORD = "SELECT record FROM decision_log ORDER BY seq"
LAST_RECORD = "SELECT seq, record FROM decision_log ORDER BY seq DESC LIMIT 1"


@dataclass(frozen=True, slots=True)
class Entry:
    """A record ready for the table: its canonical CBOR before and after its ``seq`` value,
    its ``contextRef`` (None when it has none) and its event."""

    context_ref: str | None
    event: str
    head: bytes
    tail: bytes


def entry(fields: Admitted) -> Entry:
    """Encode an admitted record (``servers.log.encoding.admit``) for the table, in record
    format 1 (``encoding.unchained``: ``v`` 1, no ``prev``). The order of a canonical map's
    keys does not depend on its values, and a map's header counts entries, not bytes, so
    ``head + cbor_uint(seq) + tail`` is ``encoded(unchained(fields), seq)`` for any seq."""
    record = encoding.unchained(fields)
    zero = encoded(dict(record), 0)
    at = zero.find(_SEQ_ZERO)
    if at >= 0 and zero.find(_SEQ_ZERO, at + 1) < 0:
        value_at = at + len(_SEQ_ZERO) - 1
    else:  # the bytes occur in a value too: find the seq's by changing it
        one = encoded(dict(record), 1)
        value_at = next(i for i, (a, b) in enumerate(zip(zero, one, strict=True)) if a != b)
    ref = fields.get("contextRef")
    head, tail = zero[:value_at], zero[value_at + 1 :]
    return Entry(ref if type(ref) is str else None, str(fields["event"]), head, tail)


class Sequencer:
    """A replica's name in the log and its per-replica sequence, which continues from the last
    ``replica_seq`` it wrote (its lease makes it the only writer under its id). It only grows,
    with gaps: a number is taken before the statement that may write the record (a claim that
    found its callId taken, a transaction rolled back)."""

    def __init__(self, replica: str, last: int) -> None:
        self.replica = replica
        self._next = itertools.count(last + 1)
        self._lock = threading.Lock()

    def params(self, found: Entry | None) -> dict[str, Any]:
        """The parameters of ``pg_schema.LOG_ARGS`` for ``found``, with the next ``replica_seq``;
        for no record, all NULL."""
        if found is None:
            return dict.fromkeys(_NO_RECORD)
        with self._lock:
            number = next(self._next)
        return {
            "log_replica": self.replica,
            "log_replica_seq": number,
            "log_ref": found.context_ref,
            "log_event": found.event,
            "log_head": found.head,
            "log_tail": found.tail,
        }


def stored_records(url: str, timeout_s: int = 10) -> Iterator[bytes]:
    """Every record of the decision log table at ``url``, in ``seq`` order, from one snapshot:
    what ``seif trace export --store`` writes. No replica is registered, nothing is written;
    a failure is a :class:`StoreError` that names the store without its password."""
    try:
        for (raw,) in schema.snapshot(url, timeout_s, EVERY_RECORD):
            yield bytes(raw)
    except psycopg.Error as exc:
        message = schema.scrubbed(str(exc).strip(), url)
        raise StoreError(f"the store `{schema.redacted(url)}` cannot be read: {message}") from None


def decoded(raw: bytes) -> dict[str, Any]:
    """One record of the table, decoded as the file log's readers decode one (duplicate keys
    refused; a map)."""
    try:
        value = cbor2.CBORDecoder(io.BytesIO(raw), allow_duplicate_keys=False).decode()
    except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError):
        value = None
    if type(value) is not dict:
        raise DecisionLogError("a row of `decision_log` does not hold a record")
    return value


class LogDatabase(Protocol):
    """What :class:`PgDecisionLog` needs of its store (``servers.store.postgres.store.PgStore``)."""

    def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    def stream(self, sql: str) -> Iterator[tuple[Any, ...]]: ...

    async def append_entry(self, found: Entry) -> int: ...


class PgDecisionLog:
    """The decision log of a PostgreSQL store, with the methods the runtime calls on a
    :class:`~servers.log.decision_log.DecisionLog`. Appends are single-statement transactions
    on the store's pool, committed before they return; traces are read and rendered in one of
    :data:`TRACE_READERS` threads, each on its own connection."""

    def __init__(self, db: LogDatabase) -> None:
        self._db = db
        self._closed = False
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None

    def observe_fsyncs(self, observe: Callable[[float], None]) -> None:
        """Nothing to observe: the database syncs its own (``seif_store_commit_seconds``
        counts each write's transaction)."""

    async def append_async(self, record: Mapping[str, Any]) -> int:
        """Check a record (refused ones raise here), append it and return its ``seq``."""
        return await self.append_admitted(admit(record))

    async def append_admitted(self, prepared: Admitted) -> int:
        """:meth:`append_async` of a record checked already by ``admit``."""
        self._check_open()
        return await self._db.append_entry(entry(prepared))

    def trace(self, context_ref: str) -> list[dict[str, Any]]:
        """The records of one context, in ``seq`` order (an index range of the table)."""
        self._check_open()
        return [decoded(bytes(raw)) for (raw,) in self._db.select(TRACE, (context_ref,))]

    async def trace_async(self, context_ref: str, render: Callable[[list[dict[str, Any]]], T]) -> T:
        """:meth:`trace`, then ``render(records)``, both in a reader thread: the event loop only
        waits."""
        readers = self._reader_threads()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(readers, lambda: render(self.trace(context_ref)))

    def head(self) -> LogHead:
        """The record of the table's highest ``seq`` (committed and visible now): its seq and
        the digest of its bytes (both None for an empty table)."""
        self._check_open()
        found = self._db.select(LAST_RECORD, ())
        if not found:
            return EMPTY
        seq, raw = found[0]
        return LogHead(int(seq), record_digest(bytes(raw)))

    async def head_async(self) -> LogHead:
        """:meth:`head`, read in a reader thread: the event loop only waits."""
        readers = self._reader_threads()
        return await asyncio.get_running_loop().run_in_executor(readers, self.head)

    def _reader_threads(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            if self._readers is None:
                self._readers = ThreadPoolExecutor(TRACE_READERS, thread_name_prefix="pg-traces")
            return self._readers

    def record_bytes(self) -> Iterator[bytes]:
        """Every record's bytes in ``seq`` order, from one snapshot: concatenated, a decision-log
        file (``seif trace export``)."""
        self._check_open()
        for (raw,) in self._db.stream(EVERY_RECORD):
            yield bytes(raw)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record, decoded, in ``seq`` order (:meth:`record_bytes`)."""
        for raw in self.record_bytes():
            yield decoded(raw)

    def _check_open(self) -> None:
        if self._closed:
            raise DecisionLogError("the decision log is closed")

    def close(self) -> None:
        """Refuse further use and stop the trace readers (the store owns the connections).
        Idempotent."""
        with self._lock:
            self._closed = True
            readers, self._readers = self._readers, None
        if readers is not None:
            readers.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PgDecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# replicas: their leases, and what one that is gone leaves

REGISTER = (
    "INSERT INTO replicas (replica_id, incarnation, lease_expires_at, started_at)"
    " VALUES (%(replica)s, %(incarnation)s, %(expires)s, %(now)s) ON CONFLICT (replica_id)"
    " DO UPDATE SET incarnation = EXCLUDED.incarnation, started_at = EXCLUDED.started_at,"
    " lease_expires_at = EXCLUDED.lease_expires_at, reaped_at = NULL"
    " WHERE replicas.reaped_at IS NOT NULL OR replicas.lease_expires_at <= %(now)s RETURNING 1"
)
MAKE_UNKNOWN = (
    "WITH done AS (UPDATE intents SET status = %(unknown)s, reason = %(reason)s,"
    " completed_at = %(now)s WHERE status = %(pending)s AND replica_id = ANY(%(replicas)s)"
    f" RETURNING seq, {schema.INTENT_COLUMNS})"
    f" SELECT {schema.INTENT_COLUMNS} FROM done ORDER BY seq"
)
RENEW = (
    "UPDATE replicas SET lease_expires_at = greatest(lease_expires_at, %(expires)s)"
    " WHERE replica_id = %(replica)s AND incarnation = %(incarnation)s AND reaped_at IS NULL"
    " AND lease_expires_at > %(now)s RETURNING 1"
)
RELEASE = (
    "UPDATE replicas SET lease_expires_at = 0"
    " WHERE replica_id = %s AND incarnation = %s AND reaped_at IS NULL"
)
LAPSED = (
    "SELECT replica_id FROM replicas WHERE replica_id <> %(replica)s AND reaped_at IS NULL"
    " AND lease_expires_at <= %(now)s ORDER BY replica_id FOR UPDATE"
)
MARK_REAPED = "UPDATE replicas SET reaped_at = %(now)s WHERE replica_id = ANY(%(replicas)s)"
LOCK_LOST_CONTEXTS = (
    f"SELECT {schema.CONTEXT_COLUMNS} FROM contexts WHERE context_ref IN (SELECT context_ref"
    " FROM intents WHERE status = %(pending)s AND replica_id = ANY(%(replicas)s))"
    " ORDER BY context_ref FOR UPDATE"
)
LAST_REPLICA_SEQ = "SELECT coalesce(max(replica_seq), 0) FROM decision_log WHERE replica = %s"


def register(
    conn: psycopg.Connection[Any], replica: str, incarnation: str, now: int, lease_ms: int
) -> tuple[tuple[IntentRow, ...], int]:
    """Take the lease of ``replica`` as ``incarnation`` (refused while another holds it),
    make what an earlier run of it left ``PENDING`` ``UNKNOWN`` (``INTERRUPTED``) and find its
    last ``replica_seq``, in one transaction. An earlier incarnation still running (presumed
    dead) can then neither renew, claim nor release: the lease is no longer its."""
    params: dict[str, Any] = {"replica": replica, "now": now, "expires": now + lease_ms}
    params["incarnation"] = incarnation
    with conn.transaction():
        if conn.execute(REGISTER, params).fetchone() is None:
            held = "SELECT lease_expires_at FROM replicas WHERE replica_id = %s"
            found = conn.execute(held, (replica,)).fetchone()
            until = found[0] if found is not None else "?"
            raise StoreError(
                f"replica `{replica}` holds a lease until {until}: another process runs under"
                " this id (give another `--replica-id`, or wait for its lease to lapse)"
            )
        params.update(replicas=[replica], unknown=UNKNOWN, reason=INTERRUPTED, pending=PENDING)
        with conn.cursor(row_factory=class_row(IntentRow)) as cur:
            interrupted = tuple(cur.execute(MAKE_UNKNOWN, params).fetchall())
        last = conn.execute(LAST_REPLICA_SEQ, (replica,)).fetchone()
    return interrupted, int(last[0]) if last is not None else 0


def renew(
    conn: psycopg.Connection[Any], replica: str, incarnation: str, now_ms: int, lease_ms: int
) -> bool:
    """Extend a lease to ``now_ms + lease_ms`` while ``incarnation`` holds it; False when it
    holds it no more (lapsed by ``now_ms``, reaped, or taken by a later incarnation)."""
    params = {"replica": replica, "incarnation": incarnation, "now": now_ms}
    return conn.execute(RENEW, {**params, "expires": now_ms + lease_ms}).fetchone() is not None


def lost_record(intent: IntentRow, context: ContextRow | None) -> dict[str, Any]:
    """The ``UNKNOWN`` record of a reaped intent, shaped as the runtime's records of interrupted
    intents, from what the store holds (the context's build, binding revision, coordinates)."""
    coords = context.coordinates if context is not None else {}
    return {
        "event": "UNKNOWN",
        "build": context.build if context is not None else "",
        "environment": coords.get("environment", ""),
        "bindingRevision": context.binding_revision if context is not None else None,
        "coordinates": {k: coords.get(k, "") for k in COORDINATES},
        "contextRef": intent.context_ref,
        "tool": intent.tool,
        "callId": intent.call_id,
        "fingerprint": intent.fingerprint,
        "status": UNKNOWN,
        "reason": intent.reason,
    }


def reap(
    conn: psycopg.Connection[Any], sequencer: Sequencer, now_ms: int, make: LostRecord
) -> tuple[IntentRow, ...]:
    """In one transaction: the other replicas whose lease lapsed by ``now_ms`` are marked
    reaped (locked first: their claims in flight end before, and later ones are refused),
    their contexts with ``PENDING`` intents are locked, in order, and those intents become
    ``UNKNOWN`` (``REPLICA_LOST``), each with the record ``make`` gives it."""
    params: dict[str, Any] = {"replica": sequencer.replica, "now": now_ms, "pending": PENDING}
    with conn.transaction():
        lost = [r[0] for r in conn.execute(LAPSED, params).fetchall()]
        if not lost:
            return ()
        params.update(replicas=lost, unknown=UNKNOWN, reason=REPLICA_LOST)
        conn.execute(MARK_REAPED, params)
        with conn.cursor(row_factory=dict_row) as cur:
            locked = cur.execute(LOCK_LOST_CONTEXTS, params).fetchall()
        contexts = {c["context_ref"]: schema.context_row(c) for c in locked}
        with conn.cursor(row_factory=class_row(IntentRow)) as cur:
            reaped = cur.execute(MAKE_UNKNOWN, params).fetchall()
        made = [make(i, contexts.get(i.context_ref)) for i in reaped]
        entries = [entry(encoding.admit(record, now_ms)) for record in made]
        if entries:
            with conn.cursor() as cur:
                cur.executemany(schema.APPEND, [sequencer.params(e) for e in entries])
    return tuple(reaped)

"""Group commit for the dispatch store: one thread, one connection, one transaction per batch.

Callers hand a :class:`GroupWriter` jobs (a function of the connection) and get a
``concurrent.futures.Future``. The writer thread takes every job waiting, runs them in order in
one ``BEGIN IMMEDIATE`` transaction and commits once; with the connection's
``synchronous=FULL`` that one commit is one durable WAL sync for the whole batch.
Only then are the futures resolved: a caller learns a job's result once what the job wrote is
durable, and a job that raised wrote nothing (the others stand). A batch whose transaction
fails as a whole (the busy timeout against another process, a full disk, a failed commit, a
job that raised after it wrote) fails every job in it, and nothing of it is written.

Jobs see the writes of the jobs before them in the batch: the store relies on that to arbitrate
once-only dispatch and call limits against everything committed or earlier in the batch.

A job may carry a decision-log record (:class:`Logged`): after the commit, the writer thread
appends the records of the batch's successful jobs to the decision log, with one fsync, and
only then answers. A write and its record thus cost one hand-off between threads, not two, and
the record follows its commit (a crash in between leaves a committed write without its record,
never a record of a write that did not happen). A record that could not be written fails its
job's waiter (the write itself stands, as it would have with a separate append).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from servers.log.decision_log import Admitted, DecisionLog, observed
from servers.support import handoff

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]
Logged = tuple[DecisionLog, Callable[[Any], Admitted | None]]
"""The log, and what to append to it given the job's result (None: nothing)."""
BatchHook = Callable[[sqlite3.Connection], None]
"""Run first in every batch's transaction (the store's mark of the log's durable seq)."""
_Item = tuple[Job, handoff.Waiter, Logged | None]

MAX_BATCH = 256
LINGER_S = 0.002
"""Group-commit delay: while writes arrive fast enough that at least :data:`EXPECTED` more are
due within it, a batch waits this long for them before it commits. Under load, fewer and
larger commits cost far less CPU per write (fewer fsyncs, fewer thread wake-ups on both
sides) for at most two milliseconds of latency; at a lower rate a write never waits."""
EXPECTED = 2.0
QUIET_S = 0.05
"""After this long without a write the arrival rate is taken to be zero again."""


class WriterClosed(RuntimeError):
    """A job submitted after :meth:`GroupWriter.close`."""


class GroupWriter:
    """The single writer of one SQLite connection (opened with ``isolation_level=None`` and
    ``check_same_thread=False``). The thread starts with the first job queued."""

    def __init__(
        self,
        db: sqlite3.Connection,
        *,
        name: str = "store-writer",
        linger_s: float = LINGER_S,
        on_batch: BatchHook | None = None,
    ) -> None:
        self._db = db
        self._name = name
        self._linger_s = linger_s
        self._on_batch = on_batch
        self.on_commit: Callable[[float], None] | None = None
        """Told the seconds of every commit (a metric), from the writer thread."""
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def run_inline(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run one job as its own batch in the calling thread; only before the first job is
        queued (the store's migration and recovery, at open)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("the writer thread owns the connection")
            done: Future[T] = Future()
            _run_batch(self._db, [(job, done, None)])
        return done.result()

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Queue ``job``; its future is done after the batch that ran it has committed."""
        done: Future[T] = Future()
        self._put((job, done, None))
        return done

    async def run(self, job: Callable[[sqlite3.Connection], T], logged: Logged | None = None) -> T:
        """:meth:`submit` for an event loop: the result once the batch has committed (and the
        job's record, if ``logged``, is in the log). A job not yet started when the awaiting
        task is cancelled does not run."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._put((job, done, logged))
        return await done

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._closed:
                raise WriterClosed("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_serve,
                    args=(self._db, self._queue, self._linger_s, self._on_batch, self._committed),
                    name=self._name,
                    daemon=True,
                )
                self._thread.start()
            self._queue.put(item)

    def close(self) -> None:
        """Run what is queued, then stop the thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(None)
        if thread is not None:
            thread.join()

    def _committed(self, seconds: float) -> None:
        if self.on_commit is not None:
            self.on_commit(seconds)

    def stop_soon(self) -> None:
        """Let the thread end after what is queued (for an unclosed store being collected)."""
        self._queue.put(None)


def _serve(
    db: sqlite3.Connection,
    jobs: queue.SimpleQueue[_Item | None],
    linger_s: float,
    on_batch: BatchHook | None,
    on_commit: Callable[[float], None] | None = None,
) -> None:
    rate = 0.0  # writes per second, smoothed over batches
    started: float | None = None  # when the previous batch began
    ended = 0.0  # when the previous batch was committed
    while True:
        first = jobs.get()
        if first is None:
            return
        now = time.monotonic()
        if now - ended > QUIET_S:
            rate, started = 0.0, None
        batch, stop = _gather(first, jobs, linger_s if rate * linger_s >= EXPECTED else 0.0)
        if started is not None:
            rate = 0.7 * rate + 0.3 * len(batch) / max(time.monotonic() - started, 1e-6)
        started = now
        try:
            _run_batch(db, batch, on_batch, on_commit)
        except Exception as exc:  # a bug past the transaction: no waiter is left hanging
            handoff.fail_unsettled([done for _, done, _ in batch], exc)
        ended = time.monotonic()
        if stop:
            return


def _gather(
    first: _Item, jobs: queue.SimpleQueue[_Item | None], linger_s: float
) -> tuple[list[_Item], bool]:
    """The batch that starts with ``first``: what is queued, plus what arrives within
    ``linger_s`` (group-commit delay); and whether the writer was told to stop."""
    batch = [first]
    deadline = time.monotonic() + linger_s
    while len(batch) < MAX_BATCH:
        remaining = deadline - time.monotonic()
        try:
            item = jobs.get(timeout=remaining) if remaining > 0 else jobs.get_nowait()
        except queue.Empty:
            break
        if item is None:
            return batch, True
        batch.append(item)
    return batch, False


def _run_batch(
    db: sqlite3.Connection,
    batch: list[_Item],
    on_batch: BatchHook | None = None,
    on_commit: Callable[[float], None] | None = None,
) -> None:
    """One transaction for the batch, ``on_batch`` first; waiters are answered only after it
    is committed (and the records of its jobs are logged). A job whose waiter has gone by the
    time its turn comes does not run."""
    claimed: list[_Item] = []
    results: list[tuple[bool, Any]] = []
    examined = 0
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            if on_batch is not None:
                on_batch(db)
            for item in batch:
                examined += 1
                if handoff.claim(item[1]):
                    claimed.append(item)
                    results.append(_run_job(db, item[0]))
            began = time.perf_counter()
            db.execute("COMMIT")
            observed(on_commit, time.perf_counter() - began)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    except BaseException as exc:  # nothing of the batch was written
        waiters = [item[1] for item in claimed]
        waiters += [done for _, done, _ in batch[examined:] if handoff.claim(done)]
        handoff.settle([(done, False, exc) for done in waiters])
        return
    outcomes = [(item[1], *result) for item, result in zip(claimed, results, strict=True)]
    handoff.settle(_logged(claimed, outcomes))


def _logged(items: list[_Item], outcomes: list[handoff.Outcome]) -> list[handoff.Outcome]:
    """Append the records of the successful jobs, one ``write_now`` (one fsync) per log; a
    record that failed fails its job's outcome."""
    pending: dict[DecisionLog, list[tuple[int, Admitted]]] = {}
    for i, ((_, _, logged), (_, ok, value)) in enumerate(zip(items, outcomes, strict=True)):
        if logged is None or not ok:
            continue
        try:
            record = logged[1](value)
        except Exception as exc:  # a bug of the caller's selector: its waiter learns of it
            outcomes[i] = (outcomes[i][0], False, exc)
            continue
        if record is not None:
            pending.setdefault(logged[0], []).append((i, record))
    for log, records in pending.items():
        written = log.write_now([record for _, record in records])
        for (i, _), result in zip(records, written, strict=True):
            if isinstance(result, Exception):
                outcomes[i] = (outcomes[i][0], False, result)
    return outcomes


def _run_job(db: sqlite3.Connection, job: Job) -> tuple[bool, Any]:
    """``(True, result)``, or ``(False, exception)`` for a job that raised having written
    nothing (the store's jobs check everything before their one write, and a statement that
    fails is undone by SQLite). A job that raised after writing, or an error that ended the
    transaction, propagates: the whole batch is rolled back and fails."""
    before = db.total_changes
    try:
        return True, job(db)
    except Exception as exc:
        if not db.in_transaction or db.total_changes != before:
            raise
        return False, exc

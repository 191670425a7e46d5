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
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from servers import handoff

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]
_Item = tuple[Job, handoff.Waiter]

MAX_BATCH = 256


class WriterClosed(RuntimeError):
    """A job submitted after :meth:`GroupWriter.close`."""


class GroupWriter:
    """The single writer of one SQLite connection (opened with ``isolation_level=None`` and
    ``check_same_thread=False``). The thread starts with the first job queued."""

    def __init__(self, db: sqlite3.Connection, *, name: str = "store-writer") -> None:
        self._db = db
        self._name = name
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
            _run_batch(self._db, [(job, done)])
        return done.result()

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Queue ``job``; its future is done after the batch that ran it has committed."""
        done: Future[T] = Future()
        self._put((job, done))
        return done

    def call(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`submit` and wait."""
        return self.submit(job).result()

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`submit` for an event loop: the result once the batch has committed. A job
        not yet started when the awaiting task is cancelled does not run."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._put((job, done))
        return await done

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._closed:
                raise WriterClosed("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_serve, args=(self._db, self._queue), name=self._name, daemon=True
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

    def stop_soon(self) -> None:
        """Let the thread end after what is queued (for an unclosed store being collected)."""
        self._queue.put(None)


def _serve(db: sqlite3.Connection, jobs: queue.SimpleQueue[_Item | None]) -> None:
    while True:
        first = jobs.get()
        if first is None:
            return
        batch, stop = [first], False
        while len(batch) < MAX_BATCH:
            try:
                item = jobs.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
        _run_batch(db, batch)
        if stop:
            return


def _run_batch(db: sqlite3.Connection, batch: list[_Item]) -> None:
    """One transaction for the batch; waiters are answered only after it is committed. A job
    whose waiter has gone by the time its turn comes does not run."""
    claimed: list[handoff.Waiter] = []
    results: list[tuple[bool, Any]] = []
    examined = 0
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            for job, done in batch:
                examined += 1
                if handoff.claim(done):
                    claimed.append(done)
                    results.append(_run_job(db, job))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    except BaseException as exc:  # nothing of the batch was written
        claimed += [done for _, done in batch[examined:] if handoff.claim(done)]
        handoff.settle([(done, False, exc) for done in claimed])
        return
    handoff.settle([(done, *result) for done, result in zip(claimed, results, strict=True)])


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

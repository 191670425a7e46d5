"""The decision log: an append-only CBOR sequence (RFC 8742) in ``DATA_DIR/decisions.cbor``.

Each record is the canonical CBOR (``policy.json.canonical.canonical_cbor``) of one map with the
envelope ``v`` (format version, 2), ``seq`` (1, 2, 3, ... across reopenings), ``at`` (integer
milliseconds since the epoch), ``event`` and ``prev`` (the digest of the previous record's
bytes, null on the first; a log of format 1 is continued: ``servers.log.chain``), plus the
event's own fields. A record reaches the file in one ``os.write`` on an ``O_APPEND``
descriptor and, by default, is fsynced before :meth:`DecisionLog.append` returns.

Durability is group-committed: one ``fsync`` covers every record written before it, so callers
appending at the same time share one. A record is durable when ``synced`` (the last seq an
fsync covered) reaches its seq; whoever waits for that and finds no fsync covering it yet takes
the sync lock, checks again and fsyncs everything written so far.

Readers (:func:`read_records`, ``servers.log.reading``) take no lock and never block the
writer: they decode a consistent prefix, and a torn final record, left by a crash or still being
written, is not part of it. Only what can be a torn record is taken for one (shorter than the
largest record the writer writes, and holding no intact record: a damaged length reads to the
end of the file); when the log is opened it is cut off, after its bytes are saved beside the
log (``decisions.cbor.torn-<offset>``). The writer keeps a bounded index of the most recently
written contexts' records (``servers.log.index``), built during its pass at open and kept by
every append, so that :meth:`DecisionLog.trace` reads one context's records without a pass
over the file; a context the index no longer holds is found by a scan, in the reader thread.
The format is documented in ``docs/data-directory.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from servers.log import chain, encoding
from servers.log.chain import EMPTY, LogHead
from servers.log.encoding import (
    ENVELOPE,
    EVENTS,
    FORBIDDEN_FIELDS,
    FORMAT_VERSION,
    Admitted,
    DecisionLogError,
    Fragment,
    encoded,
    fragment,
    record_fields_allowed,
)
from servers.log.index import MAX_CONTEXTS, MAX_RECORDS, TraceIndex
from servers.log.reading import (
    CborItemError,
    ChainBroken,
    DamagedRecord,
    LogScan,
    TornTail,
    Visitor,
    cbor_items,
    find,
    read_at,
    read_records,
    scan,
)
from servers.support import handoff

__all__ = [
    "ENVELOPE",
    "EVENTS",
    "FORBIDDEN_FIELDS",
    "FORMAT_VERSION",
    "DecisionLog",
    "DecisionLogError",
    "Fragment",
    "Admitted",
    "fragment",
    "admit",
    "read_records",
    "record_fields_allowed",
    "cbor_items",
    "CborItemError",
    "TornTail",
    "LogScan",
    "Visitor",
    "DamagedRecord",
    "ChainBroken",
    "LogHead",
    "TailNotSaved",
    "save_tail",
]

T = TypeVar("T")
TRACE_READERS = 2
"""Threads that read traces (:meth:`DecisionLog.trace_async`), off the event loop."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def admit(record: Mapping[str, Any]) -> Admitted:
    """Check a record now (``at`` defaults to the wall clock), to be written later by
    :meth:`DecisionLog.write_now` or :meth:`DecisionLog.append_admitted`: a refused record
    raises :class:`DecisionLogError` here, before anything is written anywhere (see
    :mod:`servers.log.encoding`)."""
    return encoding.admit(record, _now_ms())


_Item = tuple[Admitted, "asyncio.Future[int]"]


class DecisionLog:
    """The single writer of a decision log (the data directory's owner). Thread-safe.

    ``_lock`` orders the writes (seq, file offset and the digest of the last record, the next
    one's ``prev``); ``_sync_lock`` serialises the fsyncs.
    ``_synced`` is the last seq known durable; it only grows. The descriptor is closed last,
    by :meth:`close`, holding both."""

    def __init__(
        self, path: Path, fd: int, scanned: LogScan, fsync_every: int, index: TraceIndex
    ) -> None:
        self.path = path
        self._fd = fd
        self._closed = False
        self._end = scanned.end
        self._seq = scanned.last_seq
        self._head = scanned.head
        self._synced = scanned.last_seq
        self._fsync_every = fsync_every
        self.on_fsync: Callable[[float], None] | None = None
        """Told the seconds of every fsync of appends (a metric), from the fsyncing thread."""
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Item | None] | None = None
        self._writer: threading.Thread | None = None
        self._index = index
        self._readers: ThreadPoolExecutor | None = None
        self.scanned = scanned
        """What the pass at open found (records, last seq, torn tail)."""
        self.dropped_tail = scanned.torn
        """Bytes of a torn final record (a crash mid-append) removed when the log was opened."""
        self.saved_tail: Path | None = None
        """Where those bytes were saved (:func:`save_tail`), if any were cut."""

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        fsync_every: int = 1,
        visit: Visitor | None = None,
        accept: Callable[[LogScan], None] | None = None,
        trace_contexts: int = MAX_CONTEXTS,
        trace_records: int = MAX_RECORDS,
    ) -> DecisionLog:
        """Open for appending, creating the file (0600), after one pass over every record
        (checked; indexed by contextRef for :meth:`trace`; each handed to ``visit``, if
        given). ``seq`` continues from the last complete record. ``accept``, if given, sees
        the outcome of the pass before anything is changed and may raise to refuse the log.
        Then a torn final record is saved beside the log (:func:`save_tail`) and cut off, so
        that the next append starts on a record boundary. A corrupt record, or a final one
        that cannot be torn (:func:`~servers.log.reading.tear`), is a :class:`DamagedRecord`,
        and a break of the chain of record digests a :class:`ChainBroken` naming the seq
        where it breaks: the file is left as it is.

        ``trace_contexts``, ``trace_records``: the bounds of the traces index
        (:class:`~servers.log.index.TraceIndex`).

        ``fsync_every``: a record is durable before its append returns once N records are
        not known durable (1, the default: every record is durable when ``append`` returns);
        0 syncs only in :meth:`flush` and :meth:`close`.
        """
        if type(fsync_every) is not int or fsync_every < 0:
            raise ValueError("fsync_every must be an integer >= 0")
        path = Path(path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        index = TraceIndex(trace_contexts, trace_records)  # bounds checked before any open
        fd = os.open(path, flags, 0o600)

        def seen(offset: int, length: int, record: dict[str, Any]) -> None:
            index.add(record, offset, length)
            if visit is not None:
                visit(offset, length, record)

        try:
            with path.open("rb") as fp:
                scanned = scan(fp, seen)
            if accept is not None:
                accept(scanned)
            saved = save_tail(path, scanned) if scanned.torn else None
            if saved is not None:
                os.ftruncate(fd, scanned.end)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        log = cls(path, fd, scanned, fsync_every, index)
        log.saved_tail = saved
        return log

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def head(self) -> LogHead:
        """The last record written: its seq and digest, read together (both None for an
        empty log). Not necessarily durable yet (:attr:`durable_seq`)."""
        with self._lock:
            seq, digest = self._seq, self._head
        return LogHead(seq, digest) if digest is not None else EMPTY

    async def head_async(self) -> LogHead:
        """:attr:`head` (nothing to wait for: it is in memory)."""
        return self.head

    @property
    def durable_seq(self) -> int:
        """The last seq an fsync has covered: every record up to it is on disk."""
        return self._synced

    def append(self, record: Mapping[str, Any]) -> int:
        """Append one record (a map with ``event`` and the event's fields; ``at`` defaults to
        the wall clock) and return its ``seq``, durable as ``fsync_every`` says: the caller
        waits for an fsync covering it, its own or one another appender is running. Refuses
        forbidden keys, values that are not JSON, and a caller-set ``v`` or ``seq``."""
        fields = admit(record)
        with self._lock:
            if self._closed:
                raise DecisionLogError(f"decision log `{self.path}` is closed")
            seq = self._write_fields(fields)
        if self._must_sync(seq):
            self._sync_through(seq)
        return seq

    async def append_async(self, record: Mapping[str, Any]) -> int:
        """:meth:`append` for an event loop: the record is checked here (a refused record
        raises here), then a background thread writes it, in the order of the calls, and the
        seq is returned once the record is durable as ``fsync_every`` says. One fsync covers
        every record that thread wrote before it, and one wake-up of the loop answers them
        all. A cancelled caller's record is written all the same."""
        return await self.append_admitted(admit(record))

    async def append_admitted(self, prepared: Admitted) -> int:
        """:meth:`append_async` of a record checked already by :func:`admit`."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise DecisionLogError(f"decision log `{self.path}` is closed")
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                self._writer = threading.Thread(
                    target=_run_writer,
                    args=(weakref.ref(self), self._queue),
                    name="decision-log-writer",
                    daemon=True,
                )
                self._writer.start()
                weakref.finalize(self, self._queue.put, None)
            self._queue.put((prepared, done))
        return await done

    def _write_fields(self, fields: Admitted) -> int:
        """Link to the last record, encode with the next seq, write and index; holding
        ``_lock``."""
        seq = self._seq + 1
        fields["prev"] = self._head
        data = encoded(fields, seq)
        offset = self._end
        self._write(data)
        self._seq, self._head = seq, chain.record_digest(data)
        self._index.add(fields, offset, len(data))
        return seq

    def _must_sync(self, seq: int) -> bool:
        every = self._fsync_every
        return every > 0 and seq - self._synced >= every

    def _write(self, data: bytes) -> None:
        """One ``os.write``; if it fails or is short (a full disk), cut the file back to the
        last record boundary so that no torn record precedes the next one."""
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"short write: {written} of {len(data)} bytes")
        except BaseException:
            os.ftruncate(self._fd, self._end)
            raise
        self._end += written

    def _sync_through(self, seq: int) -> None:
        """Return once an fsync covering ``seq`` has completed (group commit)."""
        with self._sync_lock:
            if self._synced >= seq:
                return  # another caller's fsync covered it while this one waited
            written = self._seq  # every record up to here is in the file already
            began = time.perf_counter()
            os.fsync(self._fd)
            self._synced = max(self._synced, written)
            observed(self.on_fsync, time.perf_counter() - began)

    def observe_fsyncs(self, observe: Callable[[float], None]) -> None:
        """Tell ``observe`` the seconds of every fsync of appends (a metric)."""
        self.on_fsync = observe

    def write_now(self, records: list[Admitted], *, sync: bool = True) -> list[int | Exception]:
        """Write prepared records in order, from the calling thread, then fsync once as
        ``fsync_every`` says (``sync`` False: not now, the next append's fsync, or the close,
        covers them: records that need not be durable when written, a shadow build's); per
        record its seq, or the exception that kept it out (a full disk; a closed log). A
        failed fsync fails every record of the call."""
        results: list[int | Exception] = []
        for fields in records:
            try:
                with self._lock:
                    if self._fd < 0:  # closed (records queued before close are written)
                        raise DecisionLogError(f"decision log `{self.path}` is closed")
                    results.append(self._write_fields(fields))
            except Exception as exc:
                results.append(exc)
        last = max((r for r in results if isinstance(r, int)), default=0)
        try:
            if sync and self._must_sync(last):
                self._sync_through(last)
        except Exception as exc:
            results = [exc for _ in results]
        return results

    def _write_batch(self, batch: list[_Item]) -> None:
        """The background thread's work: write each record, one fsync, then the answers."""
        results = self.write_now([fields for fields, _ in batch])
        outcomes: list[handoff.Outcome] = [
            (done, True, r) if isinstance(r, int) else (done, False, r)
            for (_, done), r in zip(batch, results, strict=True)
        ]
        handoff.settle([o for o in outcomes if handoff.claim(o[0])])

    def flush(self) -> None:
        """Make every appended record durable."""
        with self._lock:
            if self._closed:
                return
        self._sync_through(self._seq)

    def trace(self, context_ref: str) -> list[dict[str, Any]]:
        """The records of one context, in order: exactly those :func:`read_records` would
        yield with this ``contextRef``, up to the last record written. Those the index holds
        are read by position (one read each); the rest, for a context it dropped or never
        held, by a scan of the part of the file where they can be
        (:class:`~servers.log.index.TraceIndex`), after which the index holds the context
        whole. Takes ``_lock`` only to copy positions and bounds."""
        with self._lock:
            if self._closed:
                raise DecisionLogError(f"decision log `{self.path}` is closed")
            entry, positions = self._index.lookup(context_ref)
            below = self._index.dropped_below if entry is None else entry.below
        older, found = find(self.path, context_ref, below) if below else ([], array("Q"))
        if entry is None:
            return older
        records = read_at(self.path, positions, context_ref)
        if below:
            with self._lock:
                self._index.complete(context_ref, entry, found)
        return older + records

    def bound_traces(self, max_contexts: int, max_records: int) -> tuple[int, int]:
        """Change the traces index's bounds (what is beyond them is dropped at once); returns
        how many contexts and positions it holds then."""
        with self._lock:
            self._index.resize(max_contexts, max_records)
            return len(self._index), self._index.records

    async def trace_async(self, context_ref: str, render: Callable[[list[dict[str, Any]]], T]) -> T:
        """:meth:`trace`, then ``render(records)`` (the encoding of a response, say), both in
        one of the log's :data:`TRACE_READERS` threads: the event loop only waits."""
        with self._lock:
            if self._closed:
                raise DecisionLogError(f"decision log `{self.path}` is closed")
            if self._readers is None:
                self._readers = ThreadPoolExecutor(
                    TRACE_READERS, thread_name_prefix="decision-log-traces"
                )
            readers = self._readers
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(readers, lambda: render(self.trace(context_ref)))

    def close(self) -> None:
        """Write what is queued, fsync what is pending and close. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # no more appends
            pending, writer, readers = self._queue, self._writer, self._readers
        if readers is not None:
            readers.shutdown(wait=False, cancel_futures=True)
        if pending is not None and writer is not None:
            pending.put(None)  # after every record already queued
            writer.join()
        with self._lock, self._sync_lock:
            fd, self._fd = self._fd, -1
            try:
                if self._synced < self._seq:
                    os.fsync(fd)
                    self._synced = self._seq
            finally:
                os.close(fd)

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def save_tail(path: Path, scanned: LogScan) -> Path:
    """Save the torn tail ``scanned`` found (``scanned.torn`` bytes at ``scanned.end``) to
    ``<log>.torn-<offset>`` beside the log, mode 0600, fsynced with its directory, before it
    is cut: no byte is destroyed. Written under a temporary name and hard-linked into place,
    so the name only appears whole; one already there with the same bytes (an earlier start
    that stopped before the cut) is kept, one with other bytes is refused."""
    with path.open("rb") as fp:
        fp.seek(scanned.end)
        data = fp.read()
    if len(data) != scanned.torn:
        raise DecisionLogError(f"decision log `{path}` changed while it was opened")
    side = path.with_name(f"{path.name}.torn-{scanned.end}")
    temporary = side.with_name(side.name + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(temporary, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, side, follow_symlinks=False)
    except FileExistsError:
        if side.is_symlink() or not side.is_file() or side.read_bytes() != data:
            raise TailNotSaved(side) from None
    finally:
        temporary.unlink()
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return side


def observed(on: Callable[[float], None] | None, seconds: float) -> None:
    """Tell a metric ``seconds``; its failure never turns an fsync (or a commit) into a failed
    write."""
    if on is not None:
        with contextlib.suppress(Exception):  # a metric must not fail a durable write
            on(seconds)


class TailNotSaved(DecisionLogError):
    """The side file for a torn tail exists already with other bytes: nothing is cut."""

    def __init__(self, side: Path) -> None:
        super().__init__(f"`{side.name}` exists already and holds other bytes")
        self.side = side


def _run_writer(ref: weakref.ref[DecisionLog], pending: queue.SimpleQueue[_Item | None]) -> None:
    """The background thread of :meth:`DecisionLog.append_async`: batches of what is queued. Holds
    the log only while it writes, so that an unclosed log can still be collected."""
    while True:
        first = pending.get()
        if first is None:
            return
        batch, stop = [first], False
        while not stop:
            try:
                item = pending.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
            else:
                batch.append(item)
        log = ref()
        if log is None:  # collected unclosed: nothing of the batch is written
            lost = DecisionLogError("the decision log was not closed")
            handoff.settle([(done, False, lost) for _, done in batch])
            return
        log._write_batch(batch)
        del log
        if stop:
            return

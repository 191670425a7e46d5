"""The decision log: an append-only CBOR sequence (RFC 8742) in ``DATA_DIR/decisions.cbor``.

Each record is the canonical CBOR (``policy.canonical.canonical_cbor``) of one map with the
envelope ``v`` (format version, 1), ``seq`` (1, 2, 3, ... across reopenings), ``at`` (integer
milliseconds since the epoch) and ``event``, plus the event's own fields. A record reaches the
file in one ``os.write`` on an ``O_APPEND`` descriptor and, by default, is fsynced before
:meth:`DecisionLog.append` (or :meth:`DecisionLog.append_async`) returns.

Durability is group-committed: one ``fsync`` covers every record written before it, so callers
appending at the same time share one. A record is durable when ``synced`` (the last seq an
fsync covered) reaches its seq; whoever waits for that and finds no fsync covering it yet takes
the sync lock, checks again and fsyncs everything written so far.

Readers (:func:`read_records`) take no lock and never block the writer: they decode a
consistent prefix, and a torn final record, left by a crash or still being written, is not
part of it. The format is documented in ``docs/data-directory.md``.
"""

from __future__ import annotations

import asyncio
import io
import os
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import cbor2

from policy.canonical import EncodingError, canonical_cbor
from servers.log import encoding
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
]

_CHUNK = 1 << 16


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def admit(record: Mapping[str, Any]) -> Admitted:
    """Check a record now (``at`` defaults to the wall clock), to be written later by
    :meth:`DecisionLog.write_now` or :meth:`DecisionLog.append_admitted`: a refused record
    raises :class:`DecisionLogError` here, before anything is written anywhere (see
    :mod:`servers.log.encoding`)."""
    return encoding.admit(record, _now_ms())


@dataclass(frozen=True, slots=True)
class _Scan:
    """Where the complete records end, the last seq, and the length of a torn tail."""

    end: int
    last_seq: int
    torn: int


_Item = tuple[Admitted, "asyncio.Future[int]"]


class DecisionLog:
    """The single writer of a decision log (the data directory's owner). Thread-safe.

    ``_lock`` orders the writes (seq and file offset); ``_sync_lock`` serialises the fsyncs.
    ``_synced`` is the last seq known durable; it only grows. The descriptor is closed last,
    by :meth:`close`, holding both."""

    def __init__(self, path: Path, fd: int, scan: _Scan, fsync_every: int) -> None:
        self.path = path
        self._fd = fd
        self._closed = False
        self._end = scan.end
        self._seq = scan.last_seq
        self._synced = scan.last_seq
        self._fsync_every = fsync_every
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Item | None] | None = None
        self._writer: threading.Thread | None = None
        self.dropped_tail = scan.torn
        """Bytes of a torn final record (a crash mid-append) removed when the log was opened."""

    @classmethod
    def open(cls, path: str | Path, *, fsync_every: int = 1) -> DecisionLog:
        """Open for appending, creating the file (0600). ``seq`` continues from the last
        complete record; a torn final record is cut off first, so that the next append
        starts on a record boundary. A corrupt record (not a torn tail) is an error: the
        file is left as it is.

        ``fsync_every``: a record is durable before its append returns once N records are
        not known durable (1, the default: every record is durable when ``append`` returns);
        0 syncs only in :meth:`flush` and :meth:`close`.
        """
        if type(fsync_every) is not int or fsync_every < 0:
            raise ValueError("fsync_every must be an integer >= 0")
        path = Path(path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(path, flags, 0o600)
        try:
            with path.open("rb") as fp:
                scan = _scan(fp)
            if scan.torn:
                os.ftruncate(fd, scan.end)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, scan, fsync_every)

    @property
    def last_seq(self) -> int:
        return self._seq

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
        """Encode with the next seq and write; holding ``_lock``."""
        seq = self._seq + 1
        self._write(encoded(fields, seq))
        self._seq = seq
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
            os.fsync(self._fd)
            self._synced = max(self._synced, written)

    def write_now(self, records: list[Admitted]) -> list[int | Exception]:
        """Write prepared records in order, from the calling thread, then fsync once as
        ``fsync_every`` says; per record its seq, or the exception that kept it out (a full
        disk; a closed log). A failed fsync fails every record of the call."""
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
            if self._must_sync(last):
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

    def close(self) -> None:
        """Write what is queued, fsync what is pending and close. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # no more appends
            pending, writer = self._queue, self._writer
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


class TornTail(Exception):
    """A final CBOR item that ends before it is complete: ``length`` bytes at ``offset``."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length


class CborItemError(ValueError):
    """Bytes at ``offset`` that are not a CBOR item."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"byte {offset}: {message}")
        self.offset = offset
        self.message = message


def cbor_items(fp: BinaryIO, *, limit: int | None = None) -> Iterator[tuple[int, bytes, Any]]:
    """``(offset, raw bytes, decoded value)`` of each complete item of a CBOR sequence, read a
    chunk at a time up to EOF (or ``limit`` bytes), duplicate keys refused. A trailing
    incomplete item raises :class:`TornTail`; bytes that are no CBOR, :class:`CborItemError`.
    Items are handed out one by one, never gathered."""
    buf, base, chunk, left = b"", 0, _CHUNK, limit
    while True:
        size = chunk if left is None else min(chunk, left)
        more = fp.read(size) if size > 0 else b""
        if left is not None:
            left -= len(more)
        buf += more
        stream = io.BytesIO(buf)
        decoder = cbor2.CBORDecoder(stream, allow_duplicate_keys=False)
        pos = 0
        while pos < len(buf):
            try:
                value = decoder.decode()
            except cbor2.CBORDecodeEOF:
                break
            except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError) as exc:
                raise CborItemError(base + pos, f"not a CBOR item ({exc})") from None
            end = stream.tell()
            yield base + pos, buf[pos:end], value
            pos = end
        buf, base = buf[pos:], base + pos
        if not more:
            if buf:
                raise TornTail(base, len(buf))
            return
        if pos == 0:
            chunk *= 2  # one item larger than what was read: read more at once


def _items(fp: BinaryIO) -> Iterator[tuple[int, bytes, Any]]:
    try:
        yield from cbor_items(fp)
    except CborItemError as exc:
        raise DecisionLogError(str(exc)) from None


def _checked(offset: int, raw: bytes, value: Any, last_seq: int) -> dict[str, Any]:
    """A record, checked: a map in canonical form with a known version and the next seq."""
    where = f"byte {offset}"
    if not isinstance(value, dict):
        raise DecisionLogError(f"{where}: a record must be a map")
    if value.get("v") != FORMAT_VERSION:
        raise DecisionLogError(f"{where}: unsupported record version `{value.get('v')!r}`")
    seq = value.get("seq")
    if type(seq) is not int or seq <= last_seq:
        raise DecisionLogError(f"{where}: `seq` must increase (after {last_seq})")
    try:
        canonical = canonical_cbor(value)
    except EncodingError:
        canonical = b""
    if canonical != raw:
        raise DecisionLogError(f"{where}: the record is not canonical CBOR")
    return value


def _records(fp: BinaryIO, *, tolerate_partial_tail: bool) -> Iterator[dict[str, Any]]:
    last_seq = 0
    try:
        for offset, raw, value in _items(fp):
            record = _checked(offset, raw, value, last_seq)
            last_seq = record["seq"]
            yield record
    except TornTail as torn:
        if not tolerate_partial_tail:
            raise DecisionLogError(
                f"byte {torn.offset}: a torn final record ({torn.length} bytes)"
            ) from None


def _scan(fp: BinaryIO) -> _Scan:
    end = last_seq = 0
    try:
        for offset, raw, value in _items(fp):
            last_seq = _checked(offset, raw, value, last_seq)["seq"]
            end = offset + len(raw)
    except TornTail as torn:
        return _Scan(end=torn.offset, last_seq=last_seq, torn=torn.length)
    return _Scan(end=end, last_seq=last_seq, torn=0)


def read_records(
    path: str | Path, *, tolerate_partial_tail: bool = True
) -> Iterator[dict[str, Any]]:
    """The records of a decision log, in order. Takes no lock: with a writer appending, it
    yields a consistent prefix. A torn final record is skipped (an error when
    ``tolerate_partial_tail`` is False); anything else malformed is a
    :class:`DecisionLogError`. Records are decoded with duplicate keys refused and must be in
    canonical form, with ``v`` 1 and increasing ``seq``."""
    with Path(path).open("rb") as fp:
        yield from _records(fp, tolerate_partial_tail=tolerate_partial_tail)

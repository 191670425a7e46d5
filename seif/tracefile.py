"""Decision-log files: read a CBOR-sequence or JSON Lines log, export a data directory's log.

The record format (envelope ``v``, ``seq``, ``at``, ``event``, ``prev``, then the event's
fields) is documented in ``docs/replay.md``. A log file is read as a snapshot: the bytes it had
when it was opened, so that two passes over one :class:`TraceLog` see the same records even
while a runtime appends to the file. A torn final record (a crash, or an append still in
progress) is not part of the snapshot; anything else malformed is a :class:`TraceFileError`.
A pass given a :class:`~servers.log.chain.Chain` also walks the chain of record digests (the
bytes as stored; a JSON Lines record re-encoded in canonical CBOR, which gives them back) and
stops at the first break (:class:`ChainBrokenError`); :meth:`TraceLog.verify` is that walk alone
(``seif trace verify``).

:func:`export` takes no lock and never blocks the runtime: it reads a consistent prefix of
``DATA_DIR/decisions.cbor`` (the runtime appends whole records with single ``O_APPEND``
writes) and writes it atomically (a temporary file, fsynced, then renamed), as the log's own
canonical CBOR bytes or as JSON Lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from compiler.builds.build import atomic_file
from policy.json.canonical import EncodingError, canonical_cbor
from policy.json.strict import JsonError, dump_bytes, loads
from servers.log.chain import (
    EMPTY,
    Chain,
    ChainBreak,
    LogHead,
    Verified,
    envelope_problem,
    record_digest,
)
from servers.log.decision_log import CborItemError, TornTail, cbor_items
from servers.log.reading import DamagedRecord, tear
from servers.store.sqlite.datadir import DECISION_LOG

FORMATS = ("cbor", "jsonl")
_CHUNK = 1 << 20


class TraceFileError(ValueError):
    """A log that cannot be read, or an export that cannot be written."""


class ChainBrokenError(TraceFileError):
    """A record that does not link to the record before it (``broken``: its seq and what is
    wrong), at line or byte ``offset`` of ``path``."""

    def __init__(self, path: Path, where: str, offset: int, broken: ChainBreak) -> None:
        super().__init__(
            f"{path}: {where} {offset}: the chain of record digests breaks at {broken}"
        )
        self.broken = broken


@dataclass(frozen=True, slots=True)
class Item:
    """One record: where it starts, its bytes as stored, and its decoded value."""

    offset: int
    raw: bytes
    record: dict[str, Any]


class _Envelope:
    """Checks every record's envelope: a map, format version 1, or 2 with ``prev``, linked
    into ``chain`` if there is one (before its ``seq`` is compared: a moved record is a break,
    not a ``seq`` out of order), ``seq`` increasing."""

    def __init__(self, path: Path, chain: Chain | None = None) -> None:
        self.path = path
        self.last_seq = 0
        self.chain = chain

    def check(self, offset: int, value: Any, where: str, raw: bytes = b"") -> dict[str, Any]:
        """The record ``value`` (``raw``: its bytes as stored; empty, for a JSON Lines record,
        its canonical CBOR)."""
        if type(value) is not dict:
            raise self.error(offset, where, "a record must be a map")
        problem = envelope_problem(value)
        if problem is not None:
            raise self.error(offset, where, problem)
        seq = value.get("seq")
        if type(seq) is int and self.chain is not None:
            self._link(offset, where, seq, value, raw)
        if type(seq) is not int or seq <= self.last_seq:
            raise self.error(offset, where, f"`seq` must increase (after {self.last_seq})")
        self.last_seq = seq
        return value

    def _link(self, offset: int, where: str, seq: int, value: Any, raw: bytes) -> None:
        assert self.chain is not None
        if not raw:
            try:
                raw = canonical_cbor(value)
            except EncodingError as exc:
                raise self.error(offset, where, f"not encodable at `{exc.pointer}`") from None
        broken = self.chain.link(seq, raw, value)
        if broken is not None:
            raise ChainBrokenError(self.path, where, offset, broken)

    def error(self, offset: int, where: str, message: str) -> TraceFileError:
        return TraceFileError(f"{self.path}: {where} {offset}: {message}")


@dataclass
class TraceLog:
    """A decision log file, ``cbor`` (a CBOR sequence) or ``jsonl``; ``size``: the bytes of
    the snapshot; ``torn``: bytes of a torn final record left out (known after a full pass)."""

    path: Path
    format: str
    size: int
    torn: int = 0

    def records(self, chain: Chain | None = None) -> Iterator[dict[str, Any]]:
        """The records of the snapshot in order (linked into ``chain``, if given: a break
        raises :class:`ChainBrokenError`)."""
        envelope = _Envelope(self.path, chain)
        with self._open() as fp:
            if self.format == "jsonl":
                for item in _jsonl_items(self, fp, envelope):
                    yield item.record
            else:
                for _offset, _raw, record in _cbor_items(self, fp, envelope, chain is not None):
                    yield record

    def items(self, chain: Chain | None = None) -> Iterator[Item]:
        """The records of the snapshot in order, with their offsets and the bytes they are
        stored as (linked into ``chain``, as :meth:`records` does)."""
        envelope = _Envelope(self.path, chain)
        with self._open() as fp:
            if self.format == "jsonl":
                yield from _jsonl_items(self, fp, envelope)
            else:
                for offset, raw, record in _cbor_items(self, fp, envelope, True):
                    yield Item(offset, raw, record)

    def verify(self) -> Verified:
        """Walk the chain of record digests over the snapshot (``seif trace verify``): up to
        the first break, if any. A log that cannot be read raises :class:`TraceFileError`."""
        chain = Chain()
        try:
            for _record in self.records(chain):
                pass
        except ChainBrokenError as exc:
            return chain.verified(exc.broken)
        return chain.verified()

    @contextmanager
    def _open(self) -> Iterator[BinaryIO]:
        try:
            with self.path.open("rb") as fp:
                yield fp
        except OSError as exc:
            raise TraceFileError(f"{self.path}: {exc.strerror or exc}") from None


def open_log(path: str | os.PathLike[str]) -> TraceLog:
    """A snapshot of the log at ``path``; the format is told by the first byte (a CBOR record
    is a map, ``0xa0``-``0xbf``; a JSON Lines record starts with ``{``)."""
    where = Path(path)
    try:
        with where.open("rb") as fp:
            size = os.fstat(fp.fileno()).st_size
            head = fp.read(64).lstrip()
    except OSError as exc:
        raise TraceFileError(f"{where}: {exc.strerror or exc}") from None
    return TraceLog(where, "jsonl" if head[:1] == b"{" else "cbor", size)


def _cbor_items(
    log: TraceLog, fp: BinaryIO, envelope: _Envelope, keep_raw: bool
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(offset, bytes or b"", record)`` of each complete record of the snapshot, read a
    chunk at a time; a final incomplete item is the torn tail if it can be one, as the
    runtime tells at open (``servers.log.reading.tear``: no intact record inside it, say),
    else damage. Records are handed out one by one, never gathered: a decoded record lives
    only as long as its consumer keeps it."""
    try:
        for offset, raw, value in cbor_items(fp, limit=log.size):
            record = envelope.check(offset, value, "byte", raw)
            yield offset, raw if keep_raw else b"", record
    except CborItemError as exc:
        raise envelope.error(exc.offset, "byte", exc.message) from None
    except TornTail as torn:
        try:
            tear(torn, envelope.last_seq)
        except DamagedRecord as exc:
            raise TraceFileError(f"{log.path}: {exc}") from None
        log.torn = torn.length


def _jsonl_items(log: TraceLog, fp: BinaryIO, envelope: _Envelope) -> Iterator[Item]:
    offset, number = 0, 0
    while offset < log.size:
        line = fp.readline(log.size - offset)
        number += 1
        complete = line.endswith(b"\n")
        if line.strip():
            try:
                value = loads(line)
            except JsonError as exc:
                if not complete:  # a final line being written
                    log.torn = len(line)
                    return
                raise envelope.error(number, "line", f"not a JSON object ({exc})") from None
            yield Item(offset, line, envelope.check(number, value, "line"))
        offset += len(line)
    log.torn = 0


# ---------------------------------------------------------------- export


@dataclass(frozen=True, slots=True)
class Exported:
    """What an export wrote: ``records`` from ``first_seq`` to ``last_seq``, ``torn`` bytes of
    a final record still being written left out, and ``head``: the last record's seq and the
    digest of its bytes as stored (what ``GET /v1/traces/head`` answered for it)."""

    out: Path
    format: str
    records: int
    first_seq: int | None
    last_seq: int | None
    torn: int
    head: LogHead = EMPTY


def _atomic(out: Path) -> AbstractContextManager[BinaryIO]:
    """A temporary file next to ``out`` (0600), fsynced and renamed onto it on success."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_file(out)


def _jsonl(record: dict[str, Any]) -> bytes:
    return dump_bytes(record) + b"\n"


def data_log(data_dir: str | os.PathLike[str]) -> TraceLog:
    """A snapshot of the decision log of the data directory ``data_dir``."""
    root = Path(data_dir)
    if not root.is_dir():
        raise TraceFileError(f"{root}: not a data directory")
    source = root / DECISION_LOG
    if not source.is_file():
        raise TraceFileError(f"{root}: no decision log (`{DECISION_LOG}`)")
    log = open_log(source)
    if log.format != "cbor":
        raise TraceFileError(f"{source}: not a CBOR sequence")
    return log


def _head(last: bytes, seq: int | None) -> LogHead:
    return LogHead(seq, record_digest(last)) if seq is not None else EMPTY


def export(data_dir: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str) -> Exported:
    """Write the decision log of ``data_dir`` to ``out`` as ``cbor`` (the log's own bytes, so
    the chain of record digests as it is) or ``jsonl`` (one JSON object per line, ``prev`` as
    written). Safe while the runtime runs; takes no lock."""
    if fmt not in FORMATS:
        raise TraceFileError(f"unknown format `{fmt}` (one of: {', '.join(FORMATS)})")
    log = data_log(data_dir)
    count, first, last, raw = 0, None, None, b""
    target = Path(out)
    try:
        with _atomic(target) as fh:
            for item in log.items():
                fh.write(item.raw if fmt == "cbor" else _jsonl(item.record))
                count, last, raw = count + 1, item.record["seq"], item.raw
                first = last if first is None else first
    except OSError as exc:
        raise TraceFileError(f"{target}: {exc.strerror or exc}") from None
    return Exported(target, fmt, count, first, last, log.torn, _head(raw, last))


def export_store(url: str, out: str | os.PathLike[str], fmt: str) -> Exported:
    """Write the decision log of the PostgreSQL store at ``url`` to ``out``, in the same
    formats as :func:`export` (the CBOR bytes are the records as the table holds them, the same
    canonical CBOR the file log writes), from one snapshot. Safe while replicas run."""
    from servers.store.postgres.log import decoded, stored_records  # noqa: PLC0415 -- loads psycopg
    from servers.store.rows import StoreError  # noqa: PLC0415

    if fmt not in FORMATS:
        raise TraceFileError(f"unknown format `{fmt}` (one of: {', '.join(FORMATS)})")
    count, first, last, raw = 0, None, None, b""
    target = Path(out)
    try:
        with _atomic(target) as fh:
            for raw in stored_records(url):
                record = decoded(raw)
                fh.write(raw if fmt == "cbor" else _jsonl(record))
                count, last = count + 1, record["seq"]
                first = last if first is None else first
    except StoreError as exc:
        raise TraceFileError(str(exc)) from None
    except OSError as exc:
        raise TraceFileError(f"{target}: {exc.strerror or exc}") from None
    return Exported(target, fmt, count, first, last, 0, _head(raw, last))

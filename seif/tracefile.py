"""Decision-log files: read a CBOR-sequence or JSON Lines log, export a data directory's log.

The record format (envelope ``v``, ``seq``, ``at``, ``event``, then the event's fields) is
documented in ``docs/replay.md``. A log file is read as a snapshot: the bytes it had when it
was opened, so that two passes over one :class:`TraceLog` see the same records even while a
runtime appends to the file. A torn final record (a crash, or an append still in progress) is
not part of the snapshot; anything else malformed is a :class:`TraceFileError`.

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

from compiler.build import atomic_file
from policy.strictjson import JsonError, dump_bytes, loads
from servers.log.decision_log import FORMAT_VERSION, CborItemError, TornTail, cbor_items
from servers.store.datadir import DECISION_LOG

FORMATS = ("cbor", "jsonl")
_CHUNK = 1 << 20


class TraceFileError(ValueError):
    """A log that cannot be read, or an export that cannot be written."""


@dataclass(frozen=True, slots=True)
class Item:
    """One record: where it starts, its bytes as stored, and its decoded value."""

    offset: int
    raw: bytes
    record: dict[str, Any]


class _Envelope:
    """Checks every record's envelope: a map, format version 1, ``seq`` increasing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_seq = 0

    def check(self, offset: int, value: Any, where: str) -> dict[str, Any]:
        if type(value) is not dict:
            raise self.error(offset, where, "a record must be a map")
        seq = value.get("seq")
        if type(seq) is int and seq > self.last_seq and value.get("v") == FORMAT_VERSION:
            self.last_seq = seq
            return value
        if value.get("v") != FORMAT_VERSION:
            raise self.error(offset, where, f"unsupported record version `{value.get('v')!r}`")
        raise self.error(offset, where, f"`seq` must increase (after {self.last_seq})")

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

    def records(self) -> Iterator[dict[str, Any]]:
        """The records of the snapshot in order."""
        with self._open() as fp:
            if self.format == "jsonl":
                for item in _jsonl_items(self, fp):
                    yield item.record
            else:
                for _offset, _raw, record in _cbor_items(self, fp, False):
                    yield record

    def items(self) -> Iterator[Item]:
        """The records of the snapshot in order, with their offsets and the bytes they are
        stored as."""
        with self._open() as fp:
            if self.format == "jsonl":
                yield from _jsonl_items(self, fp)
            else:
                for offset, raw, record in _cbor_items(self, fp, True):
                    yield Item(offset, raw, record)

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
    log: TraceLog, fp: BinaryIO, keep_raw: bool
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(offset, bytes or b"", record)`` of each complete record of the snapshot, read a
    chunk at a time; a final incomplete item is the torn tail. Records are handed out one by
    one, never gathered: a decoded record lives only as long as its consumer keeps it."""
    envelope = _Envelope(log.path)
    try:
        for offset, raw, value in cbor_items(fp, limit=log.size):
            record = envelope.check(offset, value, "byte")
            yield offset, raw if keep_raw else b"", record
    except CborItemError as exc:
        raise envelope.error(exc.offset, "byte", exc.message) from None
    except TornTail as torn:
        log.torn = torn.length


def _jsonl_items(log: TraceLog, fp: BinaryIO) -> Iterator[Item]:
    envelope = _Envelope(log.path)
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
    a final record still being written left out."""

    out: Path
    format: str
    records: int
    first_seq: int | None
    last_seq: int | None
    torn: int


def _atomic(out: Path) -> AbstractContextManager[BinaryIO]:
    """A temporary file next to ``out`` (0600), fsynced and renamed onto it on success."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_file(out)


def _jsonl(record: dict[str, Any]) -> bytes:
    return dump_bytes(record) + b"\n"


def export(data_dir: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str) -> Exported:
    """Write the decision log of ``data_dir`` to ``out`` as ``cbor`` (the log's own bytes) or
    ``jsonl`` (one JSON object per line). Safe while the runtime runs; takes no lock."""
    if fmt not in FORMATS:
        raise TraceFileError(f"unknown format `{fmt}` (one of: {', '.join(FORMATS)})")
    root = Path(data_dir)
    if not root.is_dir():
        raise TraceFileError(f"{root}: not a data directory")
    source = root / DECISION_LOG
    if not source.is_file():
        raise TraceFileError(f"{root}: no decision log (`{DECISION_LOG}`)")
    log = open_log(source)
    if log.format != "cbor":
        raise TraceFileError(f"{source}: not a CBOR sequence")
    count, first, last = 0, None, None
    target = Path(out)
    try:
        with _atomic(target) as fh:
            for item in log.items():
                fh.write(item.raw if fmt == "cbor" else _jsonl(item.record))
                count, last = count + 1, item.record["seq"]
                first = last if first is None else first
    except OSError as exc:
        raise TraceFileError(f"{target}: {exc.strerror or exc}") from None
    return Exported(target, fmt, count, first, last, log.torn)


def export_store(url: str, out: str | os.PathLike[str], fmt: str) -> Exported:
    """Write the decision log of the PostgreSQL store at ``url`` to ``out``, in the same
    formats as :func:`export` (the CBOR bytes are the records as the table holds them, the same
    canonical CBOR the file log writes), from one snapshot. Safe while replicas run."""
    from servers.store.pg_log import decoded, stored_records  # noqa: PLC0415 -- loads psycopg
    from servers.store.rows import StoreError  # noqa: PLC0415

    if fmt not in FORMATS:
        raise TraceFileError(f"unknown format `{fmt}` (one of: {', '.join(FORMATS)})")
    count, first, last = 0, None, None
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
    return Exported(target, fmt, count, first, last, 0)

"""Reading a decision log: the CBOR items of the file, the checks on each record, the one pass
the writer makes when it opens the log (:func:`scan`) and :func:`read_records`.

Every reader decodes a consistent prefix and takes no lock. A *torn* final record, the prefix of
one record left by a crash or still being written, is not part of that prefix; it must start
like a record (a CBOR map header), so that garbage at the end of the file is an error rather
than a tail to cut. Anything else that does not decode, is not a map in canonical form, has an
unknown version or a ``seq`` that does not increase is a :class:`DecisionLogError` naming the
byte where it starts.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import cbor2

from policy.canonical import EncodingError, canonical_cbor
from servers.log.encoding import FORMAT_VERSION, DecisionLogError

_CHUNK = 1 << 16

Visitor = Callable[[int, int, dict[str, Any]], None]
"""Called by :func:`scan` with ``(offset, length, record)`` for each complete record, in order."""


class TornTail(Exception):
    """A final CBOR item that ends before it is complete: ``length`` bytes at ``offset``;
    ``head``: its first byte."""

    def __init__(self, offset: int, length: int, head: bytes = b"") -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length
        self.head = head


class CborItemError(ValueError):
    """Bytes at ``offset`` that are not a CBOR item."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"byte {offset}: {message}")
        self.offset = offset
        self.message = message


class DamagedRecord(DecisionLogError):
    """Bytes at ``offset`` that are not a valid record: everything before them is."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"byte {offset}: {message}")
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LogScan:
    """The outcome of :func:`scan`: where the complete records end, the last seq, how many
    records there are, and the length of a torn tail (0: none)."""

    end: int
    last_seq: int
    records: int
    torn: int


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
                raise TornTail(base, len(buf), buf[:1])
            return
        if pos == 0:
            chunk *= 2  # one item larger than what was read: read more at once


def _items(fp: BinaryIO) -> Iterator[tuple[int, bytes, Any]]:
    try:
        yield from cbor_items(fp)
    except CborItemError as exc:
        raise DamagedRecord(exc.offset, exc.message) from None
    except TornTail as torn:
        # a record is a map of at least the envelope: its first byte is 0xa1-0xbb (canonical
        # maps have definite lengths); a torn tail that starts otherwise is garbage
        if not torn.head or not 0xA1 <= torn.head[0] <= 0xBB:
            message = f"{torn.length} bytes at the end that are not the start of a record"
            raise DamagedRecord(torn.offset, message) from None
        raise


def checked(offset: int, raw: bytes, value: Any, last_seq: int) -> dict[str, Any]:
    """A record, checked: a map in canonical form with a known version and the next seq."""
    if not isinstance(value, dict):
        raise DamagedRecord(offset, "a record must be a map")
    if value.get("v") != FORMAT_VERSION:
        raise DamagedRecord(offset, f"unsupported record version `{value.get('v')!r}`")
    seq = value.get("seq")
    if type(seq) is not int or seq <= last_seq:
        raise DamagedRecord(offset, f"`seq` must increase (after {last_seq})")
    try:
        canonical = canonical_cbor(value)
    except EncodingError:
        canonical = b""
    if canonical != raw:
        raise DamagedRecord(offset, "the record is not canonical CBOR")
    return value


def records(fp: BinaryIO, *, tolerate_partial_tail: bool) -> Iterator[dict[str, Any]]:
    last_seq = 0
    try:
        for offset, raw, value in _items(fp):
            record = checked(offset, raw, value, last_seq)
            last_seq = record["seq"]
            yield record
    except TornTail as torn:
        if not tolerate_partial_tail:
            message = f"a torn final record ({torn.length} bytes)"
            raise DamagedRecord(torn.offset, message) from None


def scan(fp: BinaryIO, visit: Visitor | None = None) -> LogScan:
    """One pass over a whole log: every record checked, and handed to ``visit``."""
    end = last_seq = count = 0
    try:
        for offset, raw, value in _items(fp):
            record = checked(offset, raw, value, last_seq)
            last_seq, end, count = record["seq"], offset + len(raw), count + 1
            if visit is not None:
                visit(offset, len(raw), record)
    except TornTail as torn:
        return LogScan(end=torn.offset, last_seq=last_seq, records=count, torn=torn.length)
    return LogScan(end=end, last_seq=last_seq, records=count, torn=0)


def read_records(
    path: str | Path, *, tolerate_partial_tail: bool = True
) -> Iterator[dict[str, Any]]:
    """The records of a decision log, in order. Takes no lock: with a writer appending, it
    yields a consistent prefix. A torn final record is skipped (an error when
    ``tolerate_partial_tail`` is False); anything else malformed is a
    :class:`DecisionLogError`. Records are decoded with duplicate keys refused and must be in
    canonical form, with ``v`` 1 and increasing ``seq``."""
    with Path(path).open("rb") as fp:
        yield from records(fp, tolerate_partial_tail=tolerate_partial_tail)


def read_at(
    path: Path, positions: Sequence[int], context_ref: str | None = None
) -> list[dict[str, Any]]:
    """The records at ``positions`` (offset, length, offset, length, ...) of the log at
    ``path``, each decoded with duplicate keys refused and checked to be a map (of
    ``context_ref``, if given): one that is not (the file was changed under its writer) is a
    :class:`DamagedRecord`."""
    out: list[dict[str, Any]] = []
    with Path(path).open("rb", buffering=0) as fp:
        for offset, length in zip(positions[0::2], positions[1::2], strict=True):
            fp.seek(offset)
            raw = fp.read(length)
            try:
                value = cbor2.CBORDecoder(io.BytesIO(raw), allow_duplicate_keys=False).decode()
            except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError):
                value = None
            if type(value) is not dict or (
                context_ref is not None and value.get("contextRef") != context_ref
            ):
                raise DamagedRecord(offset, "the record indexed here has changed")
            out.append(value)
    return out

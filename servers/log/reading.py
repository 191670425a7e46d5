"""Reading a decision log: the CBOR items of the file, the checks on each record, the one pass
the writer makes when it opens the log (:func:`scan`) and :func:`read_records`.

Every reader decodes a consistent prefix and takes no lock. A *torn* final record, the prefix of
one record left by a crash or still being written, is not part of that prefix. Only what can be
one is taken for one (:func:`tear`): it starts like a record (a CBOR map header), is shorter
than the largest record the writer writes, and holds no intact record, since a record whose
length byte was damaged reads to the end of the file just as a torn one does, and the records
after it must not be mistaken for its tail. Anything else that does not decode, is not a map
in canonical form, has an unknown version or a ``seq`` that does not increase is a
:class:`DecisionLogError` naming the byte where it starts; a record whose ``prev`` does not
match the record before it (``servers.log.chain``, checked in the same pass, before its ``seq``
is compared) is a :class:`ChainBroken` naming its ``seq``. :func:`find` is the scan for a
context the traces index does not hold.
"""

from __future__ import annotations

import io
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import cbor2

from policy.json.canonical import EncodingError, canonical_cbor
from servers.log import encoding
from servers.log.chain import Chain, ChainBreak, envelope_problem
from servers.log.encoding import DecisionLogError

_CHUNK = 1 << 16

Visitor = Callable[[int, int, dict[str, Any]], None]
"""Called by :func:`scan` with ``(offset, length, record)`` for each complete record, in order."""


class TornTail(Exception):
    """A final CBOR item that ends before it is complete: ``length`` bytes at ``offset``;
    ``head``: its first byte; ``data``: its bytes (as read)."""

    def __init__(self, offset: int, length: int, head: bytes = b"", data: bytes = b"") -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length
        self.head = head
        self.data = data


class CborItemError(ValueError):
    """Bytes at ``offset`` that are not a CBOR item; ``data``: the bytes read from there, when
    the item was refused for its length."""

    def __init__(self, offset: int, message: str, data: bytes = b"") -> None:
        super().__init__(f"byte {offset}: {message}")
        self.offset = offset
        self.message = message
        self.data = data


class DamagedRecord(DecisionLogError):
    """Bytes at ``offset`` that are not a valid record: everything before them is.
    ``intact_at``: where an intact record was found after them (then the file must not be cut
    at ``offset``: records would be lost); ``unsure``: records after them may be intact, not
    all was looked at."""

    def __init__(
        self, offset: int, message: str, intact_at: int | None = None, *, unsure: bool = False
    ) -> None:
        super().__init__(f"byte {offset}: {message}")
        self.offset = offset
        self.intact_at = intact_at
        self.unsure = unsure and intact_at is None


class ChainBroken(DamagedRecord):
    """The record at ``offset`` does not link to the record before it (``broken``: its seq and
    what is wrong): a record before it was changed, removed, inserted or moved. Everything
    before the record before it is intact, as far as the chain can tell."""

    def __init__(self, offset: int, broken: ChainBreak) -> None:
        super().__init__(offset, f"the chain of record digests breaks at {broken}")
        self.broken = broken
        self.seq = broken.seq


@dataclass(frozen=True, slots=True)
class LogScan:
    """The outcome of :func:`scan`: where the complete records end, the last seq, how many
    records there are, the length of a torn tail (0: none) and the digest of the last
    complete record (None: no record), the ``prev`` of the next."""

    end: int
    last_seq: int
    records: int
    torn: int
    head: str | None = None


def cbor_items(
    fp: BinaryIO, *, limit: int | None = None, max_item: int | None = None
) -> Iterator[tuple[int, bytes, Any]]:
    """``(offset, raw bytes, decoded value)`` of each complete item of a CBOR sequence, read a
    chunk at a time up to EOF (or ``limit`` bytes), duplicate keys refused. A trailing
    incomplete item raises :class:`TornTail`; bytes that are no CBOR, or an item still
    incomplete after ``max_item`` bytes (read no further: memory stays bounded),
    :class:`CborItemError`. Items are handed out one by one, never gathered."""
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
        if max_item is not None and len(buf) > max_item:
            message = f"an item that claims more than {max_item} bytes"
            raise CborItemError(base, message, buf)
        if not more:
            if buf:
                raise TornTail(base, len(buf), buf[:1], buf)
            return
        if pos == 0:
            chunk *= 2  # one item larger than what was read: read more at once


def _resumes(intact: int | None, *, more: bool = False) -> str:
    if intact is not None:
        return f", and an intact record starts at byte {intact} after it"
    return ", and records after it may be intact" if more else ""


def _is_record(value: Any, raw: bytes, last_seq: int) -> bool:
    """A record envelope (``v`` 1, or 2 with ``prev``; ``seq`` beyond ``last_seq``, ``at``,
    ``event``) in canonical form: what the writer writes, never what a damaged length happens
    to start."""
    if type(value) is not dict or envelope_problem(value) is not None:
        return False
    seq, at, event = value.get("seq"), value.get("at"), value.get("event")
    if type(seq) is not int or seq <= last_seq or type(at) is not int or type(event) is not str:
        return False
    try:
        return canonical_cbor(value) == raw
    except EncodingError:
        return False


_RECORD_HEAD = re.compile(rb"[\xa4-\xbb]")
"""The first byte of a record: a map of definite length with at least the 4 envelope pairs."""
_SEQ_KEY = b"\x63seq"
"""The key ``seq`` in CBOR: every record holds it, followed by its value."""
SEQ_WITHIN = 256
"""How far before its ``seq`` key a record may start to be found: keys are sorted shortest
first, so only the header, ``v``, ``at`` and other keys of up to three characters precede it
(about 16 bytes in the records the runtime writes)."""
PROBE_BUDGET = 4
"""Bytes the search for an intact record may decode per byte of the tail it searches (plus
1 MiB). A genuine tail costs a few attempts; bytes built so that every attempt reads to the
end (quadratic) exhaust it, and the tail is then refused, not cut."""


class _Undecided(Exception):
    """The search for an intact record ran out of its budget (:data:`PROBE_BUDGET`)."""


def _uint_at(data: bytes, at: int) -> int | None:
    """The CBOR unsigned integer at ``at`` in ``data``, if one is there whole."""
    if at >= len(data) or data[at] > 0x1B:
        return None
    head = data[at]
    if head < 0x18:
        return head
    size = 1 << (head - 0x18)
    return int.from_bytes(data[at + 1 : at + 1 + size]) if at + 1 + size <= len(data) else None


def _candidates(data: bytes, last_seq: int) -> Iterator[int]:
    """Where in ``data`` (after its first byte) a record can start, in file order: a map
    header (0xa4-0xbb) at most :data:`SEQ_WITHIN` bytes before a ``seq`` key whose value is
    beyond ``last_seq``. Each place once."""
    tried = 0
    at = data.find(_SEQ_KEY, 1)
    while at >= 0:
        seq = _uint_at(data, at + len(_SEQ_KEY))
        if seq is not None and seq > last_seq:
            first = max(1, tried, at - SEQ_WITHIN)
            for found in _RECORD_HEAD.finditer(data, first, at):
                yield found.start()
            tried = max(tried, at)
        at = data.find(_SEQ_KEY, at + 1)


def _intact_inside(data: bytes, base: int, last_seq: int) -> int | None:
    """The offset (``base`` + where in ``data``) of the first record that starts inside
    ``data`` after its first byte and decodes whole (:func:`_is_record`), else None: one
    decoding attempt per place a record can start (:func:`_candidates`), all of them together
    decoding at most :data:`PROBE_BUDGET` bytes per byte of ``data`` (else
    :class:`_Undecided`)."""
    stream = io.BytesIO(data)
    budget = PROBE_BUDGET * len(data) + (1 << 20)
    for start in _candidates(data, last_seq):
        stream.seek(start)
        try:
            value = cbor2.CBORDecoder(stream, allow_duplicate_keys=False).decode()
        except Exception:  # arbitrary bytes: whatever the decoder raises, there is no record
            value = None
        end = stream.tell()
        budget -= end - start
        if value is not None and _is_record(value, data[start:end], last_seq):
            return base + start
        if budget < 0:
            raise _Undecided
    return None


def _intact_after(data: bytes, base: int, last_seq: int) -> int | None:
    """:func:`_intact_inside`, None when it cannot tell (for a message only)."""
    try:
        return _intact_inside(data, base, last_seq)
    except _Undecided:
        return None


def tear(torn: TornTail, last_seq: int) -> TornTail:
    """``torn`` if it can be what a crash mid-append leaves after the record of ``last_seq``:
    it starts like a record (a canonical map has a definite length: its first byte is
    0xa1-0xbb), is shorter than the largest record the writer writes
    (:data:`~servers.log.encoding.MAX_RECORD_BYTES`) and holds no intact record (a record
    whose length was damaged reads to the end of the file: the records after it are intact,
    and must not be cut). Otherwise :class:`DamagedRecord` at its offset."""
    if not torn.head or not 0xA1 <= torn.head[0] <= 0xBB:
        message = f"{torn.length} bytes at the end that are not the start of a record"
        raise DamagedRecord(torn.offset, message)
    if torn.length >= encoding.MAX_RECORD_BYTES:
        message = f"an incomplete record of {torn.length} bytes, longer than any the writer writes"
        raise DamagedRecord(torn.offset, message + _resumes(None, more=True), unsure=True)
    try:
        intact = _intact_inside(torn.data, torn.offset, last_seq)
    except _Undecided:
        message = f"an incomplete record of {torn.length} bytes that cannot be told from damage"
        message += _resumes(None, more=True)
        raise DamagedRecord(torn.offset, message, unsure=True) from None
    if intact is not None:
        message = f"a record that claims more bytes than the file holds ({torn.length})"
        raise DamagedRecord(torn.offset, message + _resumes(intact), intact)
    return torn


def checked(
    offset: int, raw: bytes, value: Any, last_seq: int, chain: Chain | None = None
) -> dict[str, Any]:
    """A record, checked: a map in canonical form with a known version (``prev`` in the
    form of its version), linked to the record before it (``chain``, if given: else
    :class:`ChainBroken`) and with the next seq."""
    if not isinstance(value, dict):
        raise DamagedRecord(offset, "a record must be a map")
    problem = envelope_problem(value)
    if problem is not None:
        raise DamagedRecord(offset, problem)
    seq = value.get("seq")
    if type(seq) is not int:
        raise DamagedRecord(offset, f"`seq` must increase (after {last_seq})")
    if len(raw) > encoding.MAX_RECORD_BYTES:
        message = f"a record of {len(raw)} bytes, longer than any the writer writes"
        raise DamagedRecord(offset, message)
    try:
        canonical = canonical_cbor(value)
    except EncodingError:
        canonical = b""
    if canonical != raw:
        raise DamagedRecord(offset, "the record is not canonical CBOR")
    broken = chain.link(seq, raw, value) if chain is not None else None
    if broken is not None:  # before the order of seq: a moved record is a break
        raise ChainBroken(offset, broken)
    if seq <= last_seq:
        raise DamagedRecord(offset, f"`seq` must increase (after {last_seq})")
    return value


def _checked_records(fp: BinaryIO, chain: Chain) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(offset, length, record)`` of each record, checked and linked into ``chain``; a final
    incomplete record raises :class:`TornTail` only if it can be a torn tail (:func:`tear`);
    all else that is wrong, :class:`DamagedRecord` (:class:`ChainBroken` for a break)."""
    last_seq = 0
    try:
        for offset, raw, value in cbor_items(fp, max_item=encoding.MAX_RECORD_BYTES):
            record = checked(offset, raw, value, last_seq, chain)
            last_seq = record["seq"]
            yield offset, len(raw), record
    except CborItemError as exc:
        if not exc.data:
            raise DamagedRecord(exc.offset, exc.message) from None
        # longer than any record the writer writes (a damaged length): where do records
        # resume? Only the bytes read are looked at, so memory stays bounded
        intact = _intact_after(exc.data, exc.offset, last_seq)
        longest = encoding.MAX_RECORD_BYTES
        message = f"a record that claims more than {longest} bytes, longer than any the writer"
        message += " writes" + _resumes(intact, more=True)
        raise DamagedRecord(exc.offset, message, intact, unsure=True) from None
    except TornTail as torn:
        raise tear(torn, last_seq) from None


def records(fp: BinaryIO, *, tolerate_partial_tail: bool) -> Iterator[dict[str, Any]]:
    try:
        for _offset, _length, record in _checked_records(fp, Chain()):
            yield record
    except TornTail as torn:
        if not tolerate_partial_tail:
            message = f"a torn final record ({torn.length} bytes)"
            raise DamagedRecord(torn.offset, message) from None


def scan(fp: BinaryIO, visit: Visitor | None = None) -> LogScan:
    """One pass over a whole log: every record checked and linked (a break of the chain is a
    :class:`ChainBroken`), and handed to ``visit``; a final incomplete record only if it can
    be a torn tail (:func:`tear`)."""
    end = last_seq = count = 0
    chain = Chain()
    try:
        for offset, length, record in _checked_records(fp, chain):
            last_seq, end, count = record["seq"], offset + length, count + 1
            if visit is not None:
                visit(offset, length, record)
    except TornTail as torn:
        head = chain.head().digest
        return LogScan(torn.offset, last_seq, count, torn=torn.length, head=head)
    return LogScan(end=end, last_seq=last_seq, records=count, torn=0, head=chain.head().digest)


def read_records(
    path: str | Path, *, tolerate_partial_tail: bool = True
) -> Iterator[dict[str, Any]]:
    """The records of a decision log, in order. Takes no lock: with a writer appending, it
    yields a consistent prefix. A torn final record is skipped (an error when
    ``tolerate_partial_tail`` is False), if it can be one (:func:`tear`); anything else
    malformed is a :class:`DecisionLogError`. Records are decoded with duplicate keys refused
    and must be in canonical form, with ``v`` 1 or 2, increasing ``seq`` and, from the first
    record of version 2 on, an unbroken chain (:class:`ChainBroken`)."""
    with Path(path).open("rb") as fp:
        yield from records(fp, tolerate_partial_tail=tolerate_partial_tail)


def find(path: Path, context_ref: str, end: int) -> tuple[list[dict[str, Any]], array[int]]:
    """The records of ``context_ref`` among the first ``end`` bytes of the log at ``path`` (a
    record boundary), in order, and their positions (offset, length, ...): the traces' scan
    for a context the index does not hold. Each record is decoded (duplicate keys refused) but
    not re-encoded: the writer's pass at open checked the file, and appends are its own."""
    found: list[dict[str, Any]] = []
    positions: array[int] = array("Q")
    with Path(path).open("rb") as fp:
        try:
            items = cbor_items(fp, limit=end, max_item=encoding.MAX_RECORD_BYTES)
            for offset, raw, value in items:
                if type(value) is not dict:
                    raise DamagedRecord(offset, "a record must be a map")
                if value.get("contextRef") == context_ref:
                    found.append(value)
                    positions.extend((offset, len(raw)))
        except (CborItemError, TornTail) as exc:  # ``end`` is a record boundary: it changed
            raise DamagedRecord(exc.offset, "the log has changed under its writer") from None
    return found, positions


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

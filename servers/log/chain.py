"""The chain of record digests (record format version 2) and the one walk that checks it.

Every record of format 2 carries ``prev``: ``blake3:`` and the 64 lowercase hex digits of the
BLAKE3 of the previous record's bytes in the log, exactly as stored, or null on the first
record of the log. A record changed after it was written breaks the chain at the record after
it; a record removed, inserted or moved, where the order breaks. Nothing sees a change of the
last record but its digest, the log's *head*: an operator anchors it elsewhere
(``GET /v1/traces/head``) to compare later.

:class:`Chain` is the walk, fed each record in order with the bytes it is stored as (a JSON
Lines export's records re-encoded with ``policy.json.canonical.canonical_cbor``, which gives the
stored bytes back exactly). One implementation serves every reader: the runtime's pass at open
(``servers.log.reading.scan``), ``seif trace verify``, ``seif replay`` and ``seif trace export``
(``seif.tracefile``). Records of format 1 (no ``prev``) before the first record of format 2
are *unchained*, a log an earlier runtime wrote and this one continues: the first record of
format 2 names the digest of the last record of format 1. A record of format 1 after one of
format 2 is a break.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import blake3

UNCHAINED = 1
"""The record format without ``prev`` (still read, never written by the file log; the
PostgreSQL store's table keeps it: ``servers.store.postgres.log``)."""
CHAINED = 2
"""The record format with ``prev``: what the file log writes."""
DIGEST_PREFIX = "blake3:"
_DIGEST = re.compile(r"blake3:[0-9a-f]{64}")


def record_digest(data: bytes) -> str:
    """``blake3:`` + hex of a record's bytes: the ``prev`` of the record after it. The file
    log's writer looks it up on this module at every write (a benchmark replaces it)."""
    return DIGEST_PREFIX + blake3.blake3(data).hexdigest()


def is_digest(value: Any) -> bool:
    """A ``prev`` other than null: ``blake3:`` and 64 lowercase hex digits."""
    return type(value) is str and _DIGEST.fullmatch(value) is not None


def envelope_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with a record's version, or None: ``v`` 1, or ``v`` 2 with ``prev``
    present and null or a digest (:func:`is_digest`)."""
    version = record.get("v")
    if type(version) is not int or version not in (UNCHAINED, CHAINED):
        return f"unsupported record version `{version!r}`"
    if version == CHAINED:
        if "prev" not in record:
            return "a record of version 2 without `prev`"
        prev = record["prev"]
        if prev is not None and not is_digest(prev):
            return "`prev` must be null or `blake3:` and 64 lowercase hex digits"
    return None


@dataclass(frozen=True, slots=True)
class LogHead:
    """The last record of a log: its ``seq`` and digest (both None for an empty log)."""

    seq: int | None
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "digest": self.digest}


EMPTY = LogHead(None, None)


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first record whose ``prev`` does not match the record before it: its ``seq`` (as
    written in it) and what is wrong."""

    seq: int
    problem: str

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "problem": self.problem}


@dataclass(frozen=True, slots=True)
class Verified:
    """The outcome of a walk: the records linked (up to the break, if any), how many of them
    are chained (format 2) and unchained (format 1, before the chain begins), the head of
    what was linked and the first break, if any."""

    records: int
    chained: int
    unchained: int
    head: LogHead
    broken: ChainBreak | None

    @property
    def ok(self) -> bool:
        return self.broken is None

    def to_json(self) -> dict[str, Any]:
        broken = self.broken.to_json() if self.broken is not None else None
        return {
            "ok": self.ok,
            "records": self.records,
            "chained": self.chained,
            "unchained": self.unchained,
            "head": self.head.to_json(),
            "broken": broken,
        }


class Chain:
    """The walk over a log's records, in order: :meth:`link` each one (its envelope checked
    by :func:`envelope_problem`, its ``seq`` an int) before its ``seq`` is compared with the
    one before, so that a moved record is named as a break, not as a ``seq`` out of order.
    The digest of a record is taken only when the record after it needs it (or the head is
    asked for): once per record of a chained log."""

    __slots__ = ("_digest", "_last", "last_seq", "records", "unchained")

    def __init__(self) -> None:
        self.records = 0
        self.unchained = 0
        self.last_seq: int | None = None
        self._last: bytes | None = None
        self._digest: str | None = None

    @property
    def chained(self) -> int:
        return self.records - self.unchained

    def link(self, seq: int, raw: bytes, record: Mapping[str, Any]) -> ChainBreak | None:
        """Take the next record (``raw``: its bytes as stored); the break it makes, if any
        (then the walk has not taken it)."""
        unchained = record.get("v") == UNCHAINED
        problem = self._after_chain() if unchained else self._mismatch(record.get("prev"))
        if problem is not None:
            return ChainBreak(seq, problem)
        self.records += 1
        self.unchained += unchained
        self.last_seq, self._last, self._digest = seq, raw, None
        return None

    def _after_chain(self) -> str | None:
        if self.chained:
            return f"a record of version 1 (no `prev`) after one of version 2 (seq {self.last_seq})"
        return None

    def _mismatch(self, prev: Any) -> str | None:
        if self._last is None:  # the first record of the log
            if prev is None:
                return None
            return "`prev` is not null on the first record: records before it are missing"
        if prev is None:
            return f"`prev` is null, but seq {self.last_seq} is before it"
        if prev != self.head().digest:
            return f"`prev` is not the digest of the record before it (seq {self.last_seq})"
        return None

    def head(self) -> LogHead:
        """The last record taken: its ``seq`` and digest."""
        if self._last is None:
            return EMPTY
        if self._digest is None:
            self._digest = record_digest(self._last)
        return LogHead(self.last_seq, self._digest)

    def verified(self, broken: ChainBreak | None = None) -> Verified:
        """The outcome of the walk so far, ``broken`` where it stopped."""
        return Verified(self.records, self.chained, self.unchained, self.head(), broken)

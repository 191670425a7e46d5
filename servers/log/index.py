"""The decision log's index of traces: for the most recently written contexts, where each of
their records is in the file.

Built during the pass :meth:`~servers.log.decision_log.DecisionLog.open` makes anyway and
kept up to date by every append, so that ``GET /v1/traces/{contextRef}`` reads exactly that
context's records instead of the whole file. It is bounded: it holds at most ``max_contexts``
contexts and ``max_records`` positions in all, and drops the context written least recently
first (an LRU on appends). What it no longer holds is found by a scan of the log
(:func:`~servers.log.reading.find`), and only of the part where it can be:

- every record of a dropped context ends at or before :attr:`TraceIndex.dropped_below` (the
  end of the last record of the contexts dropped so far), so a context the index does not hold
  has its records, if any, there, and with nothing dropped yet, none at all;
- a context that comes back after it was dropped (a new record) is held again from that
  record on, with the rest of its records below ``dropped_below`` at that moment
  (:attr:`Entry.below`), found by one scan when its trace is first read and then held whole
  (:meth:`TraceIndex.complete`);
- a context whose first record is its ``DISCLOSED`` record is whole from there: the runtime
  names every context afresh (a random contextRef) when it discloses it, and writes a
  contextRef into no other record before.

Memory: 16 bytes per position (its offset and length, in one ``array('Q')`` per context, a
little more as arrays grow) plus about 350 bytes per context (the key, the entry, its array and
the ordered dict's node; measured): at the defaults at most some 35 MB and 16 MB, whatever the
length of the log. Not thread-safe: its owner holds a lock.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from typing import Any

MAX_CONTEXTS = 100_000
"""Contexts the index holds at most, by default (about 350 bytes each: some 35 MB)."""
MAX_RECORDS = 1_000_000
"""Positions the index holds at most, by default, over all its contexts (16 MB)."""
OPENS = "DISCLOSED"
"""The event of a context's first record: an entry that starts with one is whole."""


class Entry:
    """One context's positions (offset, length, ... in file order) from some record on, and
    ``below``: the offset before which more of its records may be (0: none)."""

    __slots__ = ("below", "positions")

    def __init__(self, below: int) -> None:
        self.positions: array[int] = array("Q")
        self.below = below


class TraceIndex:
    """contextRef -> :class:`Entry`, for at most ``max_contexts`` contexts and ``max_records``
    positions, the least recently written dropped first."""

    __slots__ = ("_entries", "_records", "dropped_below", "max_contexts", "max_records")

    def __init__(self, max_contexts: int = MAX_CONTEXTS, max_records: int = MAX_RECORDS) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._records = 0
        self.dropped_below = 0
        """Every record of a context dropped so far ends at or before this offset."""
        self.max_contexts = self.max_records = 1
        self.resize(max_contexts, max_records)

    def resize(self, max_contexts: int, max_records: int) -> None:
        """New bounds (integers >= 1), applied at once: what is beyond them is dropped."""
        for name, value in (("max_contexts", max_contexts), ("max_records", max_records)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an integer >= 1")
        self.max_contexts, self.max_records = max_contexts, max_records
        self._bound()

    def add(self, record: dict[str, Any], offset: int, length: int) -> None:
        """Index one record (a record without a string ``contextRef`` is not indexed)."""
        ref = record.get("contextRef")
        if type(ref) is not str:
            return
        entry = self._entries.get(ref)
        if entry is None:
            whole = record.get("event") == OPENS
            entry = self._entries[ref] = Entry(0 if whole else self.dropped_below)
        else:
            self._entries.move_to_end(ref)
        entry.positions.append(offset)
        entry.positions.append(length)
        self._records += 1
        self._bound()

    def _bound(self) -> None:
        entries = self._entries
        while len(entries) > self.max_contexts or self._records > self.max_records:
            _ref, dropped = entries.popitem(last=False)
            positions = dropped.positions
            self._records -= len(positions) // 2
            if positions:
                self.dropped_below = max(self.dropped_below, positions[-2] + positions[-1])

    def lookup(self, context_ref: str) -> tuple[Entry | None, array[int]]:
        """The context's entry (None: not held) and a copy of its positions (one ``memcpy``,
        quick under its owner's lock)."""
        entry = self._entries.get(context_ref)
        return entry, array("Q") if entry is None else array("Q", entry.positions)

    def complete(self, context_ref: str, entry: Entry, older: array[int]) -> None:
        """Put the positions a scan found below ``entry.below`` in front of ``entry``'s, if
        the index still holds that entry: the context is then held whole."""
        if self._entries.get(context_ref) is not entry or not entry.below:
            return
        entry.positions = older + entry.positions
        entry.below = 0
        self._records += len(older) // 2
        self._bound()

    @property
    def records(self) -> int:
        """Positions held, over all contexts."""
        return self._records

    def __len__(self) -> int:
        return len(self._entries)

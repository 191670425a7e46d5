"""The decision log's index of traces: for each contextRef, where its records are in the file.

Built during the pass :meth:`~servers.log.decision_log.DecisionLog.open` makes anyway and
kept up to date by every append, so that ``GET /v1/traces/{contextRef}`` reads exactly that
context's records instead of the whole file. Memory: 16 bytes per record that names a
contextRef (its offset and length, in one ``array('Q')`` per context) plus about 200 bytes
per context (the key, the array, the dict slot). Not thread-safe: its owner holds a lock.
"""

from __future__ import annotations

from array import array
from typing import Any


class TraceIndex:
    """contextRef -> the (offset, length) of each of its records, in file order."""

    __slots__ = ("_positions",)

    def __init__(self) -> None:
        self._positions: dict[str, array[int]] = {}

    def add(self, context_ref: Any, offset: int, length: int) -> None:
        """Index one record (a record without a string ``contextRef`` is not indexed)."""
        if type(context_ref) is not str:
            return
        found = self._positions.get(context_ref)
        if found is None:
            found = self._positions[context_ref] = array("Q")
        found.append(offset)
        found.append(length)

    def positions(self, context_ref: str) -> array[int]:
        """A copy (one ``memcpy``, quick under its owner's lock): offset, length, offset,
        length, ... of the context's records, in file order."""
        found = self._positions.get(context_ref)
        return array("Q") if found is None else array("Q", found)

    def __len__(self) -> int:
        return len(self._positions)

"""A bounded map of live entries, each with its owner (turns by credential, say): one owner
filling the map drops its own entries, never another owner's.

Unlike a cache (:mod:`servers.support.memo`), an entry dropped here is gone for good, so live
entries go last, and an owner's go before anyone else's. :meth:`Owned.admit` keeps

- at most ``per_owner`` entries of one owner: that owner's finished entries are dropped from
  its oldest end, then its oldest ones, whatever their state;
- at most ``limit`` entries in all, a last resort when many owners are busy: finished entries
  are dropped from the oldest end, then the oldest entry of the owner holding the most.

Insertion order is age order, and the entries are expected to finish in about that order (they
share one lifetime): every step takes entries from an oldest end, so an insertion costs O(1)
amortised, plus one look over the owners (not the entries) when the map is full. A finished
entry behind a live one of the same owner waits until it reaches an oldest end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Owned(Mapping[K, V], Generic[K, V]):
    """The entries in age order, and each owner's keys in age order (read it as a mapping)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._owner_of: dict[K, str] = {}
        self._by_owner: dict[str, OrderedDict[K, None]] = {}

    def __getitem__(self, key: K) -> V:
        return self._entries[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def owner_of(self, key: K) -> str | None:
        return self._owner_of.get(key)

    def held_by(self, owner: str) -> int:
        """How many entries ``owner`` holds."""
        return len(self._by_owner.get(owner, ()))

    def admit(
        self,
        key: K,
        value: V,
        *,
        owner: str,
        limit: int,
        per_owner: int,
        finished: Callable[[V], bool],
    ) -> None:
        """Insert ``value`` as the newest entry of ``owner`` (replacing ``key``'s), within the
        bounds (a bound below 1 keeps nothing)."""
        self.drop(key)
        self._drop_finished(self._entries, finished)
        mine = self._by_owner.get(owner)
        if mine is not None:
            self._drop_finished(mine, finished)
            while mine and len(mine) >= per_owner:
                self.drop(next(iter(mine)))
        while self._entries and len(self._entries) >= limit:
            largest = max(self._by_owner.values(), key=len)  # one per owner, never per entry
            self.drop(next(iter(largest)))
        if limit < 1 or per_owner < 1:
            return
        self._entries[key] = value
        self._owner_of[key] = owner
        self._by_owner.setdefault(owner, OrderedDict())[key] = None

    def replace(self, key: K, value: V) -> None:
        """Change the value of an entry kept (its age and owner stay); a key not kept is
        ignored."""
        if key in self._entries:
            self._entries[key] = value

    def drop(self, key: K) -> V | None:
        """Forget one entry; the one forgotten, if any."""
        value = self._entries.pop(key, None)
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            keys = self._by_owner[owner]
            del keys[key]
            if not keys:
                del self._by_owner[owner]
        return value

    def _drop_finished(self, keys: Mapping[K, object], finished: Callable[[V], bool]) -> None:
        """Drop finished entries from the oldest end of ``keys`` (all, or one owner's)."""
        while keys:
            oldest = next(iter(keys))
            if not finished(self._entries[oldest]):
                return
            self.drop(oldest)

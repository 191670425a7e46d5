"""A bounded map of live entries (turns, say): inserting drops finished entries first.

Unlike a cache (:mod:`servers.support.memo`), an entry dropped here is gone for good, so live
entries go last: :func:`admit` drops finished entries from the oldest end (up to the first
live one) on every insertion, and when the map is still full every finished entry, then the
oldest live ones. Insertion order is age order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def admit(
    entries: dict[K, V], key: K, value: V, *, limit: int, finished: Callable[[V], bool]
) -> None:
    """Insert ``value`` as the newest entry, keeping at most ``limit`` entries."""
    while entries:
        oldest = next(iter(entries))
        if not finished(entries[oldest]):
            break
        del entries[oldest]
    if len(entries) >= limit:
        for old in [k for k, v in entries.items() if finished(v)]:
            del entries[old]
    while entries and len(entries) >= limit:
        del entries[next(iter(entries))]
    entries.pop(key, None)
    entries[key] = value

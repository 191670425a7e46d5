"""Memoization of pure results in a bounded dict: the first ``limit`` keys are kept, later
ones computed each time (no eviction: the keys that matter come first and keep coming)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

LIMIT = 4096


def remembered(cache: dict[K, V], key: K, make: Callable[[K], V], limit: int = LIMIT) -> V:
    """``cache[key]``, computed by ``make(key)`` and kept while the cache has room."""
    found = cache.get(key)
    if found is None:
        found = make(key)
        if len(cache) < limit:
            cache[key] = found
    return found

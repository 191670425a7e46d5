"""The runtime's one cache helper: bounded maps of values that can be rebuilt, with one
eviction policy, **least recently used dropped first** (LRU).

A cache is a plain ``dict`` owned by its user; its insertion order is its recency order (a hit
moves the key to the end, a full cache drops its first key). Everything kept this way can be
computed again from its key (a pure result) or read again from the store, so an eviction costs
a recomputation, never a result. Keys must be what the value depends on, never per-request
fields (a ``traceId`` in a key makes every request a miss and a new entry).

The functions are safe to call from several threads on one cache (each step is one dict
operation under the GIL; a step that loses a race is skipped, which at worst keeps one entry
too few or computes a value twice).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

LIMIT = 4096
"""Entries of a cache unless its user says otherwise."""


def cached(cache: dict[K, V], key: K) -> V | None:
    """``cache[key]`` marked as just used, or None when absent."""
    try:
        found = cache.pop(key)
    except KeyError:
        return None
    cache[key] = found
    return found


def keep(cache: dict[K, V], key: K, value: V, limit: int = LIMIT) -> None:
    """Insert (or refresh) ``key``, dropping the least recently used entries beyond ``limit``."""
    cache.pop(key, None)
    while len(cache) >= limit > 0:
        try:
            cache.pop(next(iter(cache)), None)
        except (StopIteration, RuntimeError):  # emptied, or changed by another thread meanwhile
            break
    if limit > 0:
        cache[key] = value


def remembered(cache: dict[K, V], key: K, make: Callable[[K], V], limit: int = LIMIT) -> V:
    """``cache[key]``, computed by ``make(key)`` on a miss and kept (LRU, ``limit`` entries).
    ``make`` never returns None (a None would be computed again on every call)."""
    found = cached(cache, key)
    if found is None:
        found = make(key)
        keep(cache, key, found, limit)
    return found

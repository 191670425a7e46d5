"""Timing with ``time.perf_counter_ns``: batches of calls, median and p99 of the per-call time.

A batch runs ``fn`` ``loops`` times, ``loops`` being chosen so that one batch lasts at least
``min_time`` seconds; the per-call time of a batch is its duration divided by ``loops``. The
median and the 99th percentile are taken over ``repeats`` batches (with 31 batches the p99 is
the slowest batch but one, interpolated). :func:`measure_all` interleaves the batches of several
functions, so that the figures compared in one report saw the same machine.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Stats:
    """Nanoseconds per call: the median and p99 over batches; ``calls`` timed in all."""

    median_ns: float
    p99_ns: float
    calls: int

    def per(self, n: int) -> Stats:
        """The same figures per item when each call handled ``n`` items."""
        return Stats(self.median_ns / n, self.p99_ns / n, self.calls * n)

    def to_json(self) -> dict[str, Any]:
        return {"median_ns": round(self.median_ns, 1), "p99_ns": round(self.p99_ns, 1),
                "calls": self.calls}  # fmt: skip


def _batch(fn: Callable[[], object], loops: int) -> int:
    start = time.perf_counter_ns()
    for _ in range(loops):
        fn()
    return time.perf_counter_ns() - start


def _calibrate(fn: Callable[[], object], min_time: float) -> int:
    loops, goal = 1, int(min_time * 1e9)
    while True:
        elapsed = _batch(fn, loops)
        if elapsed >= goal or loops >= 1 << 30:
            return loops
        # aim a little past the goal, at most 10x more per step
        loops = max(loops + 1, min(loops * 10, int(loops * goal * 1.2 / max(elapsed, 1))))


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def measure(fn: Callable[[], object], *, repeats: int = 31, min_time: float = 0.02) -> Stats:
    """Time ``fn``: ``repeats`` batches of at least ``min_time`` seconds each."""
    return measure_all({0: fn}, repeats=repeats, min_time=min_time)[0]


def measure_all(
    fns: Mapping[K, Callable[[], object]], *, repeats: int = 31, min_time: float = 0.02
) -> dict[K, Stats]:
    """Time each of ``fns`` as :func:`measure` does, their batches interleaved: round ``r``
    runs batch ``r`` of every function in turn, so a slow spell of a shared machine lands on
    a few batches of every function instead of on all the batches of one (and the medians,
    hence the ratios between functions, stay comparable)."""
    loops = {}
    for name, fn in fns.items():
        fn()  # warm up caches and specialisation
        loops[name] = _calibrate(fn, min_time)
    per_call: dict[K, list[float]] = {name: [] for name in fns}
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in fns.items():
                per_call[name].append(_batch(fn, loops[name]) / loops[name])
    finally:
        if enabled:
            gc.enable()
    out = {}
    for name, times in per_call.items():
        times.sort()
        out[name] = Stats(statistics.median(times), quantile(times, 0.99), loops[name] * repeats)
    return out


def ratio(slower: Stats, faster: Stats) -> float:
    """How many times ``faster`` beats ``slower`` (ratio of the medians)."""
    return slower.median_ns / faster.median_ns if faster.median_ns else float("inf")

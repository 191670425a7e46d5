"""Shared pieces of the benchmarks: timing with ``time.perf_counter_ns``, latency figures,
closed-loop load and the subprocesses of a run.

Timing: batches of calls, median and p99 of the per-call time. A batch runs ``fn`` ``loops``
times, ``loops`` being chosen so that one batch lasts at least ``min_time`` seconds; the per-call
time of a batch is its duration divided by ``loops``. The median and the 99th percentile are
taken over ``repeats`` batches (with 31 batches the p99 is the slowest batch but one,
interpolated). :func:`measure_all` interleaves the batches of several functions, so that the
figures compared in one report saw the same machine.

Load: :func:`closed_loop` (workers each awaiting an answer before sending again, whatever the
HTTP client), :func:`quantiles` of its latencies and :func:`latency_row` for the report.
Processes: :class:`Process` (a subprocess whose stdout is read line by line), :class:`Server`
(one that prints ``listening on http://...``), :func:`run_json` (one that prints a JSON
result) and :func:`proc_stat` (a process's CPU time from ``/proc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import queue
import re
import signal
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from policy.json.strict import loads

K = TypeVar("K", bound=Hashable)
REPO = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (http://\S+)")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""Clock ticks per second, the unit of the CPU times in ``/proc``."""


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


# ================================================================ latency figures


def quantiles(values: list[int]) -> dict[str, float]:
    """The p50, p99, mean and max of latencies in ns, in ms."""
    if not values:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(float(v) for v in values)
    return {
        "p50_ms": round(quantile(ordered, 0.50) / 1e6, 3),
        "p99_ms": round(quantile(ordered, 0.99) / 1e6, 3),
        "mean_ms": round(sum(ordered) / len(ordered) / 1e6, 3),
        "max_ms": round(ordered[-1] / 1e6, 3),
    }


def latency_row(
    name: str, impl: str, figures: Mapping[str, Any], rps: float | None = None
) -> dict[str, Any]:
    """A report row of a load test (``python -m bench``'s shape): the p50 latency as the median,
    the p99, the successes as the calls, and the rate (``figures["rps"]`` unless given)."""
    return {
        "name": name,
        "impl": impl,
        "median_ns": round(figures["p50_ms"] * 1e6),
        "p99_ns": round(figures["p99_ms"] * 1e6),
        "calls": figures["ok"],
        "rps": figures["rps"] if rps is None else rps,
    }


def summed_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts (errors by kind, ...) added up."""
    total: Counter[str] = Counter()
    for each in counts:
        total.update(each)
    return dict(total)


# ================================================================ closed-loop load


@dataclass(slots=True)
class Phase:
    """A closed loop's requests: sent, the successes' latencies, the errors by kind, its wall
    time."""

    sent: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    elapsed_ns: int = 0

    def counts(self) -> dict[str, Any]:
        """Requests sent, successes and errors by kind."""
        return {"sent": self.sent, "ok": len(self.latencies_ns), "errors": dict(self.errors)}


Send = Callable[[int], Awaitable[tuple[int, str | None]]]
"""Sends request ``i`` and awaits its answer: the ns the exchange took, and None (as expected)
or what was wrong (the error's key in the counts)."""


async def closed_loop(send: Send, indices: range, workers: int, duration_s: float) -> Phase:
    """Closed loop: ``workers`` workers take the next index until ``indices`` or the duration
    runs out, each waiting for its answer before sending again."""
    phase = Phase()
    cursor = iter(indices)
    deadline = time.perf_counter() + duration_s

    async def worker() -> None:
        for i in cursor:
            if time.perf_counter() >= deadline:
                return
            phase.sent += 1
            took, problem = await send(i)
            if problem is None:
                phase.latencies_ns.append(took)
            else:
                phase.errors[problem] += 1

    began = time.perf_counter_ns()
    await asyncio.gather(*(worker() for _ in range(workers)))
    phase.elapsed_ns = time.perf_counter_ns() - began
    return phase


# ================================================================ subprocesses


def popen(
    argv: list[str], env: dict[str, str], *, stdin: int, stderr: int | IO[Any]
) -> subprocess.Popen[str]:
    """A subprocess in the repository, its stdout piped (text)."""
    return subprocess.Popen(
        argv, cwd=REPO, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr, text=True
    )


def pin(pid: int, cpus: set[int] | None) -> None:
    """Run ``pid`` on ``cpus`` only (if any, and where the system can)."""
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(pid, cpus)


def run_json(
    argv: list[str], env: dict[str, str], cpus: set[int] | None, *, timeout: float, name: str
) -> dict[str, Any]:
    """Run a load generator's process to its end, pinned to ``cpus`` (if any) before it has
    imported anything (its warm-up comes much later); the JSON object it printed."""
    proc = popen(argv, env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pin(proc.pid, cpus)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{name} timed out") from None
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed: {stderr[-3000:]}")
    result: dict[str, Any] = loads(stdout)
    return result


class Process:
    """A subprocess of the run: its stdout read line by line (by a thread), its stderr written
    to ``log``, its stdin piped when asked for."""

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], log: Path, *, stdin: bool = False
    ) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as err:
            self.proc = popen(
                argv, env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stderr=err
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=self._drain, args=(stdout,), daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def next_line(self, timeout: float) -> str | None:
        """Its next line of output; None at the end of its output or after ``timeout`` s."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def pin(self, cpus: set[int] | None) -> None:
        pin(self.pid, cpus)

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a clean shutdown), then SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode


class Server(Process):
    """A subprocess that prints ``... listening on http://HOST:PORT`` once it accepts."""

    url = ""

    def wait_listening(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(max(0.01, deadline - time.monotonic()))
            if line is None:
                self.stop()
                raise RuntimeError(f"{self.name} did not start: {self.tail()}")
            found = LISTENING.search(line)
            if found:
                self.url = found.group(1)
                return self.url


@contextlib.contextmanager
def started(name: str, argv: list[str], env: dict[str, str], log: Path) -> Iterator[Server]:
    server = Server(name, argv, env, log)
    try:
        server.wait_listening()
        yield server
    finally:
        server.stop()


@dataclass(frozen=True, slots=True)
class ProcStat:
    comm: str
    ppid: int
    utime: int  # ticks
    stime: int

    @property
    def ticks(self) -> int:
        """User and system time."""
        return self.utime + self.stime


def proc_stat(path: str) -> ProcStat | None:
    """The command name, parent and CPU ticks of a ``/proc/.../stat``; None if it is gone."""
    try:
        with open(path, "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    close = text.rindex(")")
    fields = text[close + 2 :].split()
    return ProcStat(text[text.index("(") + 1 : close], int(fields[1]),
                    int(fields[11]), int(fields[12]))  # fmt: skip

"""The CPU time of every process of the machine over a timed window, from ``/proc``
(:class:`Sampler`): by component of the benchmark, the time its threads waited for a core,
and the system call each replica's event loop thread is in."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Any

from bench.harness import TICK, ProcStat, proc_stat
from bench.replicas.config import SAMPLE_S

PG_OURS = "postgres: backends of the database"
PG_SERVER = "postgres: server processes (WAL writer, checkpointer, ...)"
PG_OTHER = "postgres: other databases' backends"
OTHER = "other processes"
_PG_SERVER_TITLES = ("checkpointer", "background writer", "walwriter", "autovacuum launcher",
                     "logical replication launcher", "archiver", "stats collector",
                     "startup", "walreceiver", "walsender")  # fmt: skip
LOOP_STATES = {
    "running": "running or runnable (user space)",
    **dict.fromkeys(("232", "281", "441"), "idle in epoll_wait"),
    **dict.fromkeys(("7", "271", "23", "270"), "blocked in poll/select (a synchronous read)"),
    "202": "futex (the GIL, a lock)",
}
"""What an event loop thread was doing, by ``/proc/PID/task/TID/syscall`` (x86-64 numbers):
``running`` (not in a system call: on a core or waiting for one), ``epoll_wait`` (uvloop
idle), ``poll``/``select`` (psycopg waiting for the server on a synchronous connection), or
another system call."""
LOOP_SAMPLE_S = 0.01


def runqueue_wait_ns(pid: int, *, threads: bool) -> int | None:
    """The time a process (all its threads, or its main thread alone) spent runnable but
    waiting for a core (``/proc/PID/task/TID/schedstat``, second field), in ns."""
    try:
        tids = os.listdir(f"/proc/{pid}/task") if threads else [str(pid)]
    except OSError:
        return None
    total, found = 0, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as schedstat:
                total += int(schedstat.read().split()[1])
                found = True
        except (OSError, IndexError, ValueError):
            continue
    return total if found else None


def _thread_wait_ns(stat_path: str) -> int | None:
    try:
        with open(stat_path[: -len("stat")] + "schedstat") as schedstat:
            return int(schedstat.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def machine_ticks() -> dict[str, int] | None:
    """The machine's CPU time (all cores) from ``/proc/stat``, in ticks: busy (user, nice,
    system, irq, softirq, steal), idle and iowait."""
    try:
        with open("/proc/stat") as stat:
            first = stat.readline().split()
    except OSError:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, first[1:9])
    return {"busy": user + nice + system + irq + softirq + steal, "idle": idle, "iowait": iowait}


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}


class Sampler:
    """The CPU time every process of the machine used over one window, by component:
    :meth:`start`, then :meth:`stop`. Components: the benchmark's processes by name
    (``named``: pid to component; ``threads``: a component per ``/proc/PID/task/TID/stat``,
    counted besides its process), the PostgreSQL server's processes (children of
    ``postmaster``: the backends of ``database``, by their process title; the server's own
    processes; other databases' backends) and every other process (by command name). A
    background thread reads ``/proc`` every :data:`SAMPLE_S` seconds, so that a process that
    ends within the window counts up to its last sample; one that starts within it counts all
    its CPU time."""

    def __init__(
        self,
        named: dict[int, str],
        threads: dict[str, str],
        postmaster: int | None,
        database: str | None,
    ) -> None:
        self._named = named
        self._threads = threads
        self._postmaster = postmaster
        self._database = database
        self._first: dict[str, int] = {}
        self._last: dict[str, int] = {}
        self._wait_first: dict[str, int] = {}  # ns runnable but waiting for a core
        self._wait_last: dict[str, int] = {}
        self._kind: dict[str, str] = {}  # stat path -> component (or "other: COMM")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loops = threading.Thread()
        self._machine: dict[str, int] | None = None
        self._began = 0.0
        self.backends = 0
        """Backends of ``database`` seen in the window."""
        self._loop_states: Counter[str] = Counter()

    def _classify(self, pid: int, stat: ProcStat) -> str:
        if pid in self._named:
            return self._named[pid]
        if self._postmaster is not None and self._postmaster in (pid, stat.ppid):
            if pid == self._postmaster:
                return PG_SERVER
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    title = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                title = ""
            if self._database and f" {self._database} " in f"{title} ":
                self.backends += 1
                return PG_OURS
            if any(name in title for name in _PG_SERVER_TITLES):
                return PG_SERVER
            return PG_OTHER
        return f"other: {stat.comm}"

    def _sample(self, into: dict[str, int], waits: dict[str, int]) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            path = f"/proc/{entry.name}/stat"
            stat = proc_stat(path)
            if stat is None:
                continue
            if path not in self._kind:
                self._kind[path] = self._classify(int(entry.name), stat)
            into[path] = stat.ticks
            if not self._kind[path].startswith("other: "):
                wait = runqueue_wait_ns(int(entry.name), threads=int(entry.name) in self._named)
                if wait is not None:
                    waits[path] = wait
        for path in self._threads.values():
            stat = proc_stat(path)
            if stat is not None:
                into[path] = stat.ticks
            wait = _thread_wait_ns(path)
            if wait is not None:
                waits[path] = wait

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample(self._last, self._wait_last)

    def _run_loops(self) -> None:
        """Every :data:`LOOP_SAMPLE_S`: the system call each event loop thread is in."""
        paths = [path[: -len("stat")] + "syscall" for path in self._threads.values()]
        while not self._stop.wait(LOOP_SAMPLE_S):
            for path in paths:
                try:
                    with open(path) as syscall:
                        call = syscall.read().split(" ", 1)[0].strip()
                except OSError:
                    continue
                self._loop_states[LOOP_STATES.get(call, "other system calls")] += 1

    def start(self) -> None:
        self._machine = machine_ticks()
        self._began = time.perf_counter()
        self._sample(self._first, self._wait_first)
        self._last.update(self._first)
        self._wait_last.update(self._wait_first)
        self.backends = sum(1 for path in self._first if self._kind.get(path) == PG_OURS)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._loops = threading.Thread(target=self._run_loops, daemon=True)
        self._loops.start()

    def stop(self) -> dict[str, Any]:
        """CPU-seconds per component over the window, the seconds its threads spent runnable
        but waiting for a core, the busiest other processes, the machine's CPU time, and the
        window's wall time."""
        self._sample(self._last, self._wait_last)
        wall = time.perf_counter() - self._began
        machine = machine_ticks()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._loops.join()
        components, others = self._used()
        out: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "components_s": _rounded(components),
            "runqueue_wait_s": _rounded(self._waited()),
            "busiest_other_processes_s": {
                k: round(v, 3) for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:5] if v
            },
            "postgres_measured": self._postmaster is not None,
            "backends": self.backends,
            "event_loop_samples": dict(self._loop_states),
        }
        if self._machine is not None and machine is not None:
            delta = {k: machine[k] - self._machine[k] for k in machine}
            out["machine_s"] = {k: round(v / TICK, 3) for k, v in delta.items()}
        return out

    def _used(self) -> tuple[dict[str, float], dict[str, float]]:
        """CPU-seconds per component, and per command name of the other processes."""

        def used(path: str) -> float:
            first = self._first.get(path, 0)
            return (self._last.get(path, first) - first) / TICK

        components: dict[str, float] = {}
        others: dict[str, float] = {}
        for path, kind in self._kind.items():
            if kind.startswith("other: "):
                others[kind[7:]] = others.get(kind[7:], 0.0) + used(path)
            component = OTHER if kind.startswith("other: ") else kind
            components[component] = components.get(component, 0.0) + used(path)
        for name, path in self._threads.items():
            components[name] = components.get(name, 0.0) + used(path)
        return components, others

    def _waited(self) -> dict[str, float]:
        """Seconds runnable but waiting for a core, per component."""
        waited: dict[str, float] = {}
        kinds = {**self._kind, **{path: name for name, path in self._threads.items()}}
        for path, last in self._wait_last.items():
            kind = kinds[path]
            waited[kind] = waited.get(kind, 0.0) + (last - self._wait_first.get(path, 0)) / 1e9
        return waited

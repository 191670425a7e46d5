"""``python -m bench replicas``: durable dispatches per second of runtime replicas on one
PostgreSQL database, against one runtime on SQLite, in one run.

A durable dispatch is one ``POST /v1/context/tools/execute`` of a fresh call id of the read tool
``inspect-context`` that reaches the synthetic executor, its intent committed before the
executor is called and its result committed before the answer. Four configurations, each on a
fresh store:

- ``sqlite``: one ``seif serve --data DIR`` (the baseline; WAL, ``synchronous=FULL``, the
  decision log fsynced per record);
- ``pg1``, ``pg2``, ``pg3``: 1, 2 and 3 ``seif serve --store postgresql://.../DB --replica-id
  rN`` on one new database per configuration (created from ``template0``, dropped after).

Every configuration has the same bindings (with ``"traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"``,
the same key in every replica's environment), the same build (the reference project), one
synthetic executor (``examples/reference-tools/executor.py``, one process for the whole run)
and the same load: a closed-loop client (``python -m bench.replicas load``, its own process,
an HTTP/1.1 keep-alive client on ``httptools`` and uvloop) with a fixed number of requests in
flight, spreading its requests round-robin over the replicas (request ``i`` to replica
``i mod n``), resolves included. Nothing is pinned: PostgreSQL, the replicas, the executor and
the client share the machine's cores.

``inspect-context`` allows 3 calls per context, so the client resolves the contexts its calls
need before it is measured (untimed), then sends a warm-up (untimed), then says it is ready and
waits; the run then starts the timed phase of every client at once. The calls of one context
are spread :data:`SPREAD` calls apart, so that calls in flight together rarely share a context
(the claiming transaction locks the context's row). A timed phase ends at a request count or a
duration, whichever comes first. ``rounds`` rounds run every configuration once each (the
order reversed every other round, each on a fresh store), so that slow spells of a shared
machine fall on all of them.

Every answer is checked (a 200 and a ``SUCCEEDED`` receipt that is not a duplicate); anything
else is an error and left out of the figures. The executor's count of executions must grow by
exactly the successes (each call dispatched once, by one replica), and after the replicas
stopped every success must be a ``SUCCEEDED`` intent in the store, and on PostgreSQL have its
``INTENT`` and ``RESULT`` records in the ``decision_log`` table.

Figures per configuration: dispatches per second (successes / wall time of the timed phases),
the p50 and p99 latency of one execute (client side, pooled over rounds). Over each timed
window the run reads ``/proc`` (:class:`Sampler`): the CPU time of every process of the
machine, attributed to the replicas (and their event loop threads), the PostgreSQL backends
serving the configuration's database (by their process title), PostgreSQL's own processes
(WAL writer, checkpointer, ...), the executor, the client and this process, or else to other
load (other databases' backends, other processes, and what ``/proc/stat`` counts busy that no
process accounts for); the time the benchmark's threads spent runnable but waiting for a core
(``schedstat``); and, every 10 ms, the system call each replica's event loop thread is in
(idle in ``epoll_wait``, waiting in ``poll`` on a synchronous PostgreSQL read, or running).
It reports CPU microseconds per dispatch per component, the cores busy, and where the event
loops spent the window: what explains where adding replicas stops helping. Over the window
it also reads the server's WAL position and next transaction id (exact, but for the whole
server). ``ratios``: rates of 1 PostgreSQL replica / SQLite (target at least 0.5x), 2 / 1
replicas, 3 / 1 replicas (target at least 1.5x).

The PostgreSQL server: ``SEIF_BENCH_PG_URL`` (a libpq URL of a database the run may create
databases from), else ``postgresql://postgres@127.0.0.1:5432/postgres`` when it answers, else
a private server started from the installed binaries as the tests do (``tests/pg_support.py``;
that one runs with ``fsync=off``, so its figures are not durable: the run says so).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import math
import os
import queue
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from bench.runtime import (
    APP_TOKEN,
    ARGUMENTS,
    CONTEXT_REF,
    EXECUTOR,
    LOAD_TOKEN_ENV,
    REPO,
    TOOL,
    TOOL_SECRETS,
    Server,
    _env,
    check_ready,
    cores,
    executor_argv,
    executor_counts,
    fsync_us,
    get_json,
    quantiles,
    resolve_body,
    stored_intents,
)

TRACE_KEY_ENV = "CONTEXT_TOOL_TRACE_KEY"
TRACE_KEY = "bench-replicas-shared-trace-key-5e0c7a93d1f4"
PG_URL_ENV = "SEIF_BENCH_PG_URL"
MACHINE_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE_PREFIX = "seif_bench_"
SPREAD = 256
"""The calls of one context are this many calls apart (the calls in flight together use
different contexts)."""
SAMPLE_S = 0.5
"""How often the CPU sampler reads ``/proc`` during a timed window (a process that ends within
the window keeps the CPU time of its last sample)."""
PG1_VS_SQLITE_GOAL = 0.5
PG3_VS_PG1_GOAL = 1.5
CLIENT_BOUND = 0.8
"""A client process using this fraction of one core or more over its timed phase is (nearly)
saturated: the rate it measures is then a lower bound."""


@dataclass(frozen=True, slots=True)
class Config:
    key: str
    label: str
    store: str  # "sqlite" or "postgresql"
    replicas: int


CONFIGS = (
    Config("sqlite", "1 runtime, SQLite (--data)", "sqlite", 1),
    Config("pg1", "1 replica, PostgreSQL", "postgresql", 1),
    Config("pg2", "2 replicas, PostgreSQL", "postgresql", 2),
    Config("pg3", "3 replicas, PostgreSQL", "postgresql", 3),
)
RATIOS = {
    "1 replica PostgreSQL vs SQLite": ("pg1", "sqlite"),
    "2 replicas vs 1": ("pg2", "pg1"),
    "3 replicas vs 1 replica PostgreSQL": ("pg3", "pg1"),
}


@dataclass(frozen=True, slots=True)
class Load:
    concurrency: int
    """Requests in flight at once (over all client processes), the same for every
    configuration."""
    requests: int
    """At most this many timed executes per configuration and round ..."""
    duration_s: float
    """... or this long, whichever comes first."""
    warmup: int
    """Untimed executes before each timed phase."""
    rounds: int
    clients: int
    """Client processes (the concurrency and the requests split between them)."""


FULL = Load(concurrency=32, requests=15_000, duration_s=12.0, warmup=600, rounds=2, clients=1)
QUICK = Load(concurrency=16, requests=400, duration_s=1.5, warmup=48, rounds=1, clients=1)


# ================================================================ the client (a subprocess)


def contexts_needed(total: int, per: int, spread: int = SPREAD) -> int:
    """How many contexts ``total`` calls use under :func:`context_of`."""
    block = per * spread
    return (total // block) * spread + min(spread, total % block)


def context_of(i: int, per: int, spread: int = SPREAD) -> int:
    """The context of call ``i``: blocks of ``per * spread`` calls over ``spread`` contexts,
    each context's calls ``spread`` apart (at most ``per`` of them)."""
    block, within = divmod(i, per * spread)
    return block * spread + within % spread


@dataclass(slots=True)
class Phase:
    sent: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    elapsed_ns: int = 0


def load_main(argv: list[str]) -> int:
    """``python -m bench.replicas load --url URL... --concurrency N --requests N --warmup N
    --duration S --calls-per-context N --name NAME``: resolves, warms up, prints ``READY
    {...}``, waits for a line on stdin, runs the timed phase and prints its JSON result. The
    bearer token comes from ``SEIF_BENCH_LOAD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m bench.replicas load")
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--calls-per-context", type=int, required=True)
    parser.add_argument("--name", default="c0")
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:  # asyncio's own loop: the same, with more client CPU
        result = asyncio.run(_client(args))
    else:
        result = uvloop.run(_client(args))
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


def _check_receipt(status: int, body: bytes) -> str | None:
    try:
        receipt = json.loads(body)
    except ValueError:
        return f"HTTP {status} not JSON"
    if status != 200 or not isinstance(receipt, dict):
        code = receipt.get("error", {}).get("code") if isinstance(receipt, dict) else None
        return f"HTTP {status} {code}"
    if receipt.get("status") != "SUCCEEDED" or receipt.get("duplicate") is not False:
        return f"{receipt.get('status')} {receipt.get('reason')} dup={receipt.get('duplicate')}"
    return None


class LoadClient:
    """The client's requests: resolves and executes, request ``i`` to replica ``i mod n``."""

    def __init__(self, args: argparse.Namespace) -> None:
        from servers.executor.http1 import Http1Client

        self.http = Http1Client()
        self.headers = [
            ("Authorization", f"Bearer {os.environ.get(LOAD_TOKEN_ENV, '')}"),
            ("Content-Type", "application/json"),
        ]
        bases: list[str] = args.url
        self.resolve_urls = [base + "/v1/context/resolve" for base in bases]
        self.execute_urls = [base + "/v1/context/tools/execute" for base in bases]
        self.concurrency: int = args.concurrency
        self.per: int = args.calls_per_context
        self.name: str = args.name
        self.refs: list[str] = [""] * contexts_needed(args.warmup + args.requests, self.per)

    async def closed_loop(
        self,
        indices: range,
        duration_s: float,
        request: Callable[[int], tuple[str, bytes]],
        check: Callable[[int, int, bytes], str | None],
    ) -> Phase:
        """``concurrency`` workers take the next index until ``indices`` or the duration runs
        out, each waiting for its answer before sending again."""
        from servers.executor.http1 import TransportError

        phase = Phase()
        cursor = iter(indices)
        deadline = time.perf_counter() + duration_s

        async def worker() -> None:
            for i in cursor:
                if time.perf_counter() >= deadline:
                    return
                phase.sent += 1
                url, body = request(i)
                start = time.perf_counter_ns()
                try:
                    answer = await self.http.request(
                        "POST", url, self.headers, body, timeout_s=60.0, max_bytes=1 << 20
                    )
                except TransportError as error:
                    phase.errors[error.reason] += 1
                    continue
                took = time.perf_counter_ns() - start
                problem = check(i, answer.status, answer.body)
                if problem is None:
                    phase.latencies_ns.append(took)
                else:
                    phase.errors[problem] += 1

        began = time.perf_counter_ns()
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        phase.elapsed_ns = time.perf_counter_ns() - began
        return phase

    def resolve(self, i: int) -> tuple[str, bytes]:
        urls = self.resolve_urls
        return urls[i % len(urls)], resolve_body(i)

    def resolved(self, i: int, status: int, body: bytes) -> str | None:
        if status != 200:
            return f"resolve HTTP {status}"
        found = CONTEXT_REF.search(body)
        if found is None:
            return "resolve: no contextRef"
        self.refs[i] = found.group(1).decode()
        return None

    def execute(self, i: int) -> tuple[str, bytes]:
        call = {
            "contextRef": self.refs[context_of(i, self.per)],
            "tool": TOOL,
            "callId": f"{self.name}-{i}",
            "arguments": ARGUMENTS,
        }
        urls = self.execute_urls
        return urls[i % len(urls)], json.dumps(call, separators=(",", ":")).encode()

    @staticmethod
    def executed(_i: int, status: int, body: bytes) -> str | None:
        return _check_receipt(status, body)


async def _client(args: argparse.Namespace) -> dict[str, Any]:
    client = LoadClient(args)
    began = time.perf_counter()
    contexts = await client.closed_loop(
        range(len(client.refs)), 3600.0, client.resolve, client.resolved
    )
    if contexts.errors:
        raise RuntimeError(f"resolving the contexts failed: {dict(contexts.errors)}")
    resolve_s = time.perf_counter() - began
    warm = await client.closed_loop(range(args.warmup), 3600.0, client.execute, client.executed)
    ready = {
        "contexts": len(client.refs),
        "resolve_s": round(resolve_s, 3),
        "warmup": {"sent": warm.sent, "ok": len(warm.latencies_ns), "errors": dict(warm.errors)},
    }
    print("READY " + json.dumps(ready), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    before = resource.getrusage(resource.RUSAGE_SELF)
    timed = await client.closed_loop(
        range(args.warmup, args.warmup + args.requests),
        args.duration,
        client.execute,
        client.executed,
    )
    after = resource.getrusage(resource.RUSAGE_SELF)
    await client.http.close()
    return {
        **ready,
        "sent": timed.sent,
        "ok": len(timed.latencies_ns),
        "errors": dict(timed.errors),
        "elapsed_s": round(timed.elapsed_ns / 1e9, 4),
        "cpu_s": [
            round(after.ru_utime - before.ru_utime, 3),
            round(after.ru_stime - before.ru_stime, 3),
        ],
        "latencies_ns": timed.latencies_ns,
    }


# ================================================================ CPU time from /proc


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PG_OURS = "postgres: backends of the database"
PG_SERVER = "postgres: server processes (WAL writer, checkpointer, ...)"
PG_OTHER = "postgres: other databases' backends"
OTHER = "other processes"
_PG_SERVER_TITLES = ("checkpointer", "background writer", "walwriter", "autovacuum launcher",
                     "logical replication launcher", "archiver", "stats collector",
                     "startup", "walreceiver", "walsender")  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProcStat:
    comm: str
    ppid: int
    ticks: int  # user + system


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
                    int(fields[11]) + int(fields[12]))  # fmt: skip


def parent_of(pid: int) -> int | None:
    found = proc_stat(f"/proc/{pid}/stat")
    return None if found is None else found.ppid


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
        waited: dict[str, float] = {}
        kinds = {**self._kind, **{path: name for name, path in self._threads.items()}}
        for path, last in self._wait_last.items():
            kind = kinds[path]
            waited[kind] = waited.get(kind, 0.0) + (last - self._wait_first.get(path, 0)) / 1e9
        out: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "components_s": {k: round(v, 3) for k, v in components.items()},
            "runqueue_wait_s": {k: round(v, 3) for k, v in waited.items()},
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


# ================================================================ PostgreSQL


@dataclass
class PgServer:
    """The server the run creates its databases on."""

    url: str
    kind: str  # "configured", "machine" or "private"
    settings: dict[str, str]
    postmaster: int | None
    stop: Callable[[], None] = lambda: None

    @property
    def durable(self) -> bool:
        return self.settings.get("fsync") == "on" and self.settings.get("synchronous_commit") in (
            "on",
            "remote_write",
            "remote_apply",
        )


def _answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError):
        return False
    return True


def find_server() -> PgServer:
    """``SEIF_BENCH_PG_URL``, else the machine's server, else a private one (fsync off)."""
    import psycopg

    stop: Callable[[], None] = lambda: None  # noqa: E731
    configured = os.environ.get(PG_URL_ENV)
    if configured:
        url, kind = configured, "configured"
    elif _answers(MACHINE_PG_URL):
        url, kind = MACHINE_PG_URL, "machine"
    else:
        tests = str(REPO / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        try:
            support: Any = importlib.import_module("pg_support")
            private = support.start_private_server()
        except Exception as error:  # no binaries, or they did not start
            raise RuntimeError(
                f"no PostgreSQL server: nothing answered at {MACHINE_PG_URL}, "
                f"{PG_URL_ENV} is not set, and a private server did not start ({error})"
            ) from None
        url, kind, stop = private.url, "private", private.stop
    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes",
             "wal_sync_method", "commit_delay", "max_connections", "shared_buffers")  # fmt: skip
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        settings = {name: str(_one(conn, f"SHOW {name}")) for name in names}
        backend = int(_one(conn, "SELECT pg_backend_pid()"))
    postmaster = parent_of(backend)  # None unless the server runs on this machine
    if postmaster is not None and not _is_postgres(postmaster):
        postmaster = None
    return PgServer(url, kind, settings, postmaster, stop)


def _one(conn: Any, query: str) -> Any:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _is_postgres(pid: int) -> bool:
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def with_database(url: str, name: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return urlunsplit(urlsplit(url)._replace(path="/" + name))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=name)


@contextlib.contextmanager
def new_database(server: PgServer) -> Iterator[tuple[str, str]]:
    """A new empty database (its URL and name), dropped afterwards (its sessions ended)."""
    import psycopg
    from psycopg import sql

    name = DATABASE_PREFIX + secrets.token_hex(6)
    create = sql.SQL(
        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
    ).format(sql.Identifier(name))
    with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield with_database(server.url, name), name
    finally:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
            conn.execute(drop)


def pg_counters(server: PgServer) -> dict[str, int]:
    """The server's WAL position (bytes) and its next transaction id: exact at once (unlike the
    statistics views, which backends update up to seconds late), but for the whole server, so
    any other database's writes count too."""
    import psycopg

    with psycopg.connect(server.url, connect_timeout=5, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
            " pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
        ).fetchone()
    assert row is not None
    return {"wal_bytes": int(row[0]), "transaction_ids": int(row[1])}


def pg_stored(url: str) -> dict[str, Any]:
    """Intents per status and decision-log records per event in a replicas' database."""
    import psycopg

    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        intents = conn.execute("SELECT status, count(*) FROM intents GROUP BY status").fetchall()
        events = conn.execute("SELECT event, count(*) FROM decision_log GROUP BY event").fetchall()
    return {
        "intents": {str(s): int(c) for s, c in intents},
        "log_events": {str(e): int(c) for e, c in events},
    }


# ================================================================ the processes


@dataclass
class Files:
    """The build, bindings (with a ``traceKeyRef``) and credentials of the run."""

    work: Path
    env: dict[str, str]
    calls_per_context: int

    @property
    def build(self) -> Path:
        return self.work / "build"

    def write(self, executor_url: str) -> None:
        bindings = {
            "environment": "bench",
            "revision": 1,
            "traceKeyRef": f"env:{TRACE_KEY_ENV}",
            "tools": {
                tool: {"endpoint": f"{executor_url}/{tool}", "secretRef": f"env:{var}"}
                for tool, (var, _) in TOOL_SECRETS.items()
            },
        }
        credentials = {
            "credentials": [
                {
                    "id": "bench-app",
                    "tokenRef": "env:SEIF_APP_TOKEN",
                    "scopes": ["context.resolve", "tools.execute"],
                }
            ]
        }
        (self.work / "bindings.json").write_text(json.dumps(bindings))
        (self.work / "credentials.json").write_text(json.dumps(credentials))

    def serve_argv(self, store: list[str]) -> list[str]:
        return [
            sys.executable,
            "-m",
            "seif.cli",
            "serve",
            "--build",
            str(self.build),
            "--bindings",
            str(self.work / "bindings.json"),
            "--credentials",
            str(self.work / "credentials.json"),
            *store,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ]


def prepare_files(work: Path) -> Files:
    from bench.runtime import REFERENCE
    from compiler import compile_project, write_build

    ir = compile_project(REFERENCE)
    write_build(ir, work / "build")
    env = {**_env(), TRACE_KEY_ENV: TRACE_KEY}
    return Files(work, env, ir.tool_by_id[TOOL].max_calls)


class Client:
    """A client process: ``READY`` once its contexts are resolved and its warm-up done; its
    timed phase starts at :meth:`go`; :meth:`result` is its JSON line."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _line(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            self.kill()
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the client failed or timed out: {tail}")
        return line

    def ready(self, timeout: float = 600.0) -> dict[str, Any]:
        line = self._line(timeout)
        if not line.startswith("READY "):
            raise RuntimeError(f"the client said {line[:200]!r}")
        ready: dict[str, Any] = json.loads(line[6:])
        return ready

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self._line(timeout))
        self.proc.wait(30)
        return result

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def client_argv(urls: list[str], load: Load, files: Files, index: int) -> list[str]:
    share = load.concurrency // load.clients + (index < load.concurrency % load.clients)
    requests = load.requests // load.clients + (index < load.requests % load.clients)
    argv = [sys.executable, "-m", "bench.replicas", "load"]
    for url in urls:
        argv += ["--url", url]
    return [
        *argv,
        *("--concurrency", str(share), "--requests", str(requests)),
        *("--warmup", str(max(1, load.warmup // load.clients))),
        *("--duration", str(load.duration_s)),
        *("--calls-per-context", str(files.calls_per_context)),
        *("--name", f"c{index}"),
    ]


# ================================================================ one configuration


def measure_config(
    config: Config,
    round_: int,
    load: Load,
    files: Files,
    executor: Server,
    server: PgServer | None,
) -> dict[str, Any]:
    """One configuration on a fresh store: start its runtimes, let the clients resolve and warm
    up, time them, stop the runtimes and read the store back."""
    tag = f"{config.key}-{round_}"
    with contextlib.ExitStack() as held:
        database: str | None = None
        if config.store == "postgresql":
            assert server is not None
            url, database = held.enter_context(new_database(server))
            stores = [["--store", url, "--replica-id", f"r{i}"] for i in range(config.replicas)]
        else:
            data = files.work / f"data-{tag}"
            stores = [["--data", str(data)]]
        runtimes = [
            Server(f"replica r{i}", files.serve_argv(s), files.env, files.work / f"{tag}-r{i}.log")
            for i, s in enumerate(stores)
        ]
        clients: list[Client] = []
        try:
            for runtime in runtimes:
                runtime.wait_listening()
                check_ready(runtime.url)
            before = executor_counts(executor.url)
            env = {**files.env, LOAD_TOKEN_ENV: APP_TOKEN}
            clients = [
                Client(
                    client_argv([r.url for r in runtimes], load, files, k),
                    env,
                    files.work / f"{tag}-c{k}.log",
                )
                for k in range(load.clients)
            ]
            phase = timed_window(runtimes, executor, clients, server, database, load)
        finally:
            for client in clients:
                client.kill()
            codes = [runtime.stop() for runtime in runtimes]
        for runtime, code in zip(runtimes, codes, strict=True):
            if code != 0:
                raise RuntimeError(f"{runtime.name} exited {code}: {runtime.tail()}")
        after = executor_counts(executor.url)
        if config.store == "postgresql":
            stored = pg_stored(url)
        else:
            stored = {"intents": stored_intents(data), "log_events": None}
    phase["dispatched_in_all"] = after["executions"] - before["executions"]
    return {"config": config.key, "round": round_, "replicas": config.replicas, **phase,
            "stored": stored}  # fmt: skip


def timed_window(
    runtimes: list[Server],
    executor: Server,
    clients: list[Client],
    server: PgServer | None,
    database: str | None,
    load: Load,
) -> dict[str, Any]:
    """Wait for the clients to be ready, then time them all at once, sampling the CPU time of
    every process meanwhile; the figures of the window."""
    ready = [client.ready() for client in clients]
    named = {r.pid: f"replica r{i}" for i, r in enumerate(runtimes)}
    named |= {executor.pid: "executor", os.getpid(): "bench (this process)"}
    named |= {c.proc.pid: "client" for c in clients}
    threads = {
        f"replica r{i} event loop thread": f"/proc/{r.pid}/task/{r.pid}/stat"
        for i, r in enumerate(runtimes)
    }
    sampler = Sampler(named, threads, server.postmaster if server else None, database)
    pg_before = pg_counters(server) if server and database else {}
    before = executor_counts(executor.url)
    sampler.start()
    for client in clients:
        client.go()
    results = [client.result(timeout=120 + 3 * load.duration_s) for client in clients]
    cpu = sampler.stop()
    after = executor_counts(executor.url)
    pg_after = pg_counters(server) if server and database else {}
    latencies = [ns for result in results for ns in result.pop("latencies_ns")]
    ok = sum(r["ok"] for r in results)
    elapsed = max(r["elapsed_s"] for r in results)
    warm_ok = sum(r["warmup"]["ok"] for r in ready)
    return {
        "ok": ok,
        "sent": sum(r["sent"] for r in results),
        "errors": dict(sum((Counter(r["errors"]) for r in results), Counter())),
        "warmup": {
            "ok": warm_ok,
            "errors": dict(sum((Counter(r["warmup"]["errors"]) for r in ready), Counter())),
        },
        "elapsed_s": elapsed,
        "rps": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles(latencies),
        "latencies_ns": latencies,
        "contexts_resolved_untimed": sum(r["contexts"] for r in ready),
        "resolve_s": max(r["resolve_s"] for r in ready),
        "client_cpu_s": [round(sum(r["cpu_s"][j] for r in results), 3) for j in (0, 1)],
        "client_busiest_core_share": round(
            max(sum(r["cpu_s"]) / r["elapsed_s"] for r in results if r["elapsed_s"]), 3
        ),
        "dispatched_in_window": after["executions"] - before["executions"],
        "describes_in_window": after["describes"] - before["describes"],
        "succeeded_in_all": ok + warm_ok,
        "cpu": cpu,
        "pg": {k: pg_after[k] - pg_before[k] for k in pg_after if k in pg_before},
    }


# ================================================================ the run


def measure(load: Load) -> dict[str, Any]:
    server = find_server()
    try:
        with tempfile.TemporaryDirectory(prefix="seif-bench-replicas-") as tmp:
            files = prepare_files(Path(tmp))
            fsync = [fsync_us(files.work)]
            loadavg = _loadavg()
            executor = Server("executor", executor_argv(), files.env, files.work / "executor.log")
            phases: list[dict[str, Any]] = []
            try:
                executor.wait_listening()
                files.write(executor.url)
                get_json(executor.url + "/_stats")
                for round_ in range(load.rounds):
                    order = CONFIGS if round_ % 2 == 0 else tuple(reversed(CONFIGS))
                    for config in order:
                        phases.append(measure_config(config, round_, load, files, executor, server))
            finally:
                executor.stop()
            fsync.append(fsync_us(files.work))
    finally:
        server.stop()
    return {
        "phases": phases,
        "server": server,
        "fsync_us": fsync,
        "calls_per_context": files.calls_per_context,
        "loadavg_before": loadavg,
        "loadavg_after": _loadavg(),
    }


def _loadavg() -> list[float] | None:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def run(*, quick: bool = False) -> dict[str, Any]:
    load = QUICK if quick else FULL
    return report(load, measure(load), quick=quick)


REPLICAS, LOOPS = "replicas (all threads)", "replicas' event loop threads (part of the above)"
UNATTRIBUTED = "unattributed (interrupts, processes that exited)"
SERVING = (REPLICAS, PG_OURS, PG_SERVER, "executor", "client", "bench (this process)")
"""The components of the benchmark itself; the others are other load on the machine."""
COMPONENT_ORDER = (*SERVING[:1], LOOPS, *SERVING[1:], PG_OTHER, OTHER, UNATTRIBUTED)


def loop_shares(
    cpu_s: float, waited_s: float, samples: Counter[str], wall_s: float
) -> dict[str, float]:
    """Where the replicas' event loop threads spent the window, as shares of its wall time
    (per thread): on a core and waiting for one (from ``/proc``), and what the sampled system
    calls say of the rest."""
    if not wall_s:
        return {}
    out = {"on a core": round(cpu_s / wall_s, 3), "waiting for a core": round(waited_s / wall_s, 3)}
    total = sum(samples.values())
    for state, count in sorted(samples.items(), key=lambda kv: -kv[1]):
        out[f"sampled: {state}"] = round(count / total, 3)
    return out


def other_load_cores(cpu: dict[str, Any]) -> float | None:
    """Cores busy with other load in one window: other databases' backends, other processes,
    and machine time no process accounts for."""
    if not cpu["wall_s"]:
        return None
    parts: dict[str, float] = cpu["components_s"]
    other = sum(parts.get(k, 0.0) for k in (PG_OTHER, OTHER))
    if "machine_s" in cpu:
        processes = sum(v for k, v in parts.items() if not k.endswith("event loop thread"))
        busy: float = cpu["machine_s"]["busy"]
        other += max(0.0, busy - processes)
    wall: float = cpu["wall_s"]
    return round(other / wall, 3)


def combine(config: Config, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's figures over its rounds."""
    ok = sum(p["ok"] for p in phases)
    elapsed = sum(p["elapsed_s"] for p in phases)
    latencies = [ns for p in phases for ns in p["latencies_ns"]]
    dispatched = sum(p["dispatched_in_window"] for p in phases)
    wall = sum(p["cpu"]["wall_s"] for p in phases)
    seconds: defaultdict[str, float] = defaultdict(float)
    machine: Counter[str] = Counter()
    others: defaultdict[str, float] = defaultdict(float)
    waited: defaultdict[str, float] = defaultdict(float)
    loop_states: Counter[str] = Counter()
    for p in phases:
        for name, value in p["cpu"]["components_s"].items():
            if name.endswith("event loop thread"):
                seconds[LOOPS] += value
            elif name.startswith("replica "):
                seconds[REPLICAS] += value
            else:
                seconds[name] += value
        for name, value in p["cpu"]["runqueue_wait_s"].items():
            if name.endswith("event loop thread"):
                waited[LOOPS] += value
            else:
                waited[REPLICAS if name.startswith("replica ") else name] += value
        loop_states.update(p["cpu"]["event_loop_samples"])
        machine.update(p["cpu"].get("machine_s", {}))
        for name, value in p["cpu"]["busiest_other_processes_s"].items():
            others[name] += value
    processes = sum(v for k, v in seconds.items() if k != LOOPS)
    if machine:
        seconds[UNATTRIBUTED] = max(0.0, machine["busy"] - processes)
    serving = sum(seconds[k] for k in SERVING)
    other = sum(seconds[k] for k in (PG_OTHER, OTHER, UNATTRIBUTED))
    shown = [name for name in COMPONENT_ORDER if name in seconds]
    cpu: dict[str, Any] = {
        "window_wall_s": round(wall, 3),
        "dispatches_in_window": dispatched,
        "cpu_s": {name: round(seconds[name], 3) for name in shown},
        "cpu_us_per_dispatch": {
            name: round(seconds[name] / dispatched * 1e6, 1) for name in shown if dispatched
        },
        "benchmark_cpu_us_per_dispatch": round(serving / dispatched * 1e6, 1)
        if dispatched
        else None,
        "cores_busy": {name: round(seconds[name] / wall, 3) for name in shown} if wall else {},
        "benchmark_cores_busy": round(serving / wall, 3) if wall else None,
        "other_load_cores_busy": round(other / wall, 3) if wall else None,
        "busiest_other_processes_s": {
            k: round(v, 3) for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:5]
        },
        "postgres_backends": max(p["cpu"]["backends"] for p in phases),
        "runqueue_wait_us_per_dispatch": {
            name: round(waited[name] / dispatched * 1e6, 1)
            for name in COMPONENT_ORDER
            if name in waited and dispatched
        },
        "threads_waiting_for_a_core": round(
            sum(v for k, v in waited.items() if k != LOOPS) / wall, 3
        )
        if wall
        else None,
        "event_loop_threads": loop_shares(
            seconds[LOOPS], waited[LOOPS], loop_states, wall * config.replicas
        ),
    }
    if machine:
        total = machine["busy"] + machine["idle"] + machine["iowait"]
        cpu["machine_utilisation"] = round(machine["busy"] / total, 3) if total else None
        cpu["machine_cores_busy"] = round(machine["busy"] / wall, 3) if wall else None
        cpu["machine_iowait_share"] = round(machine["iowait"] / total, 3) if total else None
    loops = [
        v / p["cpu"]["wall_s"]
        for p in phases
        for k, v in p["cpu"]["components_s"].items()
        if k.endswith("event loop thread") and p["cpu"]["wall_s"]
    ]
    cpu["busiest_event_loop_core_share"] = round(max(loops), 3) if loops else None
    pg: Counter[str] = Counter()
    for p in phases:
        pg.update(p["pg"])
    stored_ok = all(
        p["stored"]["intents"].get("SUCCEEDED", 0) >= p["succeeded_in_all"]
        and not p["stored"]["intents"].get("PENDING")
        and (
            p["stored"]["log_events"] is None
            or min(p["stored"]["log_events"].get(e, 0) for e in ("INTENT", "RESULT"))
            >= p["succeeded_in_all"]
        )
        for p in phases
    )
    once = all(
        p["dispatched_in_window"] == p["ok"] and p["dispatched_in_all"] == p["succeeded_in_all"]
        for p in phases
    )
    return {
        "label": config.label,
        "store": config.store,
        "replicas": config.replicas,
        "dispatches_per_s": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles(latencies),
        "ok": ok,
        "errors": dict(sum((Counter(p["errors"]) for p in phases), Counter())),
        "warmup_errors": dict(sum((Counter(p["warmup"]["errors"]) for p in phases), Counter())),
        "elapsed_s": round(elapsed, 3),
        "rounds": [
            {k: p[k] for k in ("round", "rps", "p50_ms", "p99_ms", "ok", "elapsed_s")}
            | {"other_load_cores_busy": other_load_cores(p["cpu"])}
            for p in phases
        ],
        "client_cpu_s": [round(sum(p["client_cpu_s"][j] for p in phases), 3) for j in (0, 1)],
        "client_busiest_core_share": max(p["client_busiest_core_share"] for p in phases),
        "contexts_resolved_untimed": sum(p["contexts_resolved_untimed"] for p in phases),
        "resolve_s": round(sum(p["resolve_s"] for p in phases), 3),
        "dispatched_once": once,
        "stored": [p["stored"] for p in phases],
        "recorded": stored_ok,
        "cpu": cpu,
        "pg_per_dispatch": {k: round(v / dispatched, 2) for k, v in pg.items()}
        if dispatched
        else {},
    }


def report(load: Load, measured: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    n_cores = cores()
    server: PgServer = measured["server"]
    by_config = {
        config.key: combine(config, [p for p in measured["phases"] if p["config"] == config.key])
        for config in CONFIGS
    }
    rows = [
        {
            "name": config.label,
            "impl": "seif serve",
            "median_ns": round(by_config[config.key]["p50_ms"] * 1e6),
            "p99_ns": round(by_config[config.key]["p99_ms"] * 1e6),
            "calls": by_config[config.key]["ok"],
            "rps": by_config[config.key]["dispatches_per_s"],
        }
        for config in CONFIGS
    ]
    rates = {key: c["dispatches_per_s"] or math.nan for key, c in by_config.items()}
    ratios = {label: round(rates[a] / rates[b], 3) for label, (a, b) in RATIOS.items()}
    goals = {
        "pg1_vs_sqlite": {
            "goal": f"1 PostgreSQL replica >= {PG1_VS_SQLITE_GOAL} x SQLite",
            "ratio": ratios["1 replica PostgreSQL vs SQLite"],
            "met": ratios["1 replica PostgreSQL vs SQLite"] >= PG1_VS_SQLITE_GOAL,
        },
        "pg3_vs_pg1": {
            "goal": f"3 replicas >= {PG3_VS_PG1_GOAL} x 1 replica",
            "ratio": ratios["3 replicas vs 1 replica PostgreSQL"],
            "met": ratios["3 replicas vs 1 replica PostgreSQL"] >= PG3_VS_PG1_GOAL,
        },
    }
    out: dict[str, Any] = {
        "config": {
            **asdict(load),
            "cores": n_cores,
            "pinned": False,
            "calls_per_context": measured["calls_per_context"],
            "context_spread": SPREAD,
            "tool": TOOL,
            "executor": str(EXECUTOR.relative_to(REPO)),
            "client": "python -m bench.replicas load: servers.executor.http1 client on uvloop, "
            "round-robin over the replicas",
            "postgresql": {
                "kind": server.kind,
                "durable": server.durable,
                "settings": server.settings,
                "cpu_measured": server.postmaster is not None,
            },
            "sqlite": "WAL, synchronous=FULL, decision log fsynced per record",
            "fsync_us_before_after": measured["fsync_us"],
            "loadavg_before_after": [measured["loadavg_before"], measured["loadavg_after"]],
            "wrk_installed": shutil.which("wrk") is not None,
        },
        "configurations": by_config,
        "rows": rows,
        "ratios": ratios,
        "goals": goals,
    }
    out["notes"] = notes(out, quick=quick)
    return out


def notes(out: dict[str, Any], *, quick: bool) -> list[str]:
    config, goals = out["config"], out["goals"]
    pg = config["postgresql"]
    lines = [
        f"{config['concurrency']} requests in flight ({config['clients']} client process(es)), at "
        f"most {config['requests']} timed executes or {config['duration_s']:.0f} s per "
        f"configuration and round after {config['warmup']} warm-up executes; "
        f"{config['rounds']} round(s); {config['cores']} cores, nothing pinned",
        f"PostgreSQL {pg['settings'].get('server_version')} ({pg['kind']}): fsync "
        f"{pg['settings'].get('fsync')}, synchronous_commit "
        f"{pg['settings'].get('synchronous_commit')}"
        + ("" if pg["durable"] else " -- NOT durable, the figures flatter PostgreSQL")
        + f"; a 200-byte append + fsync took {config['fsync_us_before_after'][0]} us before, "
        f"{config['fsync_us_before_after'][1]} us after (median)",
        f"load average before the run {config['loadavg_before_after'][0]}, after "
        f"{config['loadavg_before_after'][1]}",
    ]
    for key, c in out["configurations"].items():
        lines += config_notes(key, c, config["cores"])
    for goal in goals.values():
        lines.append(f"target {goal['goal']}: {goal['ratio']:.2f} x -> "
                     + ("met" if goal["met"] else "NOT met"))  # fmt: skip
    if quick:
        lines.append("--quick: a smoke run, the figures are not meaningful")
    return lines


SHORT = {
    REPLICAS: "replicas",
    LOOPS: "their event loops",
    PG_OURS: "pg backends",
    PG_SERVER: "pg server processes",
    "executor": "executor",
    "client": "client",
    "bench (this process)": "bench",
    PG_OTHER: "other databases' backends",
    OTHER: "other processes",
    UNATTRIBUTED: "unattributed",
}


def config_notes(key: str, c: dict[str, Any], n_cores: int) -> list[str]:
    cpu = c["cpu"]
    per = cpu["cpu_us_per_dispatch"]

    def listed(values: dict[str, float], names: tuple[str, ...]) -> str:
        return ", ".join(f"{SHORT[n]} {values[n]:.0f}" for n in names if n in values)

    rounds = ", ".join(
        f"{r['rps']} (other load {r['other_load_cores_busy']} cores)" for r in c["rounds"]
    )
    waits = cpu["runqueue_wait_us_per_dispatch"]
    pg = c["pg_per_dispatch"]
    lines = [
        f"{key}: {c['dispatches_per_s']:.0f} dispatches/s, p50 {c['p50_ms']:.2f} ms, "
        f"p99 {c['p99_ms']:.2f} ms" + (f" (rounds: {rounds}/s)" if len(c["rounds"]) > 1 else "")
        + (f"; ERRORS {c['errors']} {c['warmup_errors']}" if c["errors"] or c["warmup_errors"]
           else "")
        + ("" if c["dispatched_once"] else "; NOT dispatched exactly once")
        + ("" if c["recorded"] else "; NOT every success recorded"),
        f"  CPU us per dispatch: {listed(per, (REPLICAS, LOOPS, *SERVING[1:]))}: "
        f"{cpu['benchmark_cpu_us_per_dispatch']} for the benchmark; other load: "
        f"{listed(per, (PG_OTHER, OTHER, UNATTRIBUTED))}",
        f"  cores busy: {cpu.get('machine_cores_busy')} of {n_cores} (the benchmark "
        f"{cpu['benchmark_cores_busy']}, other load {cpu['other_load_cores_busy']}; iowait "
        f"{cpu.get('machine_iowait_share')}); busiest event loop "
        f"{cpu['busiest_event_loop_core_share']}, client {c['client_busiest_core_share']} of a "
        f"core; {cpu['threads_waiting_for_a_core']} threads waiting for a core on average (us "
        f"per dispatch: {listed(waits, (REPLICAS, *SERVING[1:]))})"
        + (f"; {cpu['postgres_backends']} backends" if cpu["postgres_backends"] else "")
        + (
            f"; per dispatch {pg.get('wal_bytes', 0):.0f} WAL bytes, "
            f"{pg.get('transaction_ids', 0):.2f} transaction ids (whole server)"
            if pg
            else ""
        ),
    ]  # fmt: skip
    loops = cpu["event_loop_threads"]
    if loops:
        lines.append(
            "  event loop threads, share of the window each: "
            + ", ".join(f"{state} {share:.2f}" for state, share in loops.items())
        )
    if c["client_busiest_core_share"] >= CLIENT_BOUND:
        lines.append(f"  {key}: the client was CPU-bound: its rate is a lower bound")
    return lines


# ================================================================ entry


ROLES: dict[str, Callable[[list[str]], int]] = {"load": load_main}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ROLES:
        return ROLES[argv[0]](argv[1:])
    print("python -m bench replicas [--json] [--quick] runs the benchmark; this entry point "
          "serves its roles: " + ", ".join(ROLES))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The runtime under HTTP load: resolve and execute against a bare aiohttp JSON handler.

Four kinds of process, all on loopback, each started here as a subprocess:

- the synthetic executor of the reference tools (``examples/reference-tools/executor.py``);
- the runtime, ``seif serve`` on a build of ``reference/agent-tools/context-project.json``
  written for the run, with a fresh data directory (as shipped: SQLite WAL with
  ``synchronous=FULL``, every intent committed before dispatch, the decision log fsynced per
  record);
- a bare aiohttp server (``python -m bench.runtime bare``): one ``POST /echo`` route that reads
  the JSON body and answers a small ``web.json_response``;
- the load generator (``python -m bench.runtime load``): an aiohttp client, closed loop,
  ``connections`` workers on as many keep-alive connections, stopping at a request count or a
  duration, whichever comes first, after a warm-up that is not counted.

The same load generator measures, in one run: the bare handler, ``POST /v1/context/resolve``
(objective ``learner``, consumer ``tutor-app``, a distinct random ``traceId`` per request as
applications send: every resolve refreshes the observations of its two candidate tools with
``describe``), and ``POST /v1/context/tools/execute`` (``inspect-context``
with distinct callIds, three per context as the tool's ``maxCalls`` allows, the contexts being
those the resolve phase made; each execute probes ``describe``, commits its intent, dispatches
to the executor and completes its receipt). Every answer is checked (a 200, a contextRef, a
``SUCCEEDED`` receipt that is not a duplicate); anything else is counted as an error and left
out of the figures. After the run the dispatch store is read back: every execute that succeeded
must have its intent recorded ``SUCCEEDED``.

Figures: requests per second (successful requests / wall time of the timed phase), p50 and p99
latency (client side, per request), the CPU time (user and system) the server processes spent
per request (from ``/proc``, so independent of how the cores were shared) and the load
generator's own CPU time. Rows are per target, ``median_ns`` being the p50 latency. ``ratios``
are rps of the target / rps of the bare handler. The targets: resolve at least half the bare
handler's rate; execute at least 1,000 calls per second on 2 cores with every intent durable.
Durable writes dominate execute, so the run also records what one small append + fsync costs
on the data directory's disk, before and after.

By default the run uses 2 cores whatever the machine has: the server under measure on the
first, the load generator and the executor on the second (``SEIF_BENCH_PIN=0``: no pinning).

``wrk`` is not used even when installed: the three targets must see the same load generator, and
execute needs a distinct callId per request. The Python load generator costs about as much CPU
per request as the bare server (compare ``loadgen_cpu_s`` with ``elapsed_s``): when it is the
bottleneck the bare rate is a lower bound, which flatters the ratios.

``python -m bench.runtime --profile [--mode execute|resolve] [--requests N]`` runs that load
against a runtime under cProfile (started through ``python -m bench.runtime profiled-serve`` with
``SEIF_BENCH_PROFILE`` naming the output file; the event loop thread and the worker threads of
``asyncio.to_thread`` are profiled apart) and prints where the time goes per request and the top
costs, then times the store, the decision log and ``to_thread`` in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import resource
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import (
    REPO,
    TICK,
    Phase,
    Server,
    latency_row,
    proc_stat,
    quantiles,
    run_json,
    started,
)
from bench.harness import closed_loop as run_closed_loop
from policy.json.strict import loads

REFERENCE = REPO / "reference/agent-tools/context-project.json"
EXECUTOR = REPO / "examples/reference-tools/executor.py"

APP_TOKEN = "bench-app-token-5f1c0e7a9b"
APPROVAL_TOKEN = "bench-approval-token-3d8e21c4"
TOOL_SECRETS = {
    "inspect-context": ("CONTEXT_TOOL_INSPECT_TOKEN", "bench-inspect-secret-7a1f"),
    "search-knowledge": ("CONTEXT_TOOL_SEARCH_TOKEN", "bench-search-secret-2b9c"),
    "propose-change": ("CONTEXT_TOOL_PROPOSE_TOKEN", "bench-propose-secret-6e4d"),
}
LOAD_TOKEN_ENV = "SEIF_BENCH_LOAD_TOKEN"
PROFILE_ENV = "SEIF_BENCH_PROFILE"
PIN_ENV = "SEIF_BENCH_PIN"
"""``0`` leaves every process on every core; otherwise (the default, with 2 cores or more) the
server under measure runs on the first core and the load generator and the executor on the
second: the run uses 2 cores whatever the machine has."""

OBJECTIVE, CONSUMER = "learner", "tutor-app"
TOOL = "inspect-context"
ARGUMENTS = {"ref": "course/data-literacy/module-2/lesson-3"}
PATHS = {"bare": "/echo", "resolve": "/v1/context/resolve", "execute": "/v1/context/tools/execute"}
_RESOLVE_HEAD = json.dumps({"objective": OBJECTIVE, "consumer": CONSUMER})[:-1].encode()


def resolve_body(_i: int) -> bytes:
    """A resolve request with its own ``traceId``, as an application sends one per request: a
    random W3C trace id (32 hex digits)."""
    return _RESOLVE_HEAD + b', "traceId": "' + os.urandom(16).hex().encode() + b'"}'


RESOLVE_GOAL = 0.5
"""Resolve must reach at least this fraction of the bare handler's rate."""
EXECUTE_GOAL_RPS = 1_000
"""Execute must reach this many calls per second on 2 cores, every intent durable."""
CONTEXT_REF = re.compile(rb'"contextRef":"([^"]+)"')


@dataclass(frozen=True, slots=True)
class Load:
    connections: int
    requests: int
    duration_s: float
    warmup: int


FULL = Load(connections=64, requests=20_000, duration_s=10.0, warmup=1_000)
QUICK = Load(connections=16, requests=300, duration_s=5.0, warmup=50)


# ================================================================ roles run as subprocesses


def bare_main(argv: list[str]) -> int:
    """``python -m bench.runtime bare [--host H] [--port P]``: the bare JSON handler."""
    from aiohttp import web

    from seif.serve.runtime import run_loop

    parser = argparse.ArgumentParser(prog="python -m bench.runtime bare")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)

    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"ok": True, "keys": len(body)})

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/echo", echo)
        runner = web.AppRunner(app, access_log=None)  # as `seif serve` does
        await runner.setup()
        try:
            await web.TCPSite(runner, args.host, args.port).start()
            host, port = runner.addresses[0][:2]
            print(f"bare aiohttp listening on http://{host}:{port}", flush=True)
            stop = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            await stop.wait()
        finally:
            await runner.cleanup()

    run_loop(serve())  # the event loop `seif serve` runs on: the baseline must share it
    return 0


def profiled_serve_main(argv: list[str]) -> int:
    """``python -m bench.runtime profiled-serve SERVE-ARGS...``: ``seif serve``, under cProfile
    when ``SEIF_BENCH_PROFILE`` names an output file. The event loop thread and every thread
    started afterwards (``asyncio.to_thread`` workers) get a profiler of their own; after a
    clean shutdown the event loop thread's statistics go to that file, the worker threads'
    (merged) to the same name plus ``.threads``. The profilers count each thread's own CPU time
    (``time.thread_time_ns``), not wall time: with wall time, a call that releases the GIL
    (``os.urandom``, a socket send) is charged with whatever the other threads did meanwhile."""
    import cProfile
    import pstats

    from seif.cli import main

    out = os.environ.get(PROFILE_ENV)
    if not out:
        return main(["serve", *argv])
    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_thread_profiler(*_args: object) -> None:
        # the first event of a new thread: its own profiler replaces this hook in that thread
        profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
        with lock:
            profilers.append(profiler)
        profiler.enable()

    threading.setprofile(start_thread_profiler)
    main_profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
    try:
        code: int = main_profiler.runcall(main, ["serve", *argv])
    finally:
        threading.setprofile(None)
        main_profiler.dump_stats(out)
        with lock:
            for profiler in profilers:
                profiler.create_stats()
            if profilers:
                pstats.Stats(*profilers).dump_stats(out + ".threads")
    return code


def load_main(argv: list[str]) -> int:
    """``python -m bench.runtime load --url URL --mode bare|resolve|execute ...``: one timed
    phase after a warm-up; prints one JSON object. The bearer token comes from
    ``SEIF_BENCH_LOAD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m bench.runtime load")
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", required=True, choices=sorted(PATHS))
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--calls-per-context", type=int, default=3)
    parser.add_argument("--contexts-in", type=Path)
    parser.add_argument("--contexts-out", type=Path)
    parser.add_argument("--watch", type=int, nargs="*", default=[], metavar="PID")
    args = parser.parse_args(argv)
    result = asyncio.run(_load(args))
    json.dump(result, sys.stdout)
    print()
    return 0


# ================================================================ the load generator


def cpu_seconds(pid: int, thread: int | None = None) -> tuple[float, float] | None:
    """User and system CPU time of a process (all its threads), or of one of its threads,
    from ``/proc``; None elsewhere."""
    stat = proc_stat(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    return None if stat is None else (stat.utime / TICK, stat.stime / TICK)


def cpu_delta(
    before: tuple[float, float] | None, after: tuple[float, float] | None
) -> list[float] | None:
    """The user and system CPU seconds between two :func:`cpu_seconds`."""
    if before is None or after is None:
        return None
    return [round(after[0] - before[0], 3), round(after[1] - before[1], 3)]


def per_request_us(user: float, system: float, ok: int) -> dict[str, float]:
    """CPU seconds spent over ``ok`` successful requests, in µs per request."""
    return {
        "user": round(user / ok * 1e6, 1),
        "system": round(system / ok * 1e6, 1),
        "total": round((user + system) / ok * 1e6, 1),
    }


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


Check = Callable[[int, bytes], str | None]
"""An answer's HTTP status and body to None (as expected) or a short description of what
was wrong (the error's key in the counts)."""


def _check_ok(status: int, _body: bytes) -> str | None:
    return None if status == 200 else f"HTTP {status}"


def _check_resolve(refs: list[str] | None) -> Check:
    def check(status: int, body: bytes) -> str | None:
        if status != 200:
            return f"HTTP {status}"
        found = CONTEXT_REF.search(body)
        if found is None:
            return "no contextRef"
        if refs is not None:
            refs.append(found.group(1).decode())
        return None

    return check


def receipt_problem(
    status: int, body: bytes, parse: Callable[[bytes], Any] = json.loads
) -> str | None:
    """None for the answer of an execute that dispatched (a 200 and a ``SUCCEEDED`` receipt
    that is not a duplicate), else what was wrong."""
    try:
        receipt = parse(body)
    except ValueError:
        return f"HTTP {status} not JSON"
    if status != 200 or not isinstance(receipt, dict):
        code = receipt.get("error", {}).get("code") if isinstance(receipt, dict) else None
        return f"HTTP {status} {code}"
    if receipt.get("status") != "SUCCEEDED" or receipt.get("duplicate") is not False:
        return f"{receipt.get('status')} {receipt.get('reason')} dup={receipt.get('duplicate')}"
    return None


def _check_execute(status: int, body: bytes) -> str | None:
    return receipt_problem(status, body, loads)


AnswerCheck = Callable[[int, str, bytes], str | None]
"""An answer's HTTP status, content type and body to None (as expected) or what was wrong."""
Request = tuple[str, str, dict[str, str] | None, bytes, AnswerCheck]
"""One request: method, URL, headers (None: the session's), body and the check of its answer."""


async def _phase(
    session: Any,
    url: str,
    body_for: Callable[[int], bytes],
    indices: range,
    connections: int,
    duration_s: float,
    check: Check,
) -> Phase:
    """:func:`closed_loop` of POSTs of ``body_for(i)`` to ``url``."""

    def checked(status: int, _kind: str, data: bytes) -> str | None:
        return check(status, data)

    def request_for(i: int) -> Request:
        return "POST", url, None, body_for(i), checked

    return await closed_loop(session, request_for, indices, connections, duration_s)


async def closed_loop(
    session: Any,
    request_for: Callable[[int], Request],
    indices: range,
    connections: int,
    duration_s: float,
) -> Phase:
    """:func:`bench.harness.closed_loop` of ``request_for(i)`` on an aiohttp ``session``,
    ``connections`` workers."""
    import aiohttp

    async def send(i: int) -> tuple[int, str | None]:
        method, url, headers, body, check = request_for(i)
        start = time.perf_counter_ns()
        try:
            async with session.request(method, url, data=body, headers=headers) as response:
                data = await response.read()
                status, kind = response.status, response.headers.get("Content-Type", "")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return 0, type(exc).__name__
        took = time.perf_counter_ns() - start
        return took, check(status, kind, data)

    return await run_closed_loop(send, indices, connections, duration_s)


async def _resolve_contexts(session: Any, url: str, count: int, connections: int) -> list[str]:
    refs: list[str] = []
    found = await _phase(
        session,
        url + PATHS["resolve"],
        resolve_body,
        range(count),
        connections,
        3600.0,
        _check_resolve(refs),
    )
    if found.errors:
        raise RuntimeError(f"resolving contexts for execute failed: {dict(found.errors)}")
    return refs


async def _load(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    token = os.environ.get(LOAD_TOKEN_ENV, "")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=args.connections)
    timeout = aiohttp.ClientTimeout(total=60)
    refs: list[str] | None = [] if args.contexts_out else None
    async with aiohttp.ClientSession(
        connector=connector, headers=headers, timeout=timeout, trust_env=False
    ) as session:
        contexts: list[str] = []
        resolved_untimed = 0
        per = args.calls_per_context
        if args.mode == "execute":
            if args.contexts_in and args.contexts_in.exists():
                contexts = args.contexts_in.read_text().split()
            need = math.ceil((args.warmup + args.requests) / per) - len(contexts)
            if need > 0:
                contexts += await _resolve_contexts(session, args.url, need, args.connections)
                resolved_untimed = need

            def execute_body(i: int) -> bytes:
                call = {
                    "contextRef": contexts[i // per],
                    "tool": TOOL,
                    "callId": f"bench-{i}",
                    "arguments": ARGUMENTS,
                }
                return json.dumps(call, separators=(",", ":")).encode()

            body_for: Callable[[int], bytes] = execute_body
            check: Check = _check_execute
        else:
            body_for = resolve_body
            check = _check_ok if args.mode == "bare" else _check_resolve(refs)
        url = args.url + PATHS[args.mode]
        warm = await _phase(
            session,
            url,
            body_for,
            range(args.warmup),
            args.connections,
            max(2.0, args.duration / 2),
            check,
        )
        cpu_before = {pid: cpu_seconds(pid) for pid in args.watch}
        loop_before = cpu_seconds(args.watch[0], args.watch[0]) if args.watch else None
        own_before = _own_cpu()
        timed = await _phase(
            session,
            url,
            body_for,
            range(args.warmup, args.warmup + args.requests),
            args.connections,
            args.duration,
            check,
        )
        own = _own_cpu() - own_before
        cpu_after = {pid: cpu_seconds(pid) for pid in args.watch}
        loop_after = cpu_seconds(args.watch[0], args.watch[0]) if args.watch else None
    if args.contexts_out and refs is not None:
        args.contexts_out.write_text("\n".join(refs) + "\n")
    elapsed = timed.elapsed_ns / 1e9
    ok = len(timed.latencies_ns)
    deltas = {pid: cpu_delta(before, cpu_after[pid]) for pid, before in cpu_before.items()}
    cpu = {str(pid): delta for pid, delta in deltas.items() if delta is not None}
    return {
        "mode": args.mode,
        "connections": args.connections,
        **timed.counts(),
        "warmup": warm.counts(),
        "elapsed_s": round(elapsed, 3),
        "rps": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles(timed.latencies_ns),
        "server_cpu_s": cpu,
        "server_loop_thread_cpu_s": cpu_delta(loop_before, loop_after),
        "loadgen_cpu_s": round(own, 3),
        "contexts_resolved_untimed": resolved_untimed,
    }


# ================================================================ the processes


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXT_TOOL_", "SEIF_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["SEIF_APP_TOKEN"] = APP_TOKEN
    env["SEIF_CONTEXT_TOOL_APPROVAL_TOKEN"] = APPROVAL_TOKEN
    for var, secret in TOOL_SECRETS.values():
        env[var] = secret
    return env


def _cpu_sets() -> tuple[set[int] | None, set[int] | None]:
    """(cores of the server under measure, cores of the load generator and the executor)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None, None
    if os.environ.get(PIN_ENV, "1") == "0" or len(cores) < 2:
        return None, None
    return {cores[0]}, {cores[1]}


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass
class Setup:
    """Files of one run: the build, bindings, credentials and the data directory."""

    work: Path
    env: dict[str, str]
    calls_per_context: int
    trace_key_ref: str | None = None
    """The bindings' ``traceKeyRef`` (the replicas' shared trace key), if any."""

    @property
    def build(self) -> Path:
        return self.work / "build"

    @property
    def data(self) -> Path:
        return self.work / "data"

    def write(self, executor_url: str) -> None:
        trace_key = {"traceKeyRef": self.trace_key_ref} if self.trace_key_ref else {}
        bindings = {
            "environment": "bench",
            "revision": 1,
            **trace_key,
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

    def serve_args(self, store: list[str] | None = None) -> list[str]:
        """``seif serve``'s arguments; the store ``--data DATA`` unless given."""
        return [
            "--build",
            str(self.build),
            "--bindings",
            str(self.work / "bindings.json"),
            "--credentials",
            str(self.work / "credentials.json"),
            *(["--data", str(self.data)] if store is None else store),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ]


def prepare_setup(work: Path, project: Path = REFERENCE) -> Setup:
    """The build of ``project`` (the reference project) and the environment of the run."""
    from compiler import compile_project, write_build

    ir = compile_project(project)
    write_build(ir, work / "build")
    return Setup(work, _env(), ir.tool_by_id[TOOL].max_calls)


def executor_argv() -> list[str]:
    tokens = [f"{tool}={var}" for tool, (var, _) in TOOL_SECRETS.items()]
    return [
        sys.executable,
        str(EXECUTOR),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--token-env",
        *tokens,
    ]


def runtime_argv(
    setup: Setup, *, profiled: bool = False, store: list[str] | None = None
) -> list[str]:
    if profiled:
        return [sys.executable, "-m", "bench.runtime", "profiled-serve", *setup.serve_args(store)]
    return [sys.executable, "-m", "seif.cli", "serve", *setup.serve_args(store)]


def get_json(url: str) -> Any:
    """GET on loopback, ignoring proxy settings of the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return json.load(response)


def check_ready(url: str) -> None:
    state = get_json(url + "/v1/ready")
    if not state.get("ready"):
        raise RuntimeError(f"runtime not ready: {state}")


def executor_counts(url: str) -> dict[str, int]:
    """``describe`` and ``execute`` requests the executor has served for ``TOOL``."""
    stats = get_json(url + "/_stats")
    return {
        "describes": stats["describes"].get(TOOL, 0),
        "executions": stats["executions"].get(TOOL, 0),
    }


def probe_counts(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    describes = after["describes"] - before["describes"]
    executions = after["executions"] - before["executions"]
    return {
        "describes": describes,
        "executions": executions,
        "describes_per_execute": round(describes / executions, 3) if executions else None,
    }


def generate(
    url: str,
    mode: str,
    load: Load,
    setup: Setup,
    *,
    watch: list[int],
    cpus: set[int] | None,
    contexts: Path | None = None,
) -> dict[str, Any]:
    """Run the load generator in a subprocess against one target; its JSON result."""
    argv = [
        sys.executable,
        "-m",
        "bench.runtime",
        "load",
        "--url",
        url,
        "--mode",
        mode,
        "--connections",
        str(load.connections),
        "--requests",
        str(load.requests),
        "--duration",
        str(load.duration_s),
        "--warmup",
        str(load.warmup),
        "--calls-per-context",
        str(setup.calls_per_context),
        "--watch",
        *map(str, watch),
    ]
    if contexts is not None:
        argv += ["--contexts-out" if mode == "resolve" else "--contexts-in", str(contexts)]
    env = {**setup.env, LOAD_TOKEN_ENV: APP_TOKEN}
    timeout = 300 + 3 * load.duration_s
    return run_json(argv, env, cpus, timeout=timeout, name=f"load generator ({mode})")


def fsync_us(directory: Path, count: int = 50) -> float:
    """Median time of a small append + fsync in ``directory``, in µs: what one durable record
    costs on this disk at this moment (the data directory's disk)."""
    import statistics

    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        times = []
        for _ in range(count):
            start = time.perf_counter_ns()
            os.write(fd, b"x" * 200)
            os.fsync(fd)
            times.append(time.perf_counter_ns() - start)
    finally:
        os.close(fd)
        path.unlink()
    return round(statistics.median(times) / 1000, 1)


def stored_intents(data: Path) -> dict[str, int]:
    """Intents per status in the dispatch store (read after the runtime stopped)."""
    db = sqlite3.connect(f"file:{data / 'dispatch.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT status, count(*) FROM intents GROUP BY status").fetchall()
    finally:
        db.close()
    return {status: count for status, count in rows}


def _durability_pragmas(data: Path) -> dict[str, Any]:
    db = sqlite3.connect(f"file:{data / 'dispatch.sqlite'}?mode=ro", uri=True)
    try:
        journal = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    return {"journal_mode": journal}


# ================================================================ the run


def run(*, quick: bool = False) -> dict[str, Any]:
    load = QUICK if quick else FULL
    server_cpus, other_cpus = _cpu_sets()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="seif-bench-runtime-") as tmp:
        setup = prepare_setup(Path(tmp))
        fsync = [fsync_us(setup.work)]
        with started("executor", executor_argv(), setup.env, setup.work / "executor.log") as ex:
            ex.pin(other_cpus)
            setup.write(ex.url)
            with started(
                "bare server",
                [sys.executable, "-m", "bench.runtime", "bare"],
                setup.env,
                setup.work / "bare.log",
            ) as bare:
                bare.pin(server_cpus)
                results["bare"] = generate(
                    bare.url, "bare", load, setup, watch=[bare.pid], cpus=other_cpus
                )
            runtime = Server("runtime", runtime_argv(setup), setup.env, setup.work / "runtime.log")
            try:
                runtime.wait_listening()
                runtime.pin(server_cpus)
                check_ready(runtime.url)
                contexts = setup.work / "contexts.txt"
                watch = [runtime.pid, ex.pid]
                results["resolve"] = generate(
                    runtime.url,
                    "resolve",
                    load,
                    setup,
                    watch=watch,
                    cpus=other_cpus,
                    contexts=contexts,
                )
                before = executor_counts(ex.url)
                results["execute"] = generate(
                    runtime.url,
                    "execute",
                    load,
                    setup,
                    watch=watch,
                    cpus=other_cpus,
                    contexts=contexts,
                )
                probes = probe_counts(before, executor_counts(ex.url))
            finally:
                code = runtime.stop()
            if code != 0:
                raise RuntimeError(f"runtime exited {code}: {runtime.tail()}")
            intents = stored_intents(setup.data)
            pragmas = _durability_pragmas(setup.data)
        fsync.append(fsync_us(setup.work))
    measured = {"intents": intents, "executor": probes, "fsync_us": fsync, **pragmas}
    return report(load, results, measured, pinned=server_cpus is not None, quick=quick)


def _per_request_us(result: dict[str, Any], pid_index: int) -> dict[str, float] | None:
    """CPU µs per successful request of a watched process: user, system and both."""
    values: list[list[float]] = list(result["server_cpu_s"].values())
    ok: int = result["ok"]
    if pid_index >= len(values) or not ok:
        return None
    user, system = values[pid_index]
    return per_request_us(user, system, ok)


def _loop_us(result: dict[str, Any]) -> float | None:
    """CPU µs per successful request of the server's main (event loop) thread; the rest of
    its CPU is its worker threads' (the store's writer, the log's writer)."""
    loop, ok = result.get("server_loop_thread_cpu_s"), result["ok"]
    return round(sum(loop) / ok * 1e6, 1) if loop and ok else None


def report(
    load: Load,
    results: dict[str, dict[str, Any]],
    measured: dict[str, Any],
    *,
    pinned: bool,
    quick: bool,
) -> dict[str, Any]:
    names = {
        "bare": ("bare POST /echo", "aiohttp bare"),
        "resolve": ("POST /v1/context/resolve", "seif runtime"),
        "execute": ("POST /v1/context/tools/execute", "seif runtime"),
    }
    targets, rows = {}, []
    for mode, result in results.items():
        targets[mode] = {
            "rps": result["rps"],
            "p50_ms": result["p50_ms"],
            "p99_ms": result["p99_ms"],
            "mean_ms": result["mean_ms"],
            "max_ms": result["max_ms"],
            "ok": result["ok"],
            "sent": result["sent"],
            "errors": result["errors"],
            "elapsed_s": result["elapsed_s"],
            "server_cpu_us_per_request": _per_request_us(result, 0),
            "server_loop_thread_cpu_us_per_request": _loop_us(result),
            "executor_cpu_us_per_request": None if mode == "bare" else _per_request_us(result, 1),
            "loadgen_cpu_s": result["loadgen_cpu_s"],
            "warmup": result["warmup"],
            "contexts_resolved_untimed": result["contexts_resolved_untimed"],
        }
        rows.append(latency_row(*names[mode], result))
    bare = targets["bare"]["rps"] or math.nan
    ratios = {
        "resolve/bare rps": round(targets["resolve"]["rps"] / bare, 3),
        "execute/bare rps": round(targets["execute"]["rps"] / bare, 3),
    }
    n = 2 if pinned else cores()
    execute = results["execute"]
    succeeded = execute["ok"] + execute["warmup"]["ok"]
    intents = measured["intents"]
    recorded = intents.get("SUCCEEDED", 0) >= succeeded and not intents.get("PENDING")
    goals = {
        "resolve_vs_bare": {
            "goal": f"resolve rps >= {RESOLVE_GOAL} x bare rps",
            "ratio": ratios["resolve/bare rps"],
            "met": ratios["resolve/bare rps"] >= RESOLVE_GOAL,
        },
        "execute_rps": {
            "goal": f">= {EXECUTE_GOAL_RPS} calls/s on 2 cores, every intent durable",
            "rps": targets["execute"]["rps"],
            "cores": n,
            "intents_recorded": recorded,
            "met": (targets["execute"]["rps"] >= EXECUTE_GOAL_RPS and recorded) if n <= 2 else None,
        },
    }
    config = {
        **asdict(load),
        "cores": n,
        "pinned": pinned,
        "loadgen": "aiohttp client (python -m bench.runtime load), one process",
        "wrk_installed": shutil.which("wrk") is not None,
        "durability": {
            "journal_mode": measured["journal_mode"],
            "sqlite_synchronous": "FULL (servers/store.py)",
            "decision_log": "fsync per record (DecisionLog fsync_every=1)",
            "fsync_us_before_after": measured["fsync_us"],
        },
        "objective": OBJECTIVE,
        "tool": TOOL,
    }
    out = {
        "config": config,
        "targets": targets,
        "rows": rows,
        "ratios": ratios,
        "goals": goals,
        "store": {"intents": intents, "execute_succeeded": succeeded, "recorded": recorded},
        "executor_requests_during_execute": measured["executor"],
    }
    out["notes"] = notes(out, quick=quick)
    return out


def notes(out: dict[str, Any], *, quick: bool) -> list[str]:
    config, targets, goals = out["config"], out["targets"], out["goals"]
    lines = [
        f"{config['connections']} connections, at most {config['requests']} requests or "
        f"{config['duration_s']:.0f} s per target after {config['warmup']} warm-up requests; "
        f"{config['cores']} cores, "
        + (
            "server on core 0, load generator and executor on core 1"
            if config["pinned"]
            else "no pinning"
        ),
        "durability as shipped: SQLite WAL synchronous=FULL, decision log fsynced per record; "
        "a 200-byte append + fsync took {} us before the run, {} us after (median)".format(
            *config["durability"]["fsync_us_before_after"]
        ),
    ]
    for mode, t in targets.items():
        cpu = t["server_cpu_us_per_request"] or {}
        loop = t["server_loop_thread_cpu_us_per_request"]
        cpu_text = f"{cpu.get('total')} us/req ({cpu.get('system')} system, {loop} event loop)"
        extra = (
            ""
            if t["executor_cpu_us_per_request"] is None
            else (f", executor {t['executor_cpu_us_per_request']['total']} us")
        )
        lines.append(
            f"{mode}: {t['rps']:.0f} req/s, p50 {t['p50_ms']:.2f} ms, p99 {t['p99_ms']:.2f} ms; "
            f"server CPU {cpu_text}{extra}; load generator CPU {t['loadgen_cpu_s']:.1f} s "
            f"of {t['elapsed_s']:.1f} s" + (f"; ERRORS {t['errors']}" if t["errors"] else "")
        )
    probes = out["executor_requests_during_execute"]
    lines.append(
        f"execute (warm-up included): {probes['executions']} dispatches, "
        f"{probes['describes']} describe probes (concurrent probes share one request)"
    )
    r, e = goals["resolve_vs_bare"], goals["execute_rps"]
    lines.append(
        f"target resolve >= {RESOLVE_GOAL} x bare: {r['ratio']:.2f} x -> "
        f"{'met' if r['met'] else 'NOT met'}"
    )
    lines.append(
        f"target execute >= {EXECUTE_GOAL_RPS}/s on 2 cores, durable: {e['rps']:.0f}/s on "
        f"{e['cores']} cores, every intent recorded {e['intents_recorded']} -> "
        + {True: "met", False: "NOT met", None: "not judged (not 2 cores)"}[e["met"]]
    )
    if targets["bare"]["loadgen_cpu_s"] >= 0.8 * targets["bare"]["elapsed_s"]:
        lines.append(
            "the load generator was CPU-bound on bare: the bare rate is a lower bound "
            "and the ratios are flattering"
        )
    if quick:
        lines.append("--quick: a smoke run, the figures are not meaningful")
    return lines


# ================================================================ profiling


def profile(requests: int = 6_000, top: int = 30, mode: str = "execute") -> None:
    """Execute (or resolve) load against a runtime under cProfile; then the store, the log
    and ``to_thread`` timed in-process."""
    import pstats

    load = Load(connections=64, requests=requests, duration_s=60.0, warmup=300)
    server_cpus, other_cpus = _cpu_sets()
    with tempfile.TemporaryDirectory(prefix="seif-bench-profile-") as tmp:
        setup = prepare_setup(Path(tmp))
        out = setup.work / "runtime.prof"
        setup.env[PROFILE_ENV] = str(out)
        with started("executor", executor_argv(), setup.env, setup.work / "executor.log") as ex:
            ex.pin(other_cpus)
            setup.write(ex.url)
            runtime = Server(
                "runtime", runtime_argv(setup, profiled=True), setup.env, setup.work / "runtime.log"
            )
            try:
                runtime.wait_listening()
                runtime.pin(server_cpus)
                before = executor_counts(ex.url)
                result = generate(
                    runtime.url,
                    mode,
                    load,
                    setup,
                    watch=[runtime.pid, ex.pid],
                    cpus=other_cpus,
                )
                probes = probe_counts(before, executor_counts(ex.url))
            finally:
                runtime.stop()
        shown = {k: result[k] for k in ("rps", "p50_ms", "p99_ms", "ok", "errors")}
        shown["executor"] = probes
        print(f"== {mode} under cProfile (slower than unprofiled): {shown}")
        executes = probes["executions"] or (result["ok"] + result["warmup"]["ok"])
        loop = pstats.Stats(str(out), stream=sys.stdout)
        threads = pstats.Stats(str(out) + ".threads", stream=sys.stdout)
        print(
            f"== where the time goes, per {mode} ({executes} of them, warm-up included; for "
            "execute the loop thread also served the untimed resolves of the contexts)"
        )
        for line in summary(loop, SUMMARY_LOOP, executes) + summary(
            threads, SUMMARY_THREADS, executes
        ):
            print("  ", line)
        print("== event loop thread, by internal time")
        loop.strip_dirs().sort_stats("tottime").print_stats(top)
        print("== to_thread workers, by internal time (queue waits are idle time)")
        threads.strip_dirs().sort_stats("tottime").print_stats(top // 2)
    print("== in-process costs")
    for line in in_process_costs():
        print("  ", line)


SUMMARY_LOOP = (
    ("loop: POST execute handler", "servers/http/app.py", "execute"),
    ("loop: Runtime.execute", "servers/runtime/service.py", "execute"),
    ("loop:   context_row + state_of (store reads)", "servers/runtime/service.py", "state_of"),
    ("loop:   engine decide (all calls)", "policy/engine/decision.py", "decide"),
    ("loop:   Runtime._dispatch", "servers/runtime/service.py", "_dispatch"),
    ("loop:   Runtime._run (probe, dispatch, complete)", "servers/runtime/service.py", "_run"),
    ("loop:   Runtime._complete", "servers/runtime/service.py", "_complete"),
    ("loop: Store._query (reads, lock waits included)", "servers/store/sqlite/store.py", "_query"),
    ("loop: DecisionLog.append", "servers/log/decision_log.py", "append"),
    ("loop:   os.fsync", "~", "<built-in method posix.fsync>"),
    ("loop: ExecutorClient.execute", "servers/executor/client.py", "execute"),
    ("loop: ExecutorClient.describe", "servers/executor/client.py", "describe"),
    ("loop: Runtime.resolve", "servers/runtime/service.py", "resolve"),
    ("loop:   disclose", "policy/engine/disclosure.py", "disclose"),
    ("loop:   Observer.observe_all (describe)", "servers/executor/observing.py", "observe_all"),
    ("loop: json_response (encode)", "servers/http/bodies.py", "json_response"),
    ("loop: canonical_cbor", "policy/json/canonical.py", "canonical_cbor"),
    ("loop: record_fields_allowed", "servers/log/encoding.py", "record_fields_allowed"),
    ("loop: epoll (idle or waiting on sockets)", "~", "<method 'poll' of 'select.epoll' objects>"),
)
SUMMARY_THREADS = (
    ("threads: Store.begin_intent", "servers/store/sqlite/store.py", "begin_intent"),
    ("threads: Store.complete_intent", "servers/store/sqlite/store.py", "complete_intent"),
    ("threads: Store.save_context", "servers/store/sqlite/store.py", "save_context"),
    ("threads: Store._write (lock waits)", "servers/store/sqlite/store.py", "_write"),
    (
        "threads: sqlite3 execute (COMMIT fsyncs)",
        "~",
        "<method 'execute' of 'sqlite3.Connection' objects>",
    ),
)


def summary(stats: Any, entries: tuple[tuple[str, str, str], ...], executes: int) -> list[str]:
    """Chosen functions: calls, internal and cumulative seconds, cumulative µs per execute.
    (cProfile counts each resumption of a coroutine as a call.)"""
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats
    lines = []
    for label, where, name in entries:
        found = [
            v
            for (file, _line, func), v in table.items()
            if func == name and (file == where or file.endswith(where))
        ]
        if not found:
            continue
        calls = sum(v[1] for v in found)
        tottime = sum(v[2] for v in found)
        cumtime = sum(v[3] for v in found)
        lines.append(
            f"{label:<52} {calls:>8} calls  tot {tottime:7.2f} s  cum {cumtime:7.2f} s"
            f"  {cumtime / executes * 1e6:8.0f} us/request"
        )
    return lines


def _store_commits_us(
    path: Path, sync: str, median_us: Callable[[Callable[[int], object]], float], fp: str
) -> float:
    """The median of one claim and its completion in a store whose connection has
    ``synchronous`` set to ``sync``, each awaited on one event loop."""
    from servers.store.sqlite.store import ContextRow, Store

    store = Store.open(path)
    store._db.execute(f"PRAGMA synchronous = {sync}")  # the bench pokes the connection
    loop = asyncio.new_event_loop()
    row = ContextRow(context_ref="c", build="b", objective="o", resolved_at=0, expires_at=1)
    loop.run_until_complete(store.save_context_async(row))

    async def claim_and_complete(i: int) -> None:
        await store.begin_intent_async("c", f"k{i}", TOOL, fp, 1, decide=lambda _rows: True)
        await store.complete_intent_async("c", f"k{i}", "SUCCEEDED", None, 2)

    try:
        return median_us(lambda i: loop.run_until_complete(claim_and_complete(i)))
    finally:
        loop.close()
        store.close()


def in_process_costs(loops: int = 300) -> list[str]:
    """Medians per call of what execute does besides the HTTP exchanges, in this process:
    the store's two durable commits under each ``synchronous`` setting, a raw SQLite commit
    per intent against one commit per batch of 32 (group commit), a decision log append with
    and without its fsync, and an ``asyncio.to_thread`` round trip."""
    import statistics

    from servers.log.decision_log import DecisionLog

    def median_us(fn: Callable[[int], object], count: int = loops) -> float:
        times = []
        for i in range(count):
            start = time.perf_counter_ns()
            fn(i)
            times.append(time.perf_counter_ns() - start)
        return statistics.median(times) / 1000

    lines = [f"fsync of a 200-byte append: {fsync_us(Path(tempfile.gettempdir()))} us"]
    fp = "0" * 64
    with tempfile.TemporaryDirectory(prefix="seif-bench-costs-") as tmp:
        for sync in ("FULL", "NORMAL", "OFF"):
            took = _store_commits_us(Path(tmp) / f"store-{sync}.sqlite", sync, median_us, fp)
            lines.append(
                f"store begin_intent + complete_intent (2 commits), synchronous={sync}: "
                f"{took:.0f} us"
            )
        db = sqlite3.connect(str(Path(tmp) / "group.sqlite"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, fp TEXT)")

        def single(i: int) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?, ?)", (f"s{i}", fp))
            db.execute("COMMIT")

        def batch(i: int) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO t VALUES (?, ?)", [(f"b{i}-{j}", fp) for j in range(32)])
            db.execute("COMMIT")

        lines.append(
            f"raw SQLite WAL synchronous=FULL: one commit per intent {median_us(single):.0f}"
            f" us; one commit per 32 intents {median_us(batch, loops // 4) / 32:.0f} us "
            "per intent (group commit)"
        )
        db.close()
        record = {
            "event": "INTENT",
            "tool": TOOL,
            "callId": "c1",
            "fingerprint": fp,
            "coordinates": {"consumer": CONSUMER, "objective": OBJECTIVE},
        }
        for every in (1, 0):
            log = DecisionLog.open(Path(tmp) / f"log-{every}.cbor", fsync_every=every)

            def append(_i: int, log: DecisionLog = log) -> None:
                log.append(record)

            took = median_us(append)
            log.close()
            lines.append(
                f"decision log append, fsync_every={every}: {took:.0f} us per record "
                "(runs on the event loop thread)"
            )

    async def hops() -> float:
        times = []
        for _ in range(loops * 3):
            start = time.perf_counter_ns()
            await asyncio.to_thread(int)
            times.append(time.perf_counter_ns() - start)
        return statistics.median(times) / 1000

    lines.append(f"asyncio.to_thread round trip of a no-op: {asyncio.run(hops()):.0f} us")
    return lines


# ================================================================ entry


ROLES: dict[str, Callable[[list[str]], int]] = {
    "bare": bare_main,
    "load": load_main,
    "profiled-serve": profiled_serve_main,
}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ROLES:
        return ROLES[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m bench.runtime",
        description="python -m bench runtime [--json] [--quick] runs the benchmark; this entry "
        "point profiles execute, or serves a role of the benchmark: " + ", ".join(ROLES),
    )
    parser.add_argument("--profile", action="store_true", help="profile execute")
    parser.add_argument("--mode", choices=("execute", "resolve"), default="execute")
    parser.add_argument("--requests", type=int, default=6_000)
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.requests, mode=args.mode)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

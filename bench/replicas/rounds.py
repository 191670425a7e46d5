"""The run of ``python -m bench replicas``: every configuration once per round, each on a fresh
store, its runtimes started, its clients timed all at once while :class:`Sampler` reads
``/proc``, its runtimes stopped and its store read back."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Server, quantiles, started, summed_counts
from bench.replicas.config import CONFIGS, Config, Load
from bench.replicas.cpu import Sampler
from bench.replicas.processes import (
    Client,
    PgServer,
    find_server,
    new_database,
    pg_counters,
    pg_stored,
    prepare,
    start_clients,
)
from bench.runtime import (
    Setup,
    check_ready,
    executor_argv,
    executor_counts,
    fsync_us,
    get_json,
    runtime_argv,
    stored_intents,
)


@dataclass(frozen=True, slots=True)
class Bench:
    """What every configuration of the run shares."""

    load: Load
    setup: Setup
    executor: Server
    server: PgServer | None


@dataclass(frozen=True, slots=True)
class Store:
    """One configuration's fresh store: each runtime's store arguments, the database (on
    PostgreSQL) and how to read it back."""

    args: list[list[str]]
    database: str | None
    read: Callable[[], dict[str, Any]]


def measure(load: Load) -> dict[str, Any]:
    server = find_server()
    try:
        with tempfile.TemporaryDirectory(prefix="seif-bench-replicas-") as tmp:
            setup = prepare(Path(tmp))
            fsync = [fsync_us(setup.work)]
            loadavg = _loadavg()
            phases = _rounds(load, setup, server)
            fsync.append(fsync_us(setup.work))
    finally:
        server.stop()
    return {
        "phases": phases,
        "server": server,
        "fsync_us": fsync,
        "calls_per_context": setup.calls_per_context,
        "loadavg_before": loadavg,
        "loadavg_after": _loadavg(),
    }


def _rounds(load: Load, setup: Setup, server: PgServer) -> list[dict[str, Any]]:
    """``load.rounds`` rounds of every configuration (the order reversed every other round),
    on one executor."""
    phases: list[dict[str, Any]] = []
    with started("executor", executor_argv(), setup.env, setup.work / "executor.log") as executor:
        setup.write(executor.url)
        get_json(executor.url + "/_stats")
        bench = Bench(load, setup, executor, server)
        for round_ in range(load.rounds):
            order = CONFIGS if round_ % 2 == 0 else tuple(reversed(CONFIGS))
            for config in order:
                phases.append(measure_config(config, round_, bench))
    return phases


def _loadavg() -> list[float] | None:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def _store(config: Config, tag: str, bench: Bench, held: contextlib.ExitStack) -> Store:
    if config.store == "postgresql":
        assert bench.server is not None
        url, database = held.enter_context(new_database(bench.server))
        args = [["--store", url, "--replica-id", f"r{i}"] for i in range(config.replicas)]
        return Store(args, database, lambda: pg_stored(url))
    data = bench.setup.work / f"data-{tag}"
    return Store(
        [["--data", str(data)]], None, lambda: {"intents": stored_intents(data), "log_events": None}
    )


def measure_config(config: Config, round_: int, bench: Bench) -> dict[str, Any]:
    """One configuration on a fresh store: start its runtimes, let the clients resolve and warm
    up, time them, stop the runtimes and read the store back."""
    tag = f"{config.key}-{round_}"
    setup = bench.setup
    with contextlib.ExitStack() as held:
        store = _store(config, tag, bench, held)
        argvs = [runtime_argv(setup, store=args) for args in store.args]
        runtimes = [
            Server(f"replica r{i}", argv, setup.env, setup.work / f"{tag}-r{i}.log")
            for i, argv in enumerate(argvs)
        ]
        before, phase = _serve(runtimes, tag, bench, store.database)
        after = executor_counts(bench.executor.url)
        stored = store.read()
    phase["dispatched_in_all"] = after["executions"] - before["executions"]
    return {"config": config.key, "round": round_, "replicas": config.replicas, **phase,
            "stored": stored}  # fmt: skip


def _serve(
    runtimes: list[Server], tag: str, bench: Bench, database: str | None
) -> tuple[dict[str, int], dict[str, Any]]:
    """Wait for the runtimes, run the clients' timed window, stop the runtimes (each must exit
    0): the executor's counts before the clients started, and the window's figures."""
    clients: list[Client] = []
    try:
        for runtime in runtimes:
            runtime.wait_listening()
            check_ready(runtime.url)
        before = executor_counts(bench.executor.url)
        clients = start_clients([r.url for r in runtimes], bench.load, bench.setup, tag)
        phase = timed_window(runtimes, clients, bench, database)
    finally:
        for client in clients:
            client.kill()
        codes = [runtime.stop() for runtime in runtimes]
    for runtime, code in zip(runtimes, codes, strict=True):
        if code != 0:
            raise RuntimeError(f"{runtime.name} exited {code}: {runtime.tail()}")
    return before, phase


def _sampler(
    runtimes: list[Server], clients: list[Client], bench: Bench, database: str | None
) -> Sampler:
    named = {r.pid: f"replica r{i}" for i, r in enumerate(runtimes)}
    named |= {bench.executor.pid: "executor", os.getpid(): "bench (this process)"}
    named |= {c.pid: "client" for c in clients}
    threads = {
        f"replica r{i} event loop thread": f"/proc/{r.pid}/task/{r.pid}/stat"
        for i, r in enumerate(runtimes)
    }
    return Sampler(named, threads, bench.server.postmaster if bench.server else None, database)


def timed_window(
    runtimes: list[Server], clients: list[Client], bench: Bench, database: str | None
) -> dict[str, Any]:
    """Wait for the clients to be ready, then time them all at once, sampling the CPU time of
    every process meanwhile; the figures of the window."""
    server, executor = bench.server, bench.executor
    ready = [client.ready() for client in clients]
    sampler = _sampler(runtimes, clients, bench, database)
    pg_before = pg_counters(server) if server and database else {}
    before = executor_counts(executor.url)
    sampler.start()
    for client in clients:
        client.go()
    results = [client.result(timeout=120 + 3 * bench.load.duration_s) for client in clients]
    cpu = sampler.stop()
    after = executor_counts(executor.url)
    pg_after = pg_counters(server) if server and database else {}
    return {
        **_client_figures(ready, results),
        "dispatched_in_window": after["executions"] - before["executions"],
        "describes_in_window": after["describes"] - before["describes"],
        "cpu": cpu,
        "pg": {k: pg_after[k] - pg_before[k] for k in pg_after if k in pg_before},
    }


def _client_figures(ready: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    """The clients' figures of one window: their warm-ups (``ready``) and timed phases."""
    latencies = [ns for result in results for ns in result.pop("latencies_ns")]
    ok = sum(r["ok"] for r in results)
    elapsed = max(r["elapsed_s"] for r in results)
    warm_ok = sum(r["warmup"]["ok"] for r in ready)
    return {
        "ok": ok,
        "sent": sum(r["sent"] for r in results),
        "errors": summed_counts(r["errors"] for r in results),
        "warmup": {"ok": warm_ok, "errors": summed_counts(r["warmup"]["errors"] for r in ready)},
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
        "succeeded_in_all": ok + warm_ok,
    }

"""The figures and the report of ``python -m bench replicas``: one configuration's rounds
combined (rates, latencies, where the CPU went), the rows, the ratios, the goals and the
notes."""

from __future__ import annotations

import math
import shutil
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.harness import REPO, latency_row, quantiles, summed_counts
from bench.replicas.config import (
    CLIENT_BOUND,
    CONFIGS,
    PG1_VS_SQLITE_GOAL,
    PG3_VS_PG1_GOAL,
    RATIOS,
    SPREAD,
    Config,
    Load,
)
from bench.replicas.cpu import OTHER, PG_OTHER, PG_OURS, PG_SERVER
from bench.replicas.processes import PgServer
from bench.runtime import EXECUTOR, TOOL, cores

REPLICAS, LOOPS = "replicas (all threads)", "replicas' event loop threads (part of the above)"
UNATTRIBUTED = "unattributed (interrupts, processes that exited)"
SERVING = (REPLICAS, PG_OURS, PG_SERVER, "executor", "client", "bench (this process)")
"""The components of the benchmark itself; the others are other load on the machine."""
OTHER_LOAD = (PG_OTHER, OTHER, UNATTRIBUTED)
COMPONENT_ORDER = (*SERVING[:1], LOOPS, *SERVING[1:], *OTHER_LOAD)
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


# ================================================================ one configuration's figures


def combine(config: Config, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's figures over its rounds."""
    ok = sum(p["ok"] for p in phases)
    elapsed = sum(p["elapsed_s"] for p in phases)
    dispatched = sum(p["dispatched_in_window"] for p in phases)
    pg = summed_counts(p["pg"] for p in phases)
    return {
        "label": config.label,
        "store": config.store,
        "replicas": config.replicas,
        "dispatches_per_s": round(ok / elapsed, 1) if elapsed else 0.0,
        **quantiles([ns for p in phases for ns in p["latencies_ns"]]),
        "ok": ok,
        "errors": summed_counts(p["errors"] for p in phases),
        "warmup_errors": summed_counts(p["warmup"]["errors"] for p in phases),
        "elapsed_s": round(elapsed, 3),
        "rounds": [_round_figures(p) for p in phases],
        "client_cpu_s": [round(sum(p["client_cpu_s"][j] for p in phases), 3) for j in (0, 1)],
        "client_busiest_core_share": max(p["client_busiest_core_share"] for p in phases),
        "contexts_resolved_untimed": sum(p["contexts_resolved_untimed"] for p in phases),
        "resolve_s": round(sum(p["resolve_s"] for p in phases), 3),
        "dispatched_once": all(
            p["dispatched_in_window"] == p["ok"] and p["dispatched_in_all"] == p["succeeded_in_all"]
            for p in phases
        ),
        "stored": [p["stored"] for p in phases],
        "recorded": all(_recorded(p) for p in phases),
        "cpu": cpu_figures(config, phases),
        "pg_per_dispatch": {k: round(v / dispatched, 2) for k, v in pg.items()}
        if dispatched
        else {},
    }


def _round_figures(phase: dict[str, Any]) -> dict[str, Any]:
    figures = {k: phase[k] for k in ("round", "rps", "p50_ms", "p99_ms", "ok", "elapsed_s")}
    return figures | {"other_load_cores_busy": other_load_cores(phase["cpu"])}


def _recorded(phase: dict[str, Any]) -> bool:
    """Every success of the phase a ``SUCCEEDED`` intent, none ``PENDING``, and on PostgreSQL
    its ``INTENT`` and ``RESULT`` records in the log."""
    stored, succeeded = phase["stored"], phase["succeeded_in_all"]
    events = stored["log_events"]
    return (
        stored["intents"].get("SUCCEEDED", 0) >= succeeded
        and not stored["intents"].get("PENDING")
        and (events is None or min(events.get(e, 0) for e in ("INTENT", "RESULT")) >= succeeded)
    )


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


# ================================================================ where the CPU went


@dataclass(slots=True)
class CpuSums:
    """The CPU samples of a configuration's windows added up, by the report's components."""

    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    waited: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    loop_states: Counter[str] = field(default_factory=Counter)
    machine: Counter[str] = field(default_factory=Counter)
    others: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))


def _component(name: str) -> str:
    """The report's component of a sampled one: every replica's threads, and their event loop
    threads apart."""
    if name.endswith("event loop thread"):
        return LOOPS
    return REPLICAS if name.startswith("replica ") else name


def _cpu_sums(phases: list[dict[str, Any]]) -> CpuSums:
    sums = CpuSums()
    for p in phases:
        cpu = p["cpu"]
        for name, value in cpu["components_s"].items():
            sums.seconds[_component(name)] += value
        for name, value in cpu["runqueue_wait_s"].items():
            sums.waited[_component(name)] += value
        sums.loop_states.update(cpu["event_loop_samples"])
        sums.machine.update(cpu.get("machine_s", {}))
        for name, value in cpu["busiest_other_processes_s"].items():
            sums.others[name] += value
    return sums


def cpu_figures(config: Config, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the CPU went over a configuration's windows: per component, per dispatch and in
    cores; the time waiting for a core; the event loops' states; the machine's."""
    sums = _cpu_sums(phases)
    wall = sum(p["cpu"]["wall_s"] for p in phases)
    dispatched = sum(p["dispatched_in_window"] for p in phases)
    loops = [
        v / p["cpu"]["wall_s"]
        for p in phases
        for k, v in p["cpu"]["components_s"].items()
        if k.endswith("event loop thread") and p["cpu"]["wall_s"]
    ]
    return {
        "window_wall_s": round(wall, 3),
        "dispatches_in_window": dispatched,
        **_components(sums, wall, dispatched),
        "busiest_other_processes_s": {
            k: round(v, 3) for k, v in sorted(sums.others.items(), key=lambda kv: -kv[1])[:5]
        },
        "postgres_backends": max(p["cpu"]["backends"] for p in phases),
        **_waits(sums.waited, wall, dispatched),
        "event_loop_threads": loop_shares(
            sums.seconds[LOOPS], sums.waited[LOOPS], sums.loop_states, wall * config.replicas
        ),
        **_machine(sums.machine, wall),
        "busiest_event_loop_core_share": round(max(loops), 3) if loops else None,
    }


def _components(sums: CpuSums, wall: float, dispatched: int) -> dict[str, Any]:
    """CPU seconds per component, per dispatch and in cores; the benchmark's and other load's.
    (Every component of the benchmark and of other load is shown, if only as 0.)"""
    seconds = sums.seconds
    if sums.machine:
        processes = sum(v for k, v in seconds.items() if k != LOOPS)
        seconds[UNATTRIBUTED] = max(0.0, sums.machine["busy"] - processes)
    serving = sum(seconds[k] for k in SERVING)
    other = sum(seconds[k] for k in OTHER_LOAD)
    shown = [name for name in COMPONENT_ORDER if name in seconds]
    return {
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
    }


def _waits(waited: dict[str, float], wall: float, dispatched: int) -> dict[str, Any]:
    return {
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
    }


def _machine(machine: Counter[str], wall: float) -> dict[str, Any]:
    if not machine:
        return {}
    total = machine["busy"] + machine["idle"] + machine["iowait"]
    return {
        "machine_utilisation": round(machine["busy"] / total, 3) if total else None,
        "machine_cores_busy": round(machine["busy"] / wall, 3) if wall else None,
        "machine_iowait_share": round(machine["iowait"] / total, 3) if total else None,
    }


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


# ================================================================ the report


def report(load: Load, measured: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    by_config = {
        config.key: combine(config, [p for p in measured["phases"] if p["config"] == config.key])
        for config in CONFIGS
    }
    rows = [_row(config, by_config[config.key]) for config in CONFIGS]
    rates = {key: c["dispatches_per_s"] or math.nan for key, c in by_config.items()}
    ratios = {label: round(rates[a] / rates[b], 3) for label, (a, b) in RATIOS.items()}
    out: dict[str, Any] = {
        "config": run_config(load, measured),
        "configurations": by_config,
        "rows": rows,
        "ratios": ratios,
        "goals": _goals(ratios),
    }
    out["notes"] = notes(out, quick=quick)
    return out


def _row(config: Config, figures: dict[str, Any]) -> dict[str, Any]:
    return latency_row(config.label, "seif serve", figures, figures["dispatches_per_s"])


def _goals(ratios: dict[str, float]) -> dict[str, Any]:
    pg1 = ratios["1 replica PostgreSQL vs SQLite"]
    pg3 = ratios["3 replicas vs 1 replica PostgreSQL"]
    return {
        "pg1_vs_sqlite": {
            "goal": f"1 PostgreSQL replica >= {PG1_VS_SQLITE_GOAL} x SQLite",
            "ratio": pg1,
            "met": pg1 >= PG1_VS_SQLITE_GOAL,
        },
        "pg3_vs_pg1": {
            "goal": f"3 replicas >= {PG3_VS_PG1_GOAL} x 1 replica",
            "ratio": pg3,
            "met": pg3 >= PG3_VS_PG1_GOAL,
        },
    }


def run_config(load: Load, measured: dict[str, Any]) -> dict[str, Any]:
    """How the run was made: the load, the machine, the PostgreSQL server, the client."""
    server: PgServer = measured["server"]
    return {
        **asdict(load),
        "cores": cores(),
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
    }


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


def _listed(values: dict[str, float], names: tuple[str, ...]) -> str:
    return ", ".join(f"{SHORT[n]} {values[n]:.0f}" for n in names if n in values)


def config_notes(key: str, c: dict[str, Any], n_cores: int) -> list[str]:
    lines = [_headline(key, c), *_cpu_notes(c, n_cores)]
    loops = c["cpu"]["event_loop_threads"]
    if loops:
        lines.append(
            "  event loop threads, share of the window each: "
            + ", ".join(f"{state} {share:.2f}" for state, share in loops.items())
        )
    if c["client_busiest_core_share"] >= CLIENT_BOUND:
        lines.append(f"  {key}: the client was CPU-bound: its rate is a lower bound")
    return lines


def _headline(key: str, c: dict[str, Any]) -> str:
    rounds = ", ".join(
        f"{r['rps']} (other load {r['other_load_cores_busy']} cores)" for r in c["rounds"]
    )
    return (
        f"{key}: {c['dispatches_per_s']:.0f} dispatches/s, p50 {c['p50_ms']:.2f} ms, "
        f"p99 {c['p99_ms']:.2f} ms" + (f" (rounds: {rounds}/s)" if len(c["rounds"]) > 1 else "")
        + (f"; ERRORS {c['errors']} {c['warmup_errors']}" if c["errors"] or c["warmup_errors"]
           else "")
        + ("" if c["dispatched_once"] else "; NOT dispatched exactly once")
        + ("" if c["recorded"] else "; NOT every success recorded")
    )  # fmt: skip


def _cpu_notes(c: dict[str, Any], n_cores: int) -> list[str]:
    cpu, pg = c["cpu"], c["pg_per_dispatch"]
    per, waits = cpu["cpu_us_per_dispatch"], cpu["runqueue_wait_us_per_dispatch"]
    return [
        f"  CPU us per dispatch: {_listed(per, (REPLICAS, LOOPS, *SERVING[1:]))}: "
        f"{cpu['benchmark_cpu_us_per_dispatch']} for the benchmark; other load: "
        f"{_listed(per, OTHER_LOAD)}",
        f"  cores busy: {cpu.get('machine_cores_busy')} of {n_cores} (the benchmark "
        f"{cpu['benchmark_cores_busy']}, other load {cpu['other_load_cores_busy']}; iowait "
        f"{cpu.get('machine_iowait_share')}); busiest event loop "
        f"{cpu['busiest_event_loop_core_share']}, client {c['client_busiest_core_share']} of a "
        f"core; {cpu['threads_waiting_for_a_core']} threads waiting for a core on average (us "
        f"per dispatch: {_listed(waits, (REPLICAS, *SERVING[1:]))})"
        + (f"; {cpu['postgres_backends']} backends" if cpu["postgres_backends"] else "")
        + (
            f"; per dispatch {pg.get('wal_bytes', 0):.0f} WAL bytes, "
            f"{pg.get('transaction_ids', 0):.2f} transaction ids (whole server)"
            if pg
            else ""
        ),
    ]  # fmt: skip

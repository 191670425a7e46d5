"""The cost of a shadow build: resolve and execute throughput of ``seif serve`` with
``--shadow`` against the same runtime without, in one run.

The processes and the load are those of ``python -m bench runtime`` (``bench.runtime``): the
synthetic executor, ``seif serve`` on the reference project with a fresh data directory, the
closed-loop aiohttp load generator; pinned to 2 cores the same way. Each round starts three
runtimes, in alternating order, each on its own data directory: one without a shadow, one with
``--shadow`` a candidate that decides alike (another description: another digest, every
decision compared, none differs: the usual case) and one with a candidate whose every
resolution of the load differs (the learner profile excludes ``search-knowledge``, and the load
resolves ``learner``: every resolve writes a ``SHADOW`` record beside its ``DISCLOSED`` one, the
worst case for the log; the calls, ``inspect-context``, do not differ). Each is measured on
resolve, then execute; the figures are the medians over the rounds. After the run the shadowed
runtimes' logs are read back: their decisions marked, their ``SHADOW`` records counted (the
shadow kept up, or its drops show).

Ratios: rps with each shadow / rps without, for resolve and execute (target: at least 0.85).
Rows: p50 as the median and p99 latency of each target, with and without.
"""

from __future__ import annotations

import copy
import json
import statistics
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.harness import Server, latency_row, started
from bench.runtime import (
    FULL,
    QUICK,
    REFERENCE,
    Load,
    Setup,
    _cpu_sets,
    check_ready,
    executor_argv,
    generate,
    prepare_setup,
    runtime_argv,
)

GOAL = 0.85
"""Throughput with a shadow build loaded, as a fraction of the same runtime's without."""
ROUNDS_FULL, ROUNDS_QUICK = 3, 1


KINDS = ("plain", "alike", "differs")
"""No shadow; a candidate that decides alike (another description: another digest); one whose
every resolution of the load differs (the learner profile excludes search-knowledge)."""


def write_candidate(work: Path, kind: str) -> Path:
    """The candidate build of ``kind`` (:data:`KINDS`)."""
    from compiler.builds.build import write_build
    from compiler.driver import compile_document

    candidate = copy.deepcopy(json.loads(REFERENCE.read_text()))
    candidate["description"] = f"{candidate.get('description', '')} (a candidate)"
    if kind == "differs":
        learner = next(p for p in candidate["profiles"] if p["id"] == "learner")
        for rule in learner["toolRules"]:
            if rule["tool"] == "search-knowledge":
                rule.clear()
                rule.update({"tool": "search-knowledge", "participation": "exclude"})
    result = compile_document(candidate)
    assert result.project is not None, result.diagnostics
    out = work / f"candidate-{kind}"
    write_build(result.project, out)
    return out


def _measure(
    setup: Setup, data: Path, extra: list[str], load: Load, cpus: tuple[Any, Any], ex_pid: int
) -> dict[str, dict[str, Any]]:
    server_cpus, other_cpus = cpus
    argv = runtime_argv(setup, store=["--data", str(data)]) + extra
    runtime = Server("runtime", argv, setup.env, data.parent / f"{data.name}.log")
    results: dict[str, dict[str, Any]] = {}
    try:
        runtime.wait_listening()
        runtime.pin(server_cpus)
        check_ready(runtime.url)
        contexts = data.parent / f"{data.name}-contexts.txt"
        for mode in ("resolve", "execute"):
            results[mode] = generate(
                runtime.url,
                mode,
                load,
                setup,
                watch=[runtime.pid, ex_pid],
                cpus=other_cpus,
                contexts=contexts,
            )
    finally:
        code = runtime.stop()
    if code != 0:
        raise RuntimeError(f"runtime exited {code}: {runtime.tail()}")
    return results


def shadow_log(data: Path) -> dict[str, int]:
    """What the shadowed runtime's log holds: decisions (marked or not) and SHADOW records."""
    from seif.tracefile import open_log
    from servers.store.sqlite.datadir import DECISION_LOG

    found = {"decisions": 0, "marked": 0, "shadow_records": 0}
    for record in open_log(data / DECISION_LOG).records():
        if record["event"] == "SHADOW":
            found["shadow_records"] += 1
        elif record["event"] in ("DISCLOSED", "DENIED", "INTENT"):
            found["decisions"] += 1
            found["marked"] += bool(record.get("shadow"))
    return found


def run(*, quick: bool = False) -> dict[str, Any]:
    load = QUICK if quick else FULL
    rounds = ROUNDS_QUICK if quick else ROUNDS_FULL
    cpus = _cpu_sets()
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {kind: [] for kind in KINDS}
    logs: dict[str, list[dict[str, int]]] = {kind: [] for kind in KINDS[1:]}
    with tempfile.TemporaryDirectory(prefix="seif-bench-shadow-") as tmp:
        setup = prepare_setup(Path(tmp))
        candidates = {kind: write_candidate(setup.work, kind) for kind in KINDS[1:]}
        with started("executor", executor_argv(), setup.env, setup.work / "executor.log") as ex:
            ex.pin(cpus[1])
            setup.write(ex.url)
            for n in range(rounds):
                order = KINDS if n % 2 == 0 else KINDS[::-1]
                for kind in order:
                    data = setup.work / f"data-{kind}-{n}"
                    extra = ["--shadow", str(candidates[kind])] if kind in candidates else []
                    runs[kind].append(_measure(setup, data, extra, load, cpus, ex.pid))
                    if kind in candidates:
                        logs[kind].append(shadow_log(data))
    return report(runs, logs, load, rounds, pinned=cpus[0] is not None)


def _median(results: list[dict[str, dict[str, Any]]], mode: str, key: str) -> float:
    return float(statistics.median(r[mode][key] for r in results))


def report(
    runs: dict[str, list[dict[str, dict[str, Any]]]],
    logs: dict[str, list[dict[str, int]]],
    load: Load,
    rounds: int,
    *,
    pinned: bool,
) -> dict[str, Any]:
    rows, ratios, targets = [], {}, {}
    for mode in ("resolve", "execute"):
        for kind in KINDS:
            figures = {
                "p50_ms": _median(runs[kind], mode, "p50_ms"),
                "p99_ms": _median(runs[kind], mode, "p99_ms"),
                "ok": sum(r[mode]["ok"] for r in runs[kind]),
                "rps": _median(runs[kind], mode, "rps"),
                "errors": [r[mode]["errors"] for r in runs[kind]],
            }
            targets[f"{mode} {kind}"] = figures
            impl = f"shadow {kind}" if kind != "plain" else "no shadow"
            rows.append(latency_row(f"POST {mode}", impl, figures))
        plain = targets[f"{mode} plain"]["rps"]
        for kind in KINDS[1:]:
            rps = targets[f"{mode} {kind}"]["rps"]
            ratios[f"{mode} shadow {kind}/plain rps"] = round(rps / plain, 3)
    goals = {
        name: {"goal": f">= {GOAL}", "ratio": value, "met": value >= GOAL}
        for name, value in ratios.items()
    }
    notes = [
        f"{rounds} round(s), each: a runtime without --shadow, one with a candidate that decides"
        " alike and one with a candidate that differs (alternating order),"
        f" {load.connections} connections, {load.requests} requests per target; medians over"
        " rounds",
        "'differs': the learner profile excludes search-knowledge, so every resolve writes a"
        " SHADOW record (the worst case for the log); no call differs; 'alike': another"
        " description only (another digest, every decision compared, none differs)",
        *(
            f"{name}: {g['ratio']:.3f} (target >= {GOAL}: {'met' if g['met'] else 'NOT met'})"
            for name, g in goals.items()
        ),
        f"shadowed logs: {logs}",
    ]
    return {
        "config": {**asdict(load), "rounds": rounds, "pinned": pinned},
        "targets": targets,
        "rows": rows,
        "ratios": ratios,
        "goals": goals,
        "shadow_logs": logs,
        "notes": notes,
    }

"""Replay throughput on a generated decision log, against one live resolve.

The log: ``N_MAX`` ``DISCLOSED`` records (100,000; ``--quick``: 4,000) written in a temporary
directory the way the runtime writes them (``disclose``, ``events.disclosure_summary``,
``DecisionLog.append``) for the reference project, under a synthetic availability history:
each candidate tool READY 90%, UNAVAILABLE 5%, READY with another contract 5%; both objectives,
three consumers, a trace id of its own per record (seeded, reproducible).

Measured:

- ``replay from file``: what ``seif replay`` does per record, reading included (``open_log``,
  CBOR decoding and envelope checks, then ``policy.offline.replay.replay``), over the first N, 2N
  and 4N records (N = ``N_MAX / 4``): records per second and linearity (time at 2N and 4N over time
  at N);
- ``replay decoded``: ``replay`` alone over records already in memory, with its cache and
  without it (``cache_size=0``: the engine runs for every record);
- ``what-if``: against a candidate that withholds search-knowledge from learners;
- ``live resolve``: one in-process resolve as the runtime does it after observing (``disclose``,
  the summary, the record appended to the decision log), with an fsync per record (the
  runtime's setting) and without.

Rows are per record. ``python -m bench.replay --profile`` prints a cProfile of a replay.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from bench.harness import Stats, measure, quantile
from compiler import compile_project
from compiler.builds.build import make_build
from compiler.driver import compile_document
from policy import disclose
from policy.codec import to_declaration
from policy.ir import Project
from policy.offline.replay import replay, what_if
from seif.tracefile import open_log
from servers.log.decision_log import DecisionLog
from servers.runtime import events

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference/agent-tools/context-project.json"
TARGET_PER_S = 20_000
N_MAX, N_QUICK = 100_000, 4_000
CONSUMERS = ("tutor-app", "course-authoring", "")


def candidate_of(ir: Project) -> Project:
    """The reference project with search-knowledge excluded for learners."""
    document = to_declaration(ir)
    for profile in document["profiles"]:
        if profile["id"] == "learner":
            profile["toolRules"] = [
                {"tool": r["tool"], "participation": "exclude"}
                if r["tool"] == "search-knowledge"
                else r
                for r in profile["toolRules"]
            ]
    result = compile_document({"format": "seif.context-project.v1", **document})
    assert result.project is not None, result.diagnostics
    return result.project


def _observation(rng: random.Random, tool: Any) -> dict[str, str]:
    draw = rng.random()
    if draw < 0.05:
        return {"state": "UNAVAILABLE", "detail": "UNREACHABLE"}
    digest = tool.contract_digest if draw < 0.95 else "sha256:" + "0" * 64
    return {"state": "READY", "version": tool.version, "contractDigest": digest}


def _inputs(ir: Project, count: int, seed: int = 6) -> Iterator[tuple[str, Any, Any]]:
    rng = random.Random(seed)
    rules = {o.id: ir.profile_by_id[o.profile].tool_rules for o in ir.objectives}
    candidates = {
        o: [r.tool for r in rs if r.participation == "include"] for o, rs in rules.items()
    }
    for i in range(count):
        objective = rng.choice(sorted(candidates))
        seen = {t: _observation(rng, ir.tool_by_id[t]) for t in candidates[objective]}
        coords = {"consumer": rng.choice(CONSUMERS), "environment": "", "deployment": "",
                  "trace": f"trace-{i:08d}"}  # fmt: skip
        yield objective, seen, coords


def _record(build: Any, i: int, objective: str, seen: Any, coords: Any, summary: Any) -> Any:
    """The fields ``servers.runtime.service.Runtime.resolve`` logs."""
    record = {
        "event": "DISCLOSED",
        "at": 1_800_000_000_000 + i,
        "build": build.digest,
        "environment": "bench",
        "bindingRevision": 1,
        "coordinates": events.coordinates({**coords, "objective": objective}),
        "objective": objective,
        "resolvedAt": 1_800_000_000_000 + i,
        "observations": seen,
        "disclosure": summary,
    }
    if summary["status"] == "RESOLVED":
        record["contextRef"] = f"ctx_{i:012d}"
    return record


def generate(path: Path, build: Any, count: int) -> int:
    """Write the log; returns the number of distinct engine inputs in it."""
    summaries: dict[str, Any] = {}
    with DecisionLog.open(path, fsync_every=0) as log:
        for i, (objective, seen, coords) in enumerate(_inputs(build.project, count)):
            key = repr((objective, coords["consumer"], sorted(seen.items())))
            if key not in summaries:
                d = disclose(build.project, objective, seen, context=coords)
                summaries[key] = events.disclosure_summary(d)
            log.append(_record(build, i, objective, seen, coords, summaries[key]))
    return len(summaries)


def _per_record(run: Callable[[], int], n: int, repeats: int) -> tuple[Stats, Stats]:
    """Time ``run`` (which must handle ``n`` records) ``repeats`` times: ns per record, wall
    clock and CPU time of this process."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        done = run()
        wall.append((time.perf_counter_ns() - start) / n)
        cpu.append((time.process_time_ns() - start_cpu) / n)
        assert done == n, (done, n)
    return _stats(wall, n * repeats), _stats(cpu, n * repeats)


def _stats(values: list[float], calls: int) -> Stats:
    ordered = sorted(values)
    return Stats(statistics.median(ordered), quantile(ordered, 0.99), calls)


def _from_file(build: Any, path: Path, n: int) -> Callable[[], int]:
    def run() -> int:
        report = replay(
            build.project, islice(open_log(path).records(), n), build_digest=build.digest
        )
        assert report.ok and report.reproduced == n, report.to_json()
        return report.reproduced

    return run


def _live(build: Any, path: Path, fsync_every: int) -> tuple[Callable[[], object], Any]:
    log = DecisionLog.open(path, fsync_every=fsync_every)
    objective, seen, coords = next(_inputs(build.project, 1))

    def resolve() -> None:
        d = disclose(build.project, objective, seen, context=coords)
        log.append(_record(build, 0, objective, seen, coords, events.disclosure_summary(d)))

    return resolve, log


def _row(name: str, wall: Stats, cpu: Stats | None = None) -> dict[str, Any]:
    row = {"name": name, "impl": "seif", **wall.to_json()}
    if cpu is not None:
        row["cpu_median_ns"] = round(cpu.median_ns, 1)
    return row


def _replays(build: Any, path: Path, total: int, repeats: int) -> tuple[list[Any], dict[int, Any]]:
    """Replay from the file: the first N, 2N and 4N records."""
    rows, linear = [], {}
    for n in (total // 4, total // 2, total):
        wall, cpu = _per_record(_from_file(build, path, n), n, repeats)
        rows.append(_row(f"replay from file, {n} records", wall, cpu))
        linear[n] = {"wall_s": wall.median_ns * n / 1e9, "cpu_s": cpu.median_ns * n / 1e9}
    return rows, linear


def _in_memory(build: Any, candidate: Project, decoded: list[Any], repeats: int) -> list[Any]:
    """Replay and what-if of records already decoded."""
    n, rows = len(decoded), []
    runs: dict[str, Callable[[], int]] = {
        "replay decoded": lambda: (
            replay(build.project, decoded, build_digest=build.digest).reproduced
        ),
        "replay decoded, no cache": lambda: (
            replay(build.project, decoded, build_digest=build.digest, cache_size=0).reproduced
        ),
        "what-if decoded": lambda: (
            what_if(build.project, candidate, decoded, build_digest=build.digest).considered
        ),
    }
    for label, fn in runs.items():
        rows.append(_row(f"{label}, {n} records", *_per_record(fn, n, repeats)))
    return rows


def run(*, quick: bool = False) -> dict[str, Any]:
    total = N_QUICK if quick else N_MAX
    repeats = 1 if quick else 3
    build = make_build(compile_project(REFERENCE))
    candidate = candidate_of(build.project)
    with tempfile.TemporaryDirectory(prefix="seif-bench-replay-") as tmp:
        path = Path(tmp) / "decisions.cbor"
        started = time.perf_counter()
        distinct = generate(path, build, total)
        log = {"records": total, "bytes": path.stat().st_size, "distinct_inputs": distinct,
               "generated_s": round(time.perf_counter() - started, 1)}  # fmt: skip
        rows, linear = _replays(build, path, total, repeats)
        decoded = list(islice(open_log(path).records(), total // 4))
        rows += _in_memory(build, candidate, decoded, repeats)
        changes = what_if(build.project, candidate, decoded, build_digest=build.digest)
        live = {}
        for label, fsync_every in (("live resolve, fsync", 1), ("live resolve, no fsync", 0)):
            resolve, writer = _live(build, Path(tmp) / f"live-{fsync_every}.cbor", fsync_every)
            try:
                live[label] = measure(resolve, repeats=5 if quick else 11, min_time=0.02)
            finally:
                writer.close()
            rows.append(_row(label, live[label]))
    return _result(rows, linear, live, log, changes.summary.to_json())


def _result(
    rows: list[dict[str, Any]],
    linear: dict[int, Any],
    live: dict[str, Stats],
    log: dict[str, Any],
    changes: dict[str, Any],
) -> dict[str, Any]:
    total = log["records"]
    full = next(r for r in rows if r["name"] == f"replay from file, {total} records")
    per_s, cpu_per_s = round(1e9 / full["median_ns"]), round(1e9 / full["cpu_median_ns"])
    sizes = sorted(linear)
    ratio = [round(linear[n]["cpu_s"] / linear[sizes[0]]["cpu_s"], 2) for n in sizes]
    ratios = {f"{label} / replay from file (per record)": round(s.median_ns / full["median_ns"], 1)
              for label, s in live.items()}  # fmt: skip
    load = os.getloadavg()[0]
    return {
        "source": str(REFERENCE.relative_to(REPO)),
        "log": log,
        "rows": rows,
        "throughput_per_s": {row["name"]: round(1e9 / row["median_ns"]) for row in rows},
        "target": {
            "records_per_s": TARGET_PER_S,
            "wall_per_s": per_s,
            "cpu_per_s": cpu_per_s,
            "met": cpu_per_s >= TARGET_PER_S,
        },
        "linearity": {
            "records": sizes,
            "wall_s": [round(linear[n]["wall_s"], 3) for n in sizes],
            "cpu_s": [round(linear[n]["cpu_s"], 3) for n in sizes],
            "cpu_ratio_to_first": ratio,
            "cpu_ns_per_record": [round(linear[n]["cpu_s"] / n * 1e9) for n in sizes],
        },
        "what_if": changes,
        "ratios": ratios,
        "load_average": round(load, 1),
        "notes": [
            f"{total} DISCLOSED records ({log['bytes'] / 1e6:.1f} MB), {log['distinct_inputs']} "
            "distinct engine inputs, each evaluated once per replay (the engine is pure)",
            f"replay from file at {total} records: {cpu_per_s} records/s of CPU time on one "
            f"core, {per_s} records/s wall clock (load average {load:.1f}); target "
            f"{TARGET_PER_S}: {'met' if cpu_per_s >= TARGET_PER_S else 'NOT met'}",
            f"linearity, CPU time at {', '.join(map(str, sizes))} records over time at "
            f"{sizes[0]}: {', '.join(f'{r:.2f}' for r in ratio)} (linear: 1, 2, 4); per record: "
            + ", ".join(f"{linear[n]['cpu_s'] / n * 1e6:.1f} µs" for n in sizes),
        ],
    }


def profile(count: int = 20_000) -> None:
    import cProfile
    import pstats

    build = make_build(compile_project(REFERENCE))
    with tempfile.TemporaryDirectory(prefix="seif-bench-replay-") as tmp:
        path = Path(tmp) / "decisions.cbor"
        generate(path, build, count)
        profiler = cProfile.Profile()
        profiler.enable()
        _from_file(build, path, count)()
        profiler.disable()
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    else:
        print("python -m bench replay [--json] [--quick]; python -m bench.replay --profile")

"""`python -m bench runtime --quick --json` runs and reports in the documented shape.

Starts the executor, the bare server, the runtime and the load generator as subprocesses on
loopback. No timing is asserted: only that every target was measured, that every answer was
right (no errors) and that every execute that succeeded has its intent in the store.
"""

from __future__ import annotations

from tests.support.bench_support import run_bench

TARGETS = ("bare", "resolve", "execute")


def _run_runtime_bench() -> dict:  # type: ignore[type-arg]  # a JSON document
    return run_bench("runtime", timeout=120)


def test_runtime_bench_reports_json() -> None:
    result = _run_runtime_bench()

    assert set(result["targets"]) == set(TARGETS)
    for name in TARGETS:
        target = result["targets"][name]
        assert target["errors"] == {}, name
        assert target["ok"] > 0, name
        assert target["ok"] == target["sent"], name
        assert target["rps"] > 0, name
        assert 0 < target["p50_ms"] <= target["p99_ms"], name
        assert target["elapsed_s"] > 0, name
        assert target["warmup"]["errors"] == {}, name

    rows = {row["name"]: row for row in result["rows"]}
    assert set(rows) == {
        "bare POST /echo",
        "POST /v1/context/resolve",
        "POST /v1/context/tools/execute",
    }
    for row in rows.values():
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls", "rps"}
        assert 0 < row["median_ns"] <= row["p99_ns"]
        assert row["calls"] > 0

    assert set(result["ratios"]) == {"resolve/bare rps", "execute/bare rps"}
    assert all(value > 0 for value in result["ratios"].values())

    goals = result["goals"]
    assert goals["resolve_vs_bare"]["ratio"] == result["ratios"]["resolve/bare rps"]
    assert isinstance(goals["resolve_vs_bare"]["met"], bool)
    assert goals["execute_rps"]["rps"] == result["targets"]["execute"]["rps"]
    assert goals["execute_rps"]["met"] in (True, False, None)
    assert goals["execute_rps"]["intents_recorded"] is True

    store = result["store"]
    assert store["recorded"] is True
    assert store["intents"].get("SUCCEEDED", 0) >= store["execute_succeeded"] > 0
    assert "PENDING" not in store["intents"]

    probes = result["executor_requests_during_execute"]
    assert probes["executions"] == store["execute_succeeded"]
    assert probes["describes"] > 0

    config = result["config"]
    assert config["durability"]["journal_mode"] == "wal"
    assert len(config["durability"]["fsync_us_before_after"]) == 2
    assert any("target execute" in note for note in result["notes"])

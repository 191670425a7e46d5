"""`python -m bench replicas --quick --json` runs and reports in the documented shape.

Starts the executor, one `seif serve --data` and 1, 2 and 3 `seif serve --store postgresql://`
replicas (a fresh database each, on the server `pg_support` finds) and the client as
subprocesses on loopback. No timing is asserted: only that every configuration was measured
and dispatched, that every answer was right (no errors), that every call was dispatched once
and every success recorded in the store, and that the CPU breakdown is there.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bench_support import run_bench
from tests.support.pg_support import require_server

CONFIGS = ("sqlite", "pg1", "pg2", "pg3")
RATIOS = {"1 replica PostgreSQL vs SQLite", "2 replicas vs 1", "3 replicas vs 1 replica PostgreSQL"}


def test_replicas_bench_reports_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEIF_BENCH_PG_URL", require_server())  # the server the tests use
    result: dict[str, Any] = run_bench("replicas", timeout=120)

    assert set(result["configurations"]) == set(CONFIGS)
    for name in CONFIGS:
        c = result["configurations"][name]
        assert c["ok"] > 0, name
        assert c["errors"] == {} and c["warmup_errors"] == {}, name
        assert c["dispatches_per_s"] > 0, name
        assert 0 < c["p50_ms"] <= c["p99_ms"], name
        assert c["dispatched_once"] is True, name
        assert c["recorded"] is True, name
        cpu = c["cpu"]
        assert cpu["dispatches_in_window"] == c["ok"], name
        assert cpu["benchmark_cpu_us_per_dispatch"] > 0, name
        assert {"replicas (all threads)", "executor", "client"} <= set(cpu["cpu_us_per_dispatch"])
        for stored in c["stored"]:
            assert "PENDING" not in stored["intents"], name
    assert [c["replicas"] for c in result["configurations"].values()] == [1, 1, 2, 3]
    for name in ("pg1", "pg2", "pg3"):
        stored = result["configurations"][name]["stored"][0]
        assert stored["log_events"]["INTENT"] == stored["intents"]["SUCCEEDED"], name

    rows = {row["name"]: row for row in result["rows"]}
    assert len(rows) == len(CONFIGS)
    for row in rows.values():
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls", "rps"}
        assert 0 < row["median_ns"] <= row["p99_ns"]
        assert row["calls"] > 0

    assert set(result["ratios"]) == RATIOS
    assert all(value > 0 for value in result["ratios"].values())
    assert isinstance(result["goals"]["pg1_vs_sqlite"]["met"], bool)
    assert isinstance(result["goals"]["pg3_vs_pg1"]["met"], bool)
    assert result["config"]["postgresql"]["settings"]["server_version"]
    assert any("target 3 replicas" in note for note in result["notes"])

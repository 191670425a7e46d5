"""`python -m bench upstream --quick --json` runs and reports in the documented shape.

Starts the upstream MCP server (the official SDK's), imports its tool with `seif tool import`,
builds, serves it with `seif serve --mcp`, and runs the three targets. No timing is asserted:
only that every target was measured in both phases, every answer was right, every call reached
the upstream exactly once, and every success through seif is a SUCCEEDED intent in the store.
"""

from __future__ import annotations

from tests.support.bench_support import run_bench

TARGETS = ("direct", "execute", "mcp")


def test_upstream_bench_reports_json() -> None:
    result = run_bench("upstream", timeout=240)

    assert set(result["targets"]) == set(TARGETS)
    for name in TARGETS:
        for phase in ("latency", "rate"):
            target = result["targets"][name][phase]
            assert target["errors"] == {}, (name, phase)
            assert target["ok"] == target["sent"] > 0, (name, phase)
            assert target["dispatched"] == target["ok"], (name, phase)
            assert 0 < target["p50_ms"] <= target["p99_ms"], (name, phase)
            assert target["unclosed_clients"] == 0, (name, phase)
    assert result["dispatched_once"] is True
    store = result["store"]
    assert store["recorded"] is True
    assert store["intents"]["SUCCEEDED"] >= store["succeeded"] > 0

    rows = {row["name"] for row in result["rows"]}
    assert len(rows) == 6 and all(row["calls"] > 0 for row in result["rows"])
    assert set(result["ratios"]) == {"execute / direct rps", "mcp / direct rps"}
    assert all(value > 0 for value in result["ratios"].values())
    assert set(result["added_ms"]) == {"execute", "mcp"}
    assert set(result["goal"]["met"]) == {"execute", "mcp"}
    assert all(isinstance(met, bool) for met in result["goal"]["met"].values())

"""`python -m bench replay --quick --json` runs, replays every generated record exactly, and
reports in the documented shape. No timing is asserted."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_replay_bench_reports_json() -> None:
    result = run_bench("replay")
    log = result["log"]
    assert log["records"] == 4000 and log["bytes"] > 0
    assert 0 < log["distinct_inputs"] < log["records"]
    names = {row["name"] for row in result["rows"]}
    assert {f"replay from file, {n} records" for n in (1000, 2000, 4000)} <= names
    assert {"live resolve, fsync", "live resolve, no fsync"} <= names
    assert "replay decoded, no cache, 1000 records" in names
    for row in result["rows"]:
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls"}
        assert 0 < row["median_ns"] <= row["p99_ns"]
    assert result["linearity"]["records"] == [1000, 2000, 4000]
    assert result["target"]["records_per_s"] == 20_000
    assert result["target"]["cpu_per_s"] > 0 and result["target"]["wall_per_s"] > 0
    assert result["what_if"]["newlyWithheld"].keys() == {"search-knowledge"}
    assert result["what_if"]["newlyDisclosed"] == {}
    assert len(result["ratios"]) == 2 and all(v > 0 for v in result["ratios"].values())

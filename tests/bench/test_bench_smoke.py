"""`python -m bench validator --quick --json` runs and reports in the documented shape."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_validator_bench_reports_json() -> None:
    result = run_bench("validator")
    assert result["source"].endswith("context-project.json")
    assert result["schemas"] > 0
    assert result["values"]["valid"] > 0
    assert result["values"]["invalid"] > 0
    assert result["disagreements"] == []
    impls = {row["impl"] for row in result["rows"]}
    assert {"seif", "seif errors", "jsonschema", "fastjsonschema"} <= impls
    for row in result["rows"]:
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls"}
        assert row["median_ns"] > 0
        assert row["p99_ns"] >= row["median_ns"]
        assert row["calls"] > 0
    assert set(result["ratios"]) >= {
        "jsonschema/seif is_valid, valid",
        "fastjsonschema/seif is_valid, valid",
        "jsonschema/seif is_valid, invalid",
        "fastjsonschema/seif is_valid, invalid",
    }
    assert all(value > 0 for value in result["ratios"].values())


def test_harness_measures_and_scales() -> None:
    from bench.harness import Stats, measure, quantile, ratio

    stats = measure(lambda: sum(range(10)), repeats=5, min_time=0.0005)
    assert 0 < stats.median_ns <= stats.p99_ns
    assert stats.calls >= 5
    assert stats.per(10).median_ns == stats.median_ns / 10
    assert ratio(Stats(200.0, 300.0, 1), Stats(100.0, 100.0, 1)) == 2.0
    assert quantile([1.0, 2.0, 3.0], 0.5) == 2.0

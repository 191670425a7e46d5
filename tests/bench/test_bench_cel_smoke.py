"""`python -m bench cel --quick --json` runs and reports in the documented shape. No timing is
asserted: only that every case was measured by every evaluator (they agree on every expression,
or the benchmark fails), and that the figures the targets are judged by are computed from the
rows."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_cel_bench_reports_every_case_and_the_targets_from_the_rows() -> None:
    result = run_bench("cel", timeout=180)
    rows = {(row["name"], row["impl"]): row for row in result["rows"]}
    for name in ("no condition", "one clause", "two clauses", "five clauses"):
        assert rows[(f"decide, {name}", "seif")]["median_ns"] > 0
    for name in ("one clause", "two clauses", "five clauses", "when"):
        impls = {impl for (case, impl) in rows if case == f"evaluate {name}"}
        assert impls == {"seif celfast", "cel-python", "cel-expr-python"}, name
    base = rows[("decide, no condition", "seif")]["median_ns"]
    two = rows[("decide, two clauses", "seif")]["median_ns"]
    assert abs(result["ratios"]["decide two clauses / no condition"] - two / base) < 1e-3
    one = rows[("decide, one clause", "seif")]["median_ns"]
    assert abs(result["added_ns"]["one clause"] - (one - base)) < 1  # rows: 0.1 ns rounding
    assert rows[("evaluate worst case", "seif celfast")]["median_ns"] > two

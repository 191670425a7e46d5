"""`python -m bench sdk --quick --json` runs against a real runtime and reports in the
documented shape. No timing is asserted: only that both clients were measured on the same
number of calls, that every call was a real dispatch that succeeded, and that the ratios are
computed from the rows."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_sdk_bench_reports_both_clients_and_their_ratios() -> None:
    result = run_bench("sdk", timeout=180)
    assert result["statuses"] == {"bare": {"SUCCEEDED": 200}, "sdk": {"SUCCEEDED": 200}}
    rows = {(row["name"], row["impl"]): row for row in result["rows"]}
    assert set(rows) == {
        (f"execute, client {kind}", impl) for kind in ("cpu", "wall") for impl in ("bare", "sdk")
    }
    for row in rows.values():
        assert row["calls"] == 200 and 0 < row["median_ns"] <= row["p99_ns"]
    cpu = result["ratios"]["sdk/bare client CPU per execute (median)"]
    bare, sdk = rows[("execute, client cpu", "bare")], rows[("execute, client cpu", "sdk")]
    assert abs(cpu - sdk["median_ns"] / bare["median_ns"]) < 1e-9
    assert result["target"] == {"ratio": 1.3, "met": cpu <= 1.3}

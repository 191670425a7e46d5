"""`python -m bench shadow --quick --json` runs and reports in the documented shape.

Starts the executor, three runtimes (no shadow, a candidate that decides alike, one that
differs) and the load generator as subprocesses on loopback. No timing is asserted: only that
every target was measured without an error, and that the shadowed runtimes marked every
decision and logged a ``SHADOW`` record for every resolve of the candidate that differs only.
"""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_shadow_bench_reports_json() -> None:
    result = run_bench("shadow", timeout=300)
    targets = result["targets"]
    for mode in ("resolve", "execute"):
        for kind in ("plain", "alike", "differs"):
            figures = targets[f"{mode} {kind}"]
            assert figures["ok"] > 0 and figures["rps"] > 0, (mode, kind)
            assert all(errors == {} for errors in figures["errors"]), (mode, kind)
            assert 0 < figures["p50_ms"] <= figures["p99_ms"]
    assert set(result["ratios"]) == {
        f"{mode} shadow {kind}/plain rps"
        for mode in ("resolve", "execute")
        for kind in ("alike", "differs")
    }
    assert all(value > 0 for value in result["ratios"].values())
    for log in result["shadow_logs"]["alike"]:
        assert log["shadow_records"] == 0 and log["decisions"] > 0
    for log in result["shadow_logs"]["differs"]:
        assert log["shadow_records"] > 0 and log["decisions"] > 0
    for logs in result["shadow_logs"].values():
        for log in logs:
            assert log["marked"] == log["decisions"]  # the quick load never fills the backlog
    assert all(goal["met"] in (True, False) for goal in result["goals"].values())

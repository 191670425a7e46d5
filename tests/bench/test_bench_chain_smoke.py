"""`python -m bench chain --quick --json` runs, verifies its generated log, and reports in the
documented shape. No timing is asserted."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_chain_bench_reports_json() -> None:
    result = run_bench("chain")
    assert result["log"]["records"] == 3000 and result["log"]["bytes"] > 0
    names = {row["name"] for row in result["rows"]}
    for label in ("DISCLOSED", "INTENT"):
        assert {f"append {label}, chained", f"append {label}, digest a no-op"} <= names
        assert f"BLAKE3 of the {label} record's bytes" in names
        assert result["record_bytes"][f"bytes of the {label} record"] > 0
    assert {"verify (the chain walk)", "plain read of the same log"} <= names
    for row in result["rows"]:
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls"}
        assert 0 < row["median_ns"] <= row["p99_ns"]
    assert set(result["ratios"]) == {
        "append DISCLOSED: chained / digest a no-op",
        "append INTENT: chained / digest a no-op",
        "verify / plain read",
    }
    assert all(v > 0 for v in result["ratios"].values())
    assert all(v > 0 for v in result["records_per_s"].values())

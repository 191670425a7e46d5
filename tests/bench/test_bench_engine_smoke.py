"""`python -m bench engine --quick --json` runs, reports in the documented shape, and decided right.

No timing is asserted: only that the figures exist and that each engine decided the reference
cases as expected (cedar allowing the invalid arguments it cannot see).
"""

from __future__ import annotations

from tests.support.bench_support import run_bench

CASES = {
    # case: (seif outcome, seif reason, cedar decision)
    "allowed read": ("ALLOW", None, "Allow"),
    "undisclosed tool": ("DENY", "TOOL_NOT_DISCLOSED", "Deny"),
    "invalid arguments": ("DENY", "ARGUMENTS_INVALID", "Allow"),
    "approved write": ("ALLOW", None, "Allow"),
    "approval required": ("DENY", "APPROVAL_REQUIRED", "Deny"),
}
IMPLS = ("seif", "cedarpy text", "cedarpy prepared")


def _run_engine_bench() -> dict:  # type: ignore[type-arg]  # a JSON document
    return run_bench("engine")


def test_engine_bench_reports_json_and_expected_decisions() -> None:
    result = _run_engine_bench()
    assert result["source"].endswith("context-project.json")
    assert result["mismatches"] == []

    assert set(result["disclosures"]) == {"learner", "authoring"}
    assert result["disclosures"]["learner"]["status"] == "RESOLVED"
    assert "propose-change" not in result["disclosures"]["learner"]["tools"]
    assert result["disclosures"]["authoring"]["status"] == "RESOLVED"
    assert "propose-change" in result["disclosures"]["authoring"]["tools"]

    assert set(result["outcomes"]) == set(CASES)
    for name, (outcome, reason, cedar) in CASES.items():
        got = result["outcomes"][name]
        assert (got["seif"]["outcome"], got["seif"]["reason"]) == (outcome, reason), name
        assert got["cedarpy text"] == cedar, name
        assert got["cedarpy prepared"] == cedar, name
    assert result["outcomes"]["invalid arguments"]["seif"]["errors"] > 0
    assert result["outcomes"]["approved write"]["seif"]["approvalRequired"] is True

    names = {row["name"] for row in result["rows"]}
    assert {"disclose learner", "disclose authoring"} <= names
    for name in CASES:
        impls = {row["impl"] for row in result["rows"] if row["name"] == f"decide {name}"}
        assert impls == set(IMPLS), name
    for row in result["rows"]:
        assert set(row) >= {"name", "impl", "median_ns", "p99_ns", "calls"}
        assert row["median_ns"] > 0
        assert row["p99_ns"] >= row["median_ns"]
        assert row["calls"] > 0

    expected_ratios = {f"{impl}/seif decide, {name}" for impl in IMPLS[1:] for name in CASES}
    assert set(result["ratios"]) == expected_ratios
    assert all(value > 0 for value in result["ratios"].values())
    assert set(result["throughput_per_s"]) >= {"disclose learner", "disclose authoring"}
    assert result["decide_target"]["median_ns"] == 10_000
    assert set(result["decide_target"]["cases"]) == set(CASES)
    assert {"seif decide", "cedarpy text", "cedarpy prepared"} <= set(result["computes"])
    assert any("does NOT validate arguments" in note for note in result["notes"])

"""`python -m bench language --quick --json` runs (it fails unless both front ends give one
build digest for each project) and reports both front ends for both projects, with the ratios
computed from the rows. No timing is asserted."""

from __future__ import annotations

from tests.support.bench_support import run_bench


def test_language_bench_reports_both_front_ends() -> None:
    result = run_bench("language", timeout=180)
    rows = {(row["name"], row["impl"]): row for row in result["rows"]}
    for project in ("reference", "catalogue of 32 tools"):
        seif, json = rows[(project, "seif")], rows[(project, "json")]
        assert 0 < json["median_ns"] <= json["p99_ns"] and seif["median_ns"] > 0
        ratio = result["ratios"][f"seif / json, {project}"]
        assert abs(ratio - seif["median_ns"] / json["median_ns"]) < 1e-3
    big = rows[("catalogue of 32 tools", "seif")]["median_ns"]
    ratios_met = all(r <= 3.0 for r in result["ratios"].values())
    assert result["target_met"] is (ratios_met and big < 50_000_000)  # judged from the rows

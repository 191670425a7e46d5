"""The project-test corpus (``corpus/project-tests/README.md``): projects whose tests set
coordinates, and what ``run_tests`` must report for each test, through both front ends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from compiler.driver import compile_document, compile_file, compile_seif
from compiler.seif.parse import parse_seif
from compiler.seif.printer import to_seif
from policy.engine.testing import run_tests
from policy.ir import Project
from policy.json.strict import loads
from tests.support.paths import ROOT

if TYPE_CHECKING:  # imported for its type only: pytest would try to collect a Test* name
    from policy.engine.testing import TestReport

CORPUS = ROOT / "corpus" / "project-tests"
CASES = sorted(CORPUS.glob("*.json"))
CASE_KEYS = frozenset({"description", "project", "projectFile", "expect"})
FAILURE_KEYS = frozenset({"subject", "expected", "actual"})


def load_case(path: Path) -> dict[str, Any]:
    case = loads(path.read_bytes())
    assert isinstance(case, dict), f"{path.name}: a case is a JSON object"
    assert set(case) <= CASE_KEYS, f"{path.name}: unknown keys {sorted(set(case) - CASE_KEYS)}"
    assert isinstance(case.get("description"), str) and case["description"].strip()
    assert ("project" in case) != ("projectFile" in case), "exactly one of project, projectFile"
    assert isinstance(case.get("expect"), dict) and case["expect"], "a case expects something"
    return case


def compiled(case: dict[str, Any]) -> tuple[Project, Project]:
    """The case's project, and the same project through the other front end."""
    if "project" in case:
        document = case["project"]
        other = compile_seif(to_seif(document))
        first = compile_document(document)
    else:
        path = ROOT / case["projectFile"]
        first = compile_file(path)
        text = path.read_text(encoding="utf-8")
        document = parse_seif(text).document if path.suffix == ".seif" else json.loads(text)
        other = (
            compile_document(document)
            if path.suffix == ".seif"
            else compile_seif(to_seif(document))
        )
    assert first.project is not None, first.diagnostics
    assert other.project is not None, other.diagnostics
    return first.project, other.project


def outcomes(report: TestReport) -> dict[str, Any]:
    """Each test's ``"pass"`` or ``{"fail": [...]}``, as a case writes it."""
    out: dict[str, Any] = {}
    for result in report.results:
        failed = [
            {"subject": a.subject, "expected": a.expected, "actual": a.actual}
            for a in result.assertions
            if not a.passed
        ]
        out[result.id] = {"fail": failed} if failed else "pass"
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_test_passes_or_fails_as_the_case_says(path: Path) -> None:
    case = load_case(path)
    for entry in case["expect"].values():
        assert entry == "pass" or (
            set(entry) == {"fail"} and all(set(f) == FAILURE_KEYS for f in entry["fail"])
        ), entry
    project, other = compiled(case)
    assert outcomes(run_tests(project)) == case["expect"]
    assert outcomes(run_tests(other)) == case["expect"]


def test_the_corpus_has_a_failing_and_a_passing_test_at_each_coordinate() -> None:
    """Each coordinate is set by a test that passes and by one that fails on purpose, so the
    corpus shows that coordinates change the outcome, not only that tests accept them."""
    seen: dict[tuple[str, bool], int] = {}
    for path in CASES:
        case = load_case(path)
        project, _ = compiled(case)
        for test in project.tests:
            passed = case["expect"][test.id] == "pass"
            for name in test.coordinates.given() if test.coordinates else {}:
                seen[(name, passed)] = seen.get((name, passed), 0) + 1
    assert {("environment", True), ("environment", False), ("consumer", True)} <= set(seen)
    assert {("consumer", False), ("deployment", True)} <= set(seen)


def test_the_language_guide_case_is_the_guide_s_own_example() -> None:
    """``language-guide.seif`` starts with the first example of docs/language.md, verbatim:
    the guide's `when "context.environment != 'production'"` is the rule its tests test."""
    guide = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    example = re.search(r"```seif\n(.*?)```", guide, re.S)
    assert example is not None
    assert "when \"context.environment != 'production'\"" in example.group(1)
    case = (CORPUS / "language-guide.seif").read_text(encoding="utf-8")
    assert case.startswith(example.group(1))

"""The two front ends give one IR: every valid corpus project and generated projects
(hypothesis) converted JSON -> `.seif` -> JSON come back as the same document, and the `.seif`
text compiles to the same build digest as the JSON; the shipped reference `.seif` builds to the
JSON reference's digest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from compiler.builds.build import make_build
from compiler.driver import compile_project, compile_seif, compile_text
from compiler.seif.parse import parse_seif
from compiler.seif.printer import to_seif
from tests.support import strategies
from tests.support.paths import ROOT

VALID = sorted((ROOT / "corpus" / "declarations" / "valid").glob("*.json"))
REFERENCE = ROOT / "reference" / "agent-tools"


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, with the int/float distinction kept everywhere."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _digest(result: Any) -> str:
    assert result.project is not None, result.diagnostics
    digest: str = make_build(result.project).digest
    return digest


def _round_trip(doc: dict[str, Any]) -> None:
    text = to_seif(doc)
    assert _same(parse_seif(text).document, doc), text
    assert to_seif(parse_seif(text).document) == text  # printing is a fixed point
    json_result, seif_result = compile_text(json.dumps(doc)), compile_seif(text)
    if json_result.project is not None:
        assert _digest(seif_result) == _digest(json_result)
    else:  # an invalid project is invalid either way, with the same codes
        codes = sorted(d.code for d in json_result.diagnostics)
        assert sorted(d.code for d in seif_result.diagnostics) == codes


@pytest.mark.parametrize("case", VALID, ids=[p.stem for p in VALID])
def test_every_valid_corpus_project_round_trips(case: Path) -> None:
    _round_trip(json.loads(case.read_text())["project"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=strategies.projects())
def test_generated_projects_round_trip(doc: dict[str, Any]) -> None:
    _round_trip(doc)


def test_the_reference_seif_builds_to_the_json_reference_s_digest() -> None:
    as_json = make_build(compile_project(REFERENCE / "context-project.json")).digest
    as_seif = make_build(compile_project(REFERENCE / "context-project.seif")).digest
    assert as_seif == as_json

"""The project file's JSON Schema (`seif schema project`) is true to the compiler, checked with
the `jsonschema` library (Draft 2020-12): every project of the repository the compiler accepts
(the reference, the corpora's projects, the MCP conformance project, `.seif` files' documents,
the replay example's candidate, `seif init`'s starter) is accepted; every declaration the
compiler refuses for a structural reason (an unknown or missing key, a wrong JSON type, a value
outside its constraint, a READY fixture without its contract) is refused, and every one the
schema refuses the compiler refuses for such a reason. What the schema cannot express
(references, the tool schema subset, CEL, limits) stays the compiler's alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from compiler.authoring.starter_project import starter_project
from compiler.builds.build import make_build
from compiler.driver import compile_document, compile_file
from compiler.passes import check_document
from compiler.project_schema import project_schema
from compiler.seif.parse import parse_seif
from policy.diagnostic import Diagnostic
from tests.support.paths import REFERENCE, ROOT

SCHEMA = project_schema()
VALIDATOR = Draft202012Validator(SCHEMA)
STRUCTURAL = frozenset({"structure"})


def _project(path: Path) -> Any:
    doc = json.loads(path.read_text())
    if isinstance(doc, dict) and "format" not in doc and "project" in doc:
        return doc["project"]
    return doc


def _seif_documents(*patterns: str) -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            yield str(path.relative_to(ROOT)), parse_seif(path.read_text()).document


def repository_projects() -> Iterator[tuple[str, Any]]:
    """Every valid project document of the repository, by name."""
    yield "reference json", _project(REFERENCE)
    yield from _seif_documents(
        "reference/agent-tools/*.seif", "corpus/project-tests/*.seif", "corpus/dsl-errors/00-*"
    )
    for pattern in (
        "corpus/declarations/valid/*.json",
        "corpus/decisions/*.json",
        "corpus/builds/*/project.json",
        "corpus/project-tests/*.json",
        "tests/servers/mcp/conformance-project.json",
    ):
        for path in sorted(ROOT.glob(pattern)):
            doc = _project(path)
            if isinstance(doc, dict) and "format" in doc:
                yield str(path.relative_to(ROOT)), doc
    yield "seif init (JSON)", starter_project()
    yield "seif init (.seif)", starter_project(schema=None)
    yield "replay example candidate", _candidate()


def _candidate() -> Any:
    sys.path.insert(0, str(ROOT / "examples" / "replay"))
    try:
        from exclude_tool import exclude  # type: ignore[import-not-found]  # an example script

        return exclude(_project(REFERENCE), "learner", "search-knowledge")
    finally:
        sys.path.remove(str(ROOT / "examples" / "replay"))


PROJECTS = list(repository_projects())


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_there_are_projects_of_every_kind() -> None:
    names = [name for name, _ in PROJECTS]
    assert len(names) > 100 and "reference json" in names and "seif init (JSON)" in names
    assert any(name.endswith(".seif") for name in names)


@pytest.mark.parametrize(("name", "doc"), PROJECTS, ids=[name for name, _ in PROJECTS])
def test_every_project_of_the_repository_is_accepted(name: str, doc: Any) -> None:
    assert compile_document(doc).ok, name
    errors = [f"{e.json_path}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
    assert errors == [], name


def _structural(found: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics the schema must also give: the structure pass's, and the resolve pass's
    missing keys of a READY fixture."""
    return [d for d in found if d.pass_name in STRUCTURAL or d.code == "MISSING_KEY"]


def other_documents() -> Iterator[tuple[str, Any]]:
    """The declarations of the repository that are not all valid: the invalid corpus (but its
    raw-text cases) and the documents of the formatter's corpus."""
    for path in sorted((ROOT / "corpus" / "declarations" / "invalid").glob("*.json")):
        case = json.loads(path.read_text())
        if "project" in case:
            yield path.stem, case["project"]
    yield from _seif_documents("corpus/seif-fmt/*.seif")


OTHERS = list(other_documents())


@pytest.mark.parametrize(("name", "doc"), OTHERS, ids=[name for name, _ in OTHERS])
def test_the_schema_refuses_exactly_the_structural_refusals(name: str, doc: Any) -> None:
    structural = _structural(check_document(doc))
    errors = list(VALIDATOR.iter_errors(doc))
    assert bool(errors) == bool(structural), (
        [d.code for d in structural],
        [e.message for e in errors],
    )


def _mutated(change: str) -> Any:
    doc: Any = _project(REFERENCE)
    if change == "token ceiling as a string":
        doc["profiles"][0]["tokenCeiling"] = "2000"
    elif change == "misspelled key":
        doc["profiles"][0]["toolRule"] = doc["profiles"][0].pop("toolRules")
    elif change == "tool without effect":
        del doc["tools"][0]["effect"]
    elif change == "unknown role":
        doc["profiles"][0]["context"][0]["role"] = "narrator"
    elif change == "READY fixture without digest":
        del next(iter(doc["toolFixtures"].values()))["contractDigest"]
    elif change == "schema reference not a string":
        doc["$schema"] = 1
    elif change == "id with a trailing newline":
        doc["id"] += "\n"
    elif change == "wrong format":
        doc["format"] = "seif.context-project.v2"
    return doc


CHANGES = [
    "token ceiling as a string",
    "misspelled key",
    "tool without effect",
    "unknown role",
    "READY fixture without digest",
    "schema reference not a string",
    "id with a trailing newline",
    "wrong format",
]


@pytest.mark.parametrize("change", CHANGES)
def test_structurally_invalid_projects_are_refused_by_both(change: str) -> None:
    doc = _mutated(change)
    assert _structural(check_document(doc)), change
    assert list(VALIDATOR.iter_errors(doc)), change


def test_a_schema_reference_changes_no_digest() -> None:
    doc = _project(REFERENCE)
    plain = compile_document(doc).project
    named = compile_document({"$schema": "seif-project.schema.json", **doc}).project
    assert plain is not None and named is not None
    assert make_build(named).digest == make_build(plain).digest


def test_seif_schema_project_prints_the_schema(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "seif.cli", "schema", "project"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout) == SCHEMA
    assert compile_file(REFERENCE).ok

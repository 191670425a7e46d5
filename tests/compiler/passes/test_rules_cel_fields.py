"""The check pass reads each condition's fields against the rule's tool and the coordinates:
``CEL_UNKNOWN_FIELD`` is a located error, ``CEL_OPTIONAL_WITHOUT_HAS`` a located warning that
refuses nothing, in JSON and `.seif` projects, through ``seif validate`` and its exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler.builds.build import load_build, write_build
from compiler.driver import compile_document, compile_file
from compiler.passes import lower_document
from tests.support.coordinates import coordinates_doc, seif, write_project

RULE = (
    "/profiles/1/toolRules/0"  # authoring's rule for inspect-context: `ref`, `depth?`, `section?`
)
WHEN = f"{RULE}/conditions/0/when"


def with_condition(when: str) -> dict[str, Any]:
    doc = coordinates_doc()
    rule = doc["profiles"][1]["toolRules"][0]
    assert rule["tool"] == "inspect-context"
    rule["conditions"] = [{"when": when, "then": "DENY", "reason": "deep reads"}]
    return doc


def written(path: Path, line: int, column: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[line - 1][column - 1 :]


def test_a_misspelled_argument_is_a_located_error_in_a_json_project(tmp_path: Path) -> None:
    path = write_project(tmp_path, with_condition("args.dept > 2"), ".json")
    result = compile_file(path)
    assert result.project is None
    [found] = result.diagnostics
    assert (found.code, found.severity, found.pointer) == ("CEL_UNKNOWN_FIELD", "error", WHEN)
    assert found.message == (
        "`args.dept`: the tool `inspect-context` has no parameter `dept`; did you mean "
        "`depth`? (at 1:6 of the expression)"
    )
    assert found.line is not None and found.column is not None
    assert written(path, found.line, found.column).startswith('"args.dept > 2"')


def test_a_misspelled_argument_is_a_located_error_in_a_seif_project(tmp_path: Path) -> None:
    path = write_project(tmp_path, with_condition("args.dept > 2"), ".seif")
    result = compile_file(path)
    assert result.project is None
    [found] = result.diagnostics
    assert found.code == "CEL_UNKNOWN_FIELD" and found.location.cites_line
    assert found.pointer == WHEN
    assert found.line is not None and found.column is not None
    assert written(path, found.line, found.column).startswith('"args.dept > 2"')
    assert found.message.endswith("did you mean `depth`? (at 1:6 of the expression)")


def test_an_optional_read_warns_and_the_project_still_compiles(tmp_path: Path) -> None:
    for suffix in (".json", ".seif"):
        path = write_project(tmp_path, with_condition("args.depth > 2"), suffix)
        result = compile_file(path)
        assert result.ok and result.project is not None
        [found] = result.diagnostics
        assert (found.code, found.severity, found.pointer) == (
            "CEL_OPTIONAL_WITHOUT_HAS",
            "warning",
            WHEN,
        )
        assert "write `has(args.depth) && ...`" in found.message
        assert found.message.endswith("(at 1:6 of the expression)")
        assert found.line is not None
        assert written(path, found.line, found.column or 1).startswith('"args.depth > 2"')
        fixed = write_project(tmp_path, with_condition("has(args.depth) && args.depth > 2"), suffix)
        assert compile_file(fixed).diagnostics == ()


def test_a_context_field_of_a_disclosure_when_is_checked(tmp_path: Path) -> None:
    doc = coordinates_doc()
    doc["profiles"][1]["toolRules"][2]["when"] = "context.enviroment != 'production'"
    result = compile_file(write_project(tmp_path, doc, ".json"))
    [found] = result.diagnostics
    assert (found.code, found.pointer) == ("CEL_UNKNOWN_FIELD", "/profiles/1/toolRules/2/when")
    assert "did you mean `environment`? (at 1:9 of the expression)" in found.message


def test_seif_validate_exits_0_with_only_warnings_and_1_with_the_error(tmp_path: Path) -> None:
    warned = write_project(tmp_path, with_condition("args.depth > 2"), ".seif")
    run = seif("validate", str(warned))
    assert run.returncode == 0, run.stderr
    line = run.stderr.splitlines()[0]
    assert line.startswith(f"{warned}:") and ": CEL_OPTIONAL_WITHOUT_HAS: `args.depth`" in line
    assert run.stdout.splitlines()[0] == f"{warned}: valid, 3 tools, 1 warning"
    as_json = seif("validate", str(warned), "--json")
    assert as_json.returncode == 0
    report = json.loads(as_json.stdout)
    assert report["ok"] is True and len(report["tools"]) == 3
    assert [(d["code"], d["severity"]) for d in report["diagnostics"]] == [
        ("CEL_OPTIONAL_WITHOUT_HAS", "warning")
    ]
    broken = write_project(tmp_path, with_condition("args.dept > 2"), ".json")
    run = seif("validate", str(broken))
    assert run.returncode == 1
    assert run.stderr.startswith(f"{broken}:{WHEN}: CEL_UNKNOWN_FIELD: `args.dept`")
    assert run.stdout.splitlines() == [f"{broken}: invalid, 1 error"]
    report = json.loads(seif("validate", str(broken), "--json").stdout)
    assert report["ok"] is False
    assert report["diagnostics"][0]["severity"] == "error"
    assert report["diagnostics"][0]["pointer"] == WHEN


def test_a_build_written_before_the_check_still_loads(tmp_path: Path) -> None:
    """A stored build whose condition reads an unknown field loads as it did (the condition
    fails closed at run time); only a project is refused for it."""
    doc = with_condition("args.dept > 2")
    assert compile_document(doc).project is None
    build = write_build(lower_document(doc), tmp_path / "build")
    assert load_build(tmp_path / "build").digest == build.digest

"""``seif tool check-call`` at coordinates, and the condition it names when one decided.

The project is the project-test corpus's reference project with rules on each coordinate
(``corpus/project-tests/reference-coordinates.json``), written as JSON and as `.seif`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.checkcall import check_call, text_lines
from compiler.authoring.source import AuthoringError, load_source
from policy.engine.testing import run_tests
from tests.support.coordinates import PROPOSAL, READ, coordinates_doc, write_project


@pytest.fixture(params=[".json", ".seif"])
def path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_project(tmp_path, coordinates_doc(), request.param)


def check(path: Path, tool: str, arguments: Any, **options: Any) -> dict[str, Any]:
    return check_call(
        load_source(path), objective="authoring", tool=tool, arguments=arguments, **options
    )


def written_at(path: Path, line: int, column: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[line - 1][column - 1 :]


def test_coordinates_decide_disclosure_and_the_rule_s_when_is_named(path: Path) -> None:
    staging = check(
        path, "propose-change", PROPOSAL, approved=True, coordinates={"environment": "staging"}
    )
    assert staging["allowed"] and staging["coordinates"] == {"environment": "staging"}
    production = check(
        path, "propose-change", PROPOSAL, approved=True, coordinates={"environment": "production"}
    )
    assert production["decision"]["reason"] == "TOOL_NOT_DISCLOSED"
    rule = production["availability"]["rule"]
    assert rule["when"] == "context.environment != 'production'"
    assert rule["pointer"] == "/profiles/1/toolRules/2/when"
    assert "production" in written_at(path, rule["line"], rule["column"])
    lines = text_lines(production, str(path))
    assert lines[0].startswith("DENIED TOOL_NOT_DISCLOSED: propose-change for objective authoring")
    assert "at environment production" in lines[0]
    assert f"rule when: context.environment != 'production' is false here ({path}:" in lines[2]
    nowhere = check(
        path, "propose-change", PROPOSAL, approved=True, coordinates={"environment": ""}
    )
    assert nowhere["allowed"] and nowhere["coordinates"] == {}  # empty is absent


def test_a_denying_condition_is_named_with_its_place_expression_and_reason(path: Path) -> None:
    report = check(
        path, "propose-change", PROPOSAL, approved=True, coordinates={"consumer": "trial"}
    )
    assert not report["allowed"] and report["decision"]["reason"] == "CONDITION_DENIED"
    condition = report["condition"]
    assert condition["pointer"] == "/profiles/1/toolRules/2/conditions/0"
    assert (condition["profile"], condition["tool"], condition["index"]) == (
        "authoring",
        "propose-change",
        0,
    )
    assert condition["when"] == "context.consumer == 'trial'"
    assert condition["reason"] == "trial accounts do not propose changes"
    assert "trial" in written_at(path, condition["line"], condition["column"])
    text = "\n".join(text_lines(report, str(path)))
    where = f"{path}:{condition['line']}:{condition['column']}"
    assert f"condition 0 of the rule for propose-change in profile authoring ({where}, " in text
    assert "when: context.consumer == 'trial'" in text
    assert "denied: trial accounts do not propose changes" in text


def test_a_condition_that_requires_approval_is_named(path: Path) -> None:
    report = check(path, "inspect-context", READ, coordinates={"deployment": "canary"})
    assert report["decision"]["reason"] == "APPROVAL_REQUIRED"
    assert report["condition"]["effect"] == "approval required"
    assert report["condition"]["when"] == "context.deployment == 'canary'"
    assert check(path, "inspect-context", READ, coordinates={"deployment": "stable"})["allowed"]
    assert (
        check(path, "inspect-context", READ, coordinates={"deployment": "stable"})["condition"]
        is None
    )


def test_a_condition_that_fails_to_evaluate_says_why(tmp_path: Path) -> None:
    doc = coordinates_doc()
    rule = doc["profiles"][1]["toolRules"][0]
    rule["conditions"] = [{"when": "args.depth > 2", "then": "DENY", "reason": "deep reads"}]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc, indent=2))
    report = check(path, "inspect-context", READ)
    assert report["decision"]["reason"] == "CONDITION_ERROR"
    assert report["condition"]["effect"] == "failed to evaluate"
    assert report["condition"]["reason"].startswith("NO_SUCH_KEY: ")
    assert "`args.depth` is optional" in report["condition"]["reason"]
    assert "write `has(args.depth) && ...`" in report["condition"]["reason"]
    assert "failed to evaluate: NO_SUCH_KEY" in "\n".join(text_lines(report, str(path)))


def test_check_call_decides_as_a_project_test_at_the_same_coordinates(path: Path) -> None:
    """The first call of each corpus test, checked at the test's coordinates, gets the
    decision the test's run gives it."""
    source = load_source(path)
    project = source.project
    assert project is not None
    report = run_tests(project)
    compared = 0
    for test, result in zip(project.tests, report.results, strict=True):
        calls = test.expect.tools.calls if test.expect.tools else ()
        if not calls:
            continue
        first = calls[0]
        checked = check_call(
            source,
            objective=test.objective,
            tool=first.tool,
            arguments=first.arguments,
            approved=first.approved,
            fixtures="current",
            coordinates=test.coordinates.given() if test.coordinates else None,
        )
        actual = next(a.actual for a in result.assertions if a.pointer.endswith("/calls/0"))
        decision = checked["decision"]
        assert actual == decision["outcome"] + (
            f" {decision['reason']}" if decision["reason"] else ""
        )
        compared += 1
    assert compared >= 5


def test_an_unknown_objective_or_fixtures_mode_is_refused(path: Path) -> None:
    with pytest.raises(AuthoringError) as unknown:
        check_call(load_source(path), objective="author", tool="inspect-context", arguments=READ)
    assert unknown.value.diagnostics[0].code == "UNKNOWN_OBJECTIVE"
    assert "did you mean" not in unknown.value.diagnostics[0].message  # it lists them instead
    assert "authoring" in unknown.value.diagnostics[0].message
    with pytest.raises(AuthoringError) as mode:
        check(path, "inspect-context", READ, fixtures="later")
    assert mode.value.diagnostics[0].code == "INVALID_VALUE"

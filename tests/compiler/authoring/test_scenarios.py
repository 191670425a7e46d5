"""Scenarios: the coordinate values rules mention, and ``seif tool protect`` and ``show`` over
every combination of them (``compiler.authoring.scenarios``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.protect import protect_tool
from compiler.authoring.scenarios import (
    MAX_SCENARIOS,
    compared_values,
    scenario_suffixes,
    scenarios,
)
from compiler.authoring.show import show_tool
from compiler.authoring.source import AuthoringError, load_source, save
from compiler.driver import compile_document, compile_file
from policy.engine.disclosure import disclose
from policy.engine.testing import current_fixtures, run_tests
from tests.support.coordinates import coordinates_doc, write_project


def document() -> dict[str, Any]:
    """The corpus project without the tests that fail on purpose."""
    found = coordinates_doc()
    found["tests"] = [t for t in found["tests"] if not t["id"].startswith("claims-")]
    return found


def write(tmp_path: Path, doc: dict[str, Any], kind: str) -> Path:
    return write_project(tmp_path, doc, f".{kind}")


# --- the values rules mention -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        ("context.environment != 'production'", {"environment": {"production"}}),
        ("'trial' == context.consumer", {"consumer": {"trial"}}),
        ('context.deployment in ["a", r"b"]', {"deployment": {"a", "b"}}),
        (
            "context.`environment` == 'x' && context.consumer != \"\"",
            {"environment": {"x"}, "consumer": {""}},
        ),
        (
            "call.count >= 1 && context.consumer == 'trial' || args.x == 'y'",
            {"consumer": {"trial"}},
        ),
        ("context.objective == 'learner' && context.environment.startsWith('prod')", {}),
        ("context.environment == context.deployment", {}),
        (
            "(context.environment == 'a') == (context.environment == 'b')",
            {"environment": {"a", "b"}},
        ),
    ],
)
def test_the_values_compared_with_each_coordinate(expression: str, values: dict[str, Any]) -> None:
    assert compared_values(expression) == values


def test_every_combination_and_none_of_them_first() -> None:
    ir = compile_document(document()).project
    assert ir is not None
    assert scenarios(ir, "learner") == [{}, {"consumer": "trial"}]
    authoring = scenarios(ir, "authoring")
    assert authoring[0] == {} and len(authoring) == 2 * 2 * 2
    assert {"consumer": "trial", "environment": "production", "deployment": "canary"} in authoring
    assert len({json.dumps(a, sort_keys=True) for a in authoring}) == 8


def test_none_of_them_is_a_value_no_rule_names_when_the_empty_string_is_one() -> None:
    doc = document()
    doc["profiles"][0]["toolRules"][1]["when"] = (
        "context.consumer != '' && context.consumer != 'other'"
    )
    ir = compile_document(doc).project
    assert ir is not None
    assert scenarios(ir, "learner") == [{}, {"consumer": "other"}, {"consumer": "other-1"}]


def test_too_many_scenarios_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    doc = document()
    many = ", ".join(f"'c{i}'" for i in range(MAX_SCENARIOS))
    doc["profiles"][0]["toolRules"][1]["when"] = f"context.consumer in [{many}]"
    path = write(tmp_path, doc, "json")
    before = path.read_bytes()
    edit = protect_tool(load_source(path), tool_id="search-knowledge")
    assert [d.code for d in edit.diagnostics] == ["SCENARIOS_TOO_MANY"]
    assert "objective `learner` has 65 scenarios" in edit.diagnostics[0].message
    assert not save(edit) and path.read_bytes() == before
    shown = show_tool(load_source(path), tool_id="search-knowledge")["audience"]["objectives"]
    assert "65 scenarios" in shown[0]["tooManyScenarios"] and len(shown[0]["scenarios"]) == 1
    ir = compile_document(doc).project
    assert ir is not None
    with pytest.raises(AuthoringError):
        scenarios(ir, "learner")


def test_a_scenario_reads_as_its_values_or_with_names_when_two_read_alike() -> None:
    assert scenario_suffixes([{}, {"environment": "production"}, {"consumer": "trial"}]) == [
        "",
        "production",
        "trial",
    ]
    assert scenario_suffixes([{"consumer": "x"}, {"environment": "x"}]) == [
        "consumer-x",
        "environment-x",
    ]
    slugged = scenario_suffixes([{"environment": "Prod EU"}, {"environment": "prod-eu"}])
    assert slugged[1] == "prod-eu" and slugged[0].startswith("prod-eu-") and len(set(slugged)) == 2


# --- protect and show ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["json", "seif"])
def test_protect_guards_every_scenario_and_is_idempotent(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, document(), kind)
    edit = protect_tool(load_source(path), tool_id="propose-change")
    assert edit.ok, edit.diagnostics
    assert save(edit)
    added = edit.details["added"]
    assert added[:3] == [
        "propose-change-audience-learner",  # the names of the scenario without coordinates
        "propose-change-audience-learner-at-trial",
        "propose-change-audience-authoring",
    ]
    assert len(added) == 2 + 8 + 1 and added[-1] == "propose-change-compatible"
    project = compile_file(path).project
    assert project is not None
    report = run_tests(project)
    assert report.passed
    guards = {t.id: t for t in project.tests if t.id in added}
    production = guards["propose-change-audience-authoring-at-production"]
    assert production.coordinates is not None and production.coordinates.given() == {
        "environment": "production"
    }
    assert production.expect.tools is not None
    assert production.expect.tools.exclude == ("propose-change",)
    trial_canary = guards["propose-change-audience-authoring-at-trial-canary"].expect.tools
    assert trial_canary is not None and trial_canary.include == ("propose-change",)
    for test in guards.values():  # each guard asserts what the engine does at its coordinates
        at = test.coordinates.given() if test.coordinates else {}
        shown = (
            "propose-change"
            in disclose(project, test.objective, current_fixtures(project), at).tool_ids
        )
        assert test.expect.tools is not None
        assert ("propose-change" in test.expect.tools.include) == shown
    text = path.read_bytes()
    again = protect_tool(load_source(path), tool_id="propose-change")
    assert again.ok and not again.changed and path.read_bytes() == text


def test_scenarios_that_are_gone_lose_their_guards(tmp_path: Path) -> None:
    doc = document()
    path = write(tmp_path, doc, "json")
    assert save(protect_tool(load_source(path), tool_id="propose-change"))
    current = json.loads(path.read_text())
    rule = current["profiles"][1]["toolRules"][2]
    del rule["when"]  # production authors now see it: no environment is compared any more
    path.write_text(json.dumps(current, indent=2))
    edit = protect_tool(load_source(path), tool_id="propose-change")
    assert edit.ok, edit.diagnostics
    assert "propose-change-audience-authoring-at-production" in edit.details["removed"]
    assert "propose-change-audience-authoring-at-trial-production-canary" in edit.details["removed"]
    assert edit.details["updated"] == []
    assert len(edit.details["guards"]) == 2 + 4 + 1


def test_the_compatibility_guard_runs_where_the_call_is_allowed(tmp_path: Path) -> None:
    doc = copy.deepcopy(document())
    rule = doc["profiles"][1]["toolRules"][0]  # authoring's inspect-context
    rule["conditions"] = [
        {"when": "context.environment != 'staging'", "then": "DENY", "reason": "r"}
    ]
    path = write(tmp_path, doc, "json")
    edit = protect_tool(load_source(path), tool_id="inspect-context")
    assert edit.ok, edit.diagnostics
    assert save(edit)
    compat = next(
        t for t in json.loads(path.read_text())["tests"] if t["id"] == "inspect-context-compatible"
    )
    assert (
        compat["objective"] == "learner" and "coordinates" not in compat
    )  # learners read anywhere
    doc["profiles"][0]["toolRules"][0]["conditions"] = rule["conditions"]
    path = write(tmp_path, doc, "json")
    edit = protect_tool(load_source(path), tool_id="inspect-context")
    assert edit.ok, edit.diagnostics
    compat = next(
        g for g in json.loads(edit.text)["tests"] if g["id"] == "inspect-context-compatible"
    )
    assert compat["coordinates"] == {"environment": "staging"}
    assert compat["expect"]["tools"]["calls"][0]["expect"] == "ALLOW"


@pytest.mark.parametrize("kind", ["json", "seif"])
def test_show_reports_disclosure_per_scenario_and_the_unguarded_ones(
    tmp_path: Path, kind: str
) -> None:
    path = write(tmp_path, document(), kind)
    report = show_tool(load_source(path), tool_id="propose-change")
    authoring = report["audience"]["objectives"][1]
    assert authoring["objective"] == "authoring" and authoring["disclosed"] is True
    by = {json.dumps(x["coordinates"], sort_keys=True): x for x in authoring["scenarios"]}
    assert by["{}"] == {"coordinates": {}, "disclosed": True, "reason": None}
    assert by['{"environment": "production"}']["reason"] == "CONDITION_NOT_MET"
    assert by['{"consumer": "trial"}']["disclosed"] is True
    unguarded = report["protection"]["unguardedScenarios"]
    assert {"objective": "authoring", "coordinates": {"environment": "production"}} not in unguarded
    assert {"objective": "authoring", "coordinates": {"consumer": "trial"}} in unguarded
    assert save(protect_tool(load_source(path), tool_id="propose-change"))
    after = show_tool(load_source(path), tool_id="propose-change")
    assert after["protection"]["unguardedScenarios"] == []

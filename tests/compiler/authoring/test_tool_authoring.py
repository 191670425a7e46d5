"""Guided tool setup, the operations (compiler/authoring): templates, inclusion, protection,
check-call, on `.json` and `.seif` projects alike, against the engine and the reference model."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.authoring.checkcall import check_call
from compiler.authoring.protect import protect_tool
from compiler.authoring.show import show_tool
from compiler.authoring.source import load_source, save, source_from_text
from compiler.authoring.templates import TEMPLATES
from compiler.authoring.tools import include_tool, new_tool
from compiler.builds.build import make_build
from compiler.builds.promotion import broken_obligations
from compiler.driver import compile_file
from policy.engine.disclosure import disclose
from policy.engine.testing import current_fixtures, run_tests
from tests.support import reference_model as model
from tests.support.paths import ROOT

REFERENCE = ROOT / "reference" / "agent-tools"
KINDS = ("json", "seif")


def copy_reference(tmp_path: Path, kind: str) -> Path:
    target = tmp_path / f"context-project.{kind}"
    shutil.copy(REFERENCE / f"context-project.{kind}", target)
    return target


def apply(path: Path, operation: Any, **options: Any) -> Any:
    edit = operation(load_source(path), **options)
    assert edit.ok, edit.diagnostics
    save(edit)
    return edit


def only_added(before: str, after: str) -> list[str]:
    """The lines ``after`` adds; fails when it removes or changes any line of ``before`` (but
    the comma JSON needs after what was a list's last element)."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    added = [line[2:] for line in diff if line.startswith("+ ")]
    removed = [line[2:] for line in diff if line.startswith("- ")]
    assert not [line for line in removed if line + "," not in added], removed
    return added


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_each_template_validates_builds_and_is_included_nowhere(
    tmp_path: Path, kind: str, template: str
) -> None:
    path = copy_reference(tmp_path, kind)
    before = path.read_text()
    options: dict[str, Any] = {"template": template, "tool_id": "new-tool"}
    if template == "custom":
        options["fields"] = ["title:string:required", "count:integer", "tags:string[]"]
    edit = apply(path, new_tool, **options)
    added = only_added(before, path.read_text())
    assert any("new-tool" in line for line in added)
    result = compile_file(path)
    assert result.project is not None, result.diagnostics
    tool = result.project.tool_by_id["new-tool"]
    assert tool.name == "new_tool"
    assert tool.effect == ("write" if template == "ticket-creation" else "read")
    if tool.effect == "write":
        assert tool.approval == "required"
    assert run_tests(result.project).passed
    make_build(result.project)
    fixtures = current_fixtures(result.project)
    for objective in result.project.objectives:
        assert "new-tool" not in disclose(result.project, objective.id, fixtures).tool_ids
    assert edit.details["notIncludedBy"] == ["learner", "authoring"]
    assert any("seif tool include" in note for note in edit.notes)


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_template_gives_the_same_contract_in_both_front_ends(
    tmp_path: Path, template: str
) -> None:
    digests = set()
    for kind in KINDS:
        path = copy_reference(tmp_path, kind)
        apply(path, new_tool, template=template, tool_id="same-tool", fields=["q:string:required"])
        project = compile_file(path).project
        assert project is not None
        digests.add(project.tool_by_id["same-tool"].contract_digest)
    assert len(digests) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_the_seif_file_keeps_its_comments_and_layout(tmp_path: Path, kind: str) -> None:
    path = copy_reference(tmp_path, kind)
    if kind == "seif":
        text = path.read_text().replace(
            "profile authoring {", "# authors only\nprofile authoring {  # reviewed\n"
        )
        hits = "  include propose-change optional  # hits\n}"
        path.write_text(text.replace("  include propose-change optional\n}", hits))
    before = path.read_text()
    apply(path, new_tool, template="record-lookup", tool_id="order-lookup")
    apply(path, include_tool, tool_id="order-lookup", profile_id="authoring")
    apply(path, protect_tool, tool_id="order-lookup")
    only_added(before, path.read_text())
    if kind == "seif":
        for comment in ("# authors only", "# reviewed", "# hits"):
            assert comment in path.read_text()


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_writes_nothing_and_says_what_to_write(tmp_path: Path, kind: str) -> None:
    path = copy_reference(tmp_path, kind)
    before = path.read_bytes()
    cases = [
        ({"template": "record-lookup", "tool_id": "inspect-context"}, "TOOL_EXISTS", "another id"),
        ({"template": "record-lookup", "tool_id": "Bad_Id"}, "INVALID_ID", "order-lookup"),
        (
            {"template": "custom", "tool_id": "x", "fields": ["a:text"]},
            "FIELD_TYPE_UNKNOWN",
            "string, integer, number, boolean",
        ),
        (
            {"template": "custom", "tool_id": "x", "fields": ["a"]},
            "FIELD_INVALID",
            "name:type[:required]",
        ),
        ({"template": "nope", "tool_id": "x"}, "TEMPLATE_UNKNOWN", "record-lookup"),
        ({"template": "custom", "tool_id": "x", "name": "inspect_context"}, "DUPLICATE_NAME", ""),
    ]
    for options, code, hint in cases:
        edit = new_tool(load_source(path), **options)
        assert not edit.ok and not edit.changed
        assert edit.diagnostics[0].code == code, (options, edit.diagnostics)
        assert hint in edit.diagnostics[0].message
        assert save(edit) is False
        assert path.read_bytes() == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_schema_outside_the_subset_is_refused_at_its_pointer(tmp_path: Path, kind: str) -> None:
    path = copy_reference(tmp_path, kind)
    before = path.read_bytes()
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
    edit = new_tool(load_source(path), template="custom", tool_id="coded", schema=schema)
    assert not edit.ok
    found = [(d.code, d.pointer) for d in edit.diagnostics]
    assert ("SCHEMA_UNSUPPORTED_PATTERN", "/tools/3/parameters/properties/code/pattern") in found
    assert path.read_bytes() == before


@pytest.mark.parametrize("kind", KINDS)
def test_protect_is_idempotent_and_its_guards_pass(tmp_path: Path, kind: str) -> None:
    path = copy_reference(tmp_path, kind)
    apply(path, new_tool, template="ticket-creation", tool_id="open-ticket")
    first = apply(path, protect_tool, tool_id="open-ticket")
    assert first.details["added"] == [
        "open-ticket-audience-learner",
        "open-ticket-audience-authoring",
    ]
    text = path.read_bytes()
    again = protect_tool(load_source(path), tool_id="open-ticket")
    assert again.ok and not again.changed and path.read_bytes() == text
    apply(path, include_tool, tool_id="open-ticket", profile_id="authoring")
    third = apply(path, protect_tool, tool_id="open-ticket")
    assert third.details["added"] == ["open-ticket-compatible"]
    assert third.details["updated"] == ["open-ticket-audience-authoring"]
    project = compile_file(path).project
    assert project is not None
    report = run_tests(project)
    assert report.passed
    guards = {r.id for r in report.results if r.guard}
    assert {"open-ticket-audience-learner", "open-ticket-compatible"} <= guards
    assert not protect_tool(load_source(path), tool_id="open-ticket").changed


def test_removing_a_guard_blocks_promotion(tmp_path: Path) -> None:
    path = copy_reference(tmp_path, "json")
    apply(path, new_tool, template="record-lookup", tool_id="order-lookup")
    apply(path, include_tool, tool_id="order-lookup", profile_id="learner")
    apply(path, protect_tool, tool_id="order-lookup")
    baseline = compile_file(path).project
    assert baseline is not None
    assert broken_obligations(baseline, baseline) == []
    doc = json.loads(path.read_text())
    doc["tests"] = [t for t in doc["tests"] if t["id"] != "order-lookup-audience-learner"]
    candidate = source_from_text(path, json.dumps(doc)).project
    blocked = broken_obligations(baseline, candidate)
    assert any("order-lookup-audience-learner" in d.message for d in blocked)
    doc = json.loads(path.read_text())
    for test in doc["tests"]:
        if test["id"] == "order-lookup-audience-authoring":
            test["expect"]["tools"] = {"include": ["order-lookup"]}  # claims the authors see it
    changed = source_from_text(path, json.dumps(doc)).project
    assert changed is not None
    assert any(
        "order-lookup-audience-authoring" in d.message
        for d in broken_obligations(baseline, changed)
    )


@pytest.mark.parametrize("kind", KINDS)
def test_show_keeps_audience_protection_and_connection_apart(tmp_path: Path, kind: str) -> None:
    path = copy_reference(tmp_path, kind)
    report = show_tool(load_source(path), tool_id="propose-change")
    assert set(report) == {"tool", "audience", "protection", "connection"}
    assert report["audience"]["includedBy"] == ["authoring"]
    assert report["audience"]["excludedBy"] == ["learner"]
    seen = {o["objective"]: o["disclosed"] for o in report["audience"]["objectives"]}
    assert seen == {"learner": False, "authoring": True}
    assert "learner-never-sees-proposals" in report["protection"]["guards"]
    assert report["connection"]["state"] == "unknown"
    bound = {
        "environment": "staging",
        "revision": 4,
        "tools": {
            "propose-change": {
                "endpoint": "https://proposals.internal/seif",
                "secretRef": "env:X",
                "timeoutMs": 5000,
            }
        },
    }
    connection = show_tool(load_source(path), tool_id="propose-change", bindings=bound)[
        "connection"
    ]
    assert connection["state"] == "configured" and connection["revision"] == 4
    assert "not ready" in connection["note"]


# --- check-call against the reference model ------------------------------------------------------


def authored_project(tmp_path: Path) -> Path:
    """The reference's profiles and objectives, no conditions, plus one tool per template."""
    doc = json.loads((REFERENCE / "context-project.json").read_text())
    doc["tools"], doc["tests"], doc["toolFixtures"] = [], [], {}
    for profile in doc["profiles"]:
        profile["toolRules"] = []
    path = tmp_path / "authored.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    for template in ("record-lookup", "knowledge-search", "ticket-creation"):
        apply(path, new_tool, template=template, tool_id=template)
    apply(path, include_tool, tool_id="record-lookup", profile_id="learner")
    apply(path, include_tool, tool_id="knowledge-search", profile_id="learner")
    apply(path, include_tool, tool_id="ticket-creation", profile_id="authoring")
    apply(path, include_tool, tool_id="record-lookup", profile_id="authoring", required=True)
    return path


def model_decision(
    doc: dict[str, Any], objective: str, tool: str, arguments: Any, approved: bool
) -> tuple[str, str | None]:
    observations = {
        t["id"]: {"state": "READY", "version": t["version"], "contractDigest": model.digest(t)}
        for t in doc["tools"]
    }
    d = model.disclose(doc, objective, observations)
    if d["status"] != "RESOLVED":
        return "DENY", "CONTEXT_UNKNOWN"
    state = model.open_context(doc, d, objective, 0)
    approval = None
    if approved:
        approval = "approval-1"
        model.record_approval(state, approval, tool, "check-call-1", arguments, 0)
    outcome, reason, _ = model.decide(doc, state, tool, "check-call-1", arguments, approval, 0)
    return outcome, reason


ARGUMENT_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 30)
    | st.text(max_size=6)
    | st.sampled_from(["low", "urgent", "x" * 130]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = st.sampled_from(["id", "query", "limit", "title", "description", "priority", "extra"])
ARGUMENTS = (
    st.dictionaries(KEYS, ARGUMENT_VALUES, max_size=4)
    | st.fixed_dictionaries(
        {
            "title": st.text(min_size=1, max_size=5),
            "description": st.just("d"),
            "priority": st.sampled_from(["low", "high", "none"]),
        }
    )
    | st.fixed_dictionaries({"id": st.text(max_size=3)})
    | st.fixed_dictionaries({"query": st.text(max_size=3), "limit": st.integers(-1, 25)})
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    objective=st.sampled_from(["learner", "authoring"]),
    tool=st.sampled_from(
        ["record-lookup", "knowledge-search", "ticket-creation", "ticket_creation"]
    ),
    arguments=ARGUMENTS,
    approved=st.booleans(),
)
def test_check_call_agrees_with_the_reference_model(
    tmp_path: Path, objective: str, tool: str, arguments: Any, approved: bool
) -> None:
    path = tmp_path / "authored.json"
    if not path.exists():
        authored_project(tmp_path)
    source = load_source(path)
    report = check_call(
        source, objective=objective, tool=tool, arguments=arguments, approved=approved
    )
    expected = model_decision(json.loads(path.read_text()), objective, tool, arguments, approved)
    actual = (report["decision"]["outcome"], report["decision"]["reason"])
    assert actual == expected
    assert report["allowed"] == (expected[0] == "ALLOW")
    assert report["arguments"]["valid"] == model.valid(
        next(t for t in json.loads(path.read_text())["tools"] if report["tool"] == t["id"]),
        arguments,
    )
    assert report["dispatched"] is False


def test_check_call_lists_every_failing_argument(tmp_path: Path) -> None:
    path = authored_project(tmp_path)
    report = check_call(
        load_source(path),
        objective="authoring",
        tool="ticket-creation",
        arguments={"title": "", "priority": "soon", "extra": 1},
    )
    pointers = {e["pointer"] for e in report["arguments"]["errors"]}
    assert {"/title", "/priority", "/extra", ""} <= pointers
    assert report["decision"]["reason"] == "ARGUMENTS_INVALID"
    fine = {"title": "Printer", "description": "Jammed", "priority": "low"}
    pending = check_call(
        load_source(path), objective="authoring", tool="ticket-creation", arguments=fine
    )
    assert pending["decision"]["reason"] == "APPROVAL_REQUIRED"
    assert pending["approval"] == {"required": True, "simulated": False, "withApproval": "ALLOW"}
    project_fixtures = check_call(
        load_source(path),
        objective="authoring",
        tool="ticket-creation",
        arguments=fine,
        approved=True,
        fixtures="project",
    )
    assert not project_fixtures["allowed"]  # no toolFixtures: every tool unavailable
    assert project_fixtures["availability"]["state"] == "UNAVAILABLE"


@pytest.mark.parametrize("kind", KINDS)
def test_crlf_files_stay_crlf_and_links_stay_links(tmp_path: Path, kind: str) -> None:
    real = copy_reference(tmp_path, kind)
    real.write_bytes(real.read_bytes().replace(b"\n", b"\r\n"))
    link = tmp_path / f"link.{kind}"
    link.symlink_to(real.name)
    before = real.read_bytes()
    apply(link, new_tool, template="record-lookup", tool_id="order-lookup")
    after = real.read_bytes()
    assert link.is_symlink()
    assert b"\n" not in after.replace(b"\r\n", b"")
    assert after.count(b"\r\n") > before.count(b"\r\n")
    only_added(before.decode(), after.decode())


def test_a_reprinted_seif_element_keeps_its_comments(tmp_path: Path) -> None:
    path = copy_reference(tmp_path, "seif")
    apply(path, new_tool, template="record-lookup", tool_id="order-lookup")
    apply(path, protect_tool, tool_id="order-lookup")
    text = path.read_text().replace(
        "test order-lookup-audience-authoring for authoring guard fixtures current {",
        "# ticket SEC-12\ntest order-lookup-audience-authoring for authoring guard fixtures "
        "current {  # reviewed by QA\n  # why: authors only",
    )
    path.write_text(text)
    apply(path, include_tool, tool_id="order-lookup", profile_id="authoring")
    edit = apply(path, protect_tool, tool_id="order-lookup")
    assert edit.details["updated"] == ["order-lookup-audience-authoring"]
    for comment in ("# ticket SEC-12", "# reviewed by QA", "# why: authors only"):
        assert comment in path.read_text()


def test_include_makes_a_required_inclusion_optional_and_back(tmp_path: Path) -> None:
    path = copy_reference(tmp_path, "seif")
    edit = apply(path, include_tool, tool_id="inspect-context", profile_id="learner")
    assert edit.changed and "no longer required" in edit.notes[0]
    assert "  include inspect-context\n" in path.read_text()
    edit = apply(path, include_tool, tool_id="inspect-context", profile_id="learner", required=True)
    assert "now required" in edit.notes[0]
    assert "  include inspect-context required\n" in path.read_text()
    again = include_tool(
        load_source(path), tool_id="inspect-context", profile_id="learner", required=True
    )
    assert not again.changed and "nothing changed" in again.notes[0]

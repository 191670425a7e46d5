"""`seif eval` (cli.md): what a context of an objective discloses and how one call is decided,
by the engine alone, in text and as exactly the spec's JSON document; and the same answers as the
runtime gives a context resolved at the same coordinates, on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.authoring.evaluate import Call, document, evaluate
from compiler.authoring.source import AuthoringError, load_source
from compiler.builds.build import write_build
from compiler.driver import compile_document
from seif.cli import COMMANDS
from seif.cli import evaluate as eval_command
from tests.support.coordinates import (
    PROPOSAL,
    READ,
    coordinates_doc,
    seif,
    write_project,
)
from tests.support.paths import ROOT
from tests.support.runtime_harness import run_async, running_stack

TOP = {
    "objective",
    "coordinates",
    "resolution",
    "messages",
    "tools",
    "omitted",
    "tokens",
    "decision",
}


@pytest.fixture(params=[".json", ".seif"])
def path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_project(tmp_path, coordinates_doc(), request.param)


def ev(path: Path, objective: str = "authoring", **options: Any) -> dict[str, Any]:
    return document(evaluate(load_source(path), objective=objective, **options))


# --- the report -------------------------------------------------------------------------------


def test_the_json_document_has_exactly_the_spec_s_shape(path: Path) -> None:
    report = ev(
        path, coordinates={"environment": "production"}, call=Call("propose-change", PROPOSAL, True)
    )
    assert set(report) == TOP
    assert report["coordinates"] == {"consumer": "", "environment": "production", "deployment": ""}
    assert report["resolution"] == "RESOLVED"
    assert [m["id"] for m in report["messages"]][:2] == [
        "authoring-role",
        "authoring-review-policy",
    ]
    assert all(set(m) == {"id", "role", "text"} for m in report["messages"])
    assert [t["name"] for t in report["tools"]] == ["inspect_context", "search_knowledge"]
    assert all(set(t) == {"name", "description", "parameters"} for t in report["tools"])
    assert report["omitted"] == [{"tool": "propose-change", "reason": "CONDITION_NOT_MET"}]
    assert set(report["tokens"]) == {"messages", "tools", "total", "ceiling", "estimated"}
    decision = report["decision"]
    assert set(decision) == {"outcome", "reason", "explanation"}
    assert (decision["outcome"], decision["reason"]) == ("DENY", "TOOL_NOT_DISCLOSED")
    assert decision["explanation"]["pointer"] == "/profiles/1/toolRules/2"
    nothing_asked = ev(path)
    assert nothing_asked["decision"] is None and nothing_asked["omitted"] == []


def test_calls_are_decided_at_the_coordinates_with_the_explanation(path: Path) -> None:
    trial = ev(path, coordinates={"consumer": "trial"}, call=Call("propose_change", PROPOSAL, True))
    assert trial["decision"]["reason"] == "CONDITION_DENIED"
    assert trial["decision"]["explanation"] == {
        "pointer": "/profiles/1/toolRules/2/conditions/0",
        "profile": "authoring",
        "rule": 2,
        "condition": 0,
        "tool": "propose-change",
        "detail": "trial accounts do not propose changes",
    }
    canary = ev(path, coordinates={"deployment": "canary"}, call=Call("inspect-context", READ))
    assert canary["decision"]["reason"] == "APPROVAL_REQUIRED"
    assert canary["decision"]["explanation"]["condition"] == 0
    approved = ev(
        path, coordinates={"deployment": "canary"}, call=Call("inspect-context", READ, True)
    )
    assert approved["decision"] == {
        "outcome": "ALLOW",
        "reason": None,
        "explanation": {
            "pointer": "/profiles/1/toolRules/0",
            "profile": "authoring",
            "rule": 0,
            "tool": "inspect-context",
        },
    }
    invalid = ev(path, call=Call("propose-change", {"kind": 3}))
    detail = invalid["decision"]["explanation"]["detail"]
    assert detail.startswith("invalid arguments: ") and "/kind: " in detail and "`target`" in detail
    assert "3" not in detail.removeprefix("invalid arguments: ").split("/kind: ")[1][:9]  # no value


def test_a_blocked_resolution_lists_what_blocks_it(path: Path) -> None:
    doc = coordinates_doc()
    doc["toolFixtures"] = {"search-knowledge": doc["toolFixtures"]["search-knowledge"]}
    blocked = path.with_name("blocked.json")
    blocked.write_text(json.dumps(doc))
    report = ev(blocked, fixtures="project", call=Call("inspect-context", READ))
    assert report["resolution"] == "BLOCKED" and report["messages"] == [] and report["tools"] == []
    assert report["omitted"][0] == {"tool": "inspect-context", "reason": "TOOL_UNAVAILABLE"}
    assert report["decision"]["reason"] == "CONTEXT_UNKNOWN"  # a blocked resolution opens none
    assert ev(blocked)["resolution"] == "RESOLVED"  # current fixtures: every tool is READY


def test_eval_agrees_with_the_project_tests(path: Path) -> None:
    """Each corpus test's first call, evaluated at the test's coordinates, is decided as the
    test's run decides it, and the disclosure is the test's."""
    project = compile_document(coordinates_doc()).project
    assert project is not None
    from policy.engine.testing import run_tests

    results = {r.id: r for r in run_tests(project).results}
    for test in project.tests:
        calls = test.expect.tools.calls if test.expect.tools else ()
        at = test.coordinates.given() if test.coordinates else {}
        first = Call(calls[0].tool, calls[0].arguments, calls[0].approved) if calls else None
        report = ev(path, test.objective, coordinates=at, call=first)
        for assertion in results[test.id].assertions:
            if assertion.subject.startswith("include tool "):
                tool = project.tool_by_id[assertion.subject.removeprefix("include tool ")]
                shown = tool.name in [t["name"] for t in report["tools"]]
                assert shown == (assertion.actual == "disclosed"), (test.id, assertion)
            if assertion.pointer.endswith("/calls/0"):
                d = report["decision"]
                assert assertion.actual == d["outcome"] + (f" {d['reason']}" if d["reason"] else "")


def test_an_unknown_objective_is_refused(path: Path) -> None:
    with pytest.raises(AuthoringError) as refused:
        evaluate(load_source(path), objective="author")
    assert refused.value.diagnostics[0].code == "UNKNOWN_OBJECTIVE"


# --- the command ------------------------------------------------------------------------------


def test_the_command_is_listed_with_its_example() -> None:
    assert eval_command in COMMANDS
    assert eval_command.EXAMPLE.startswith("seif eval --project ")
    helped = seif("eval", "--help")
    assert helped.returncode == 0 and "example:\n  seif eval --project" in helped.stdout
    assert "--claims JSON" in helped.stdout and "--subject S" in helped.stdout
    assert "--after" not in helped.stdout  # flows: another issue


def test_text_output_and_exit_codes(path: Path) -> None:
    base = ["eval", "--project", str(path), "--objective", "authoring"]
    call = ["--call", "propose-change", "--arguments", json.dumps(PROPOSAL), "--approved"]
    hidden = seif(*base, "--environment", "production", *call)
    assert hidden.returncode == 1, hidden.stderr
    lines = hidden.stdout.splitlines()
    assert lines[0] == "objective authoring at environment production: RESOLVED (profile authoring)"
    assert (
        "tools (2): inspect_context (inspect-context), search_knowledge (search-knowledge)" in lines
    )
    assert "  tool propose-change: CONDITION_NOT_MET" in lines
    assert any("rule when: context.environment != 'production' is false here" in x for x in lines)
    assert "call propose-change: DENIED TOOL_NOT_DISCLOSED" in lines
    assert lines[-1] == "(simulated by the engine alone; nothing was dispatched)"
    trial = seif(*base, "--consumer", "trial", *call)
    assert trial.returncode == 1
    assert "    when: context.consumer == 'trial'" in trial.stdout.splitlines()
    assert seif(*base, "--environment", "staging", *call).returncode == 0
    assert seif(*base, "--environment", "production").returncode == 0  # nothing asked
    as_json = seif(*base, "--deployment", "canary", "--json")
    assert as_json.returncode == 0 and set(json.loads(as_json.stdout)) == TOP
    assert seif(*base, "--arguments", "{}").returncode == 2
    assert seif(*base, "--call", "propose-change").returncode == 2
    not_json = seif(*base, "--call", "propose-change", "--arguments", "{x", "--json")
    assert not_json.returncode == 2
    assert json.loads(not_json.stdout)["diagnostics"][0]["code"] == "ARGUMENTS_NOT_JSON"
    unknown = seif("eval", "--project", str(path), "--objective", "author")
    assert unknown.returncode == 2 and "UNKNOWN_OBJECTIVE" in unknown.stderr
    not_claims = seif(*base, "--claims", '{"groups": [1]}', "--json")
    assert not_claims.returncode == 2
    assert json.loads(not_claims.stdout)["diagnostics"][0]["code"] == "CLAIMS_INVALID"
    assert seif(*base, "--claims", "{x").returncode == 2


PRINCIPAL_CASE = ROOT / "corpus" / "project-tests" / "principal-claims.json"


def principal_project(tmp_path: Path) -> Path:
    document = json.loads(PRINCIPAL_CASE.read_text(encoding="utf-8"))["project"]
    return write_project(tmp_path, document, ".json")


def test_claims_and_subject_are_the_caller_s(tmp_path: Path) -> None:
    """``--claims`` and ``--subject`` are what rules and conditions read as
    ``principal.claims`` and ``principal.subject``; the text shows them, the JSON document
    carries them as ``principal`` (only when given)."""
    base = ["eval", "--project", str(principal_project(tmp_path)), "--objective", "desk"]
    call = ["--call", "open-ticket", "--arguments", '{"priority": "urgent"}']
    support = ["--claims", '{"groups": ["support"]}']
    nobody = seif(*base, *call)
    assert nobody.returncode == 1 and "call open-ticket: DENIED TOOL_NOT_DISCLOSED" in nobody.stdout
    member = seif(*base, *support, "--subject", "user-1", *call)
    assert member.returncode == 1, member.stderr
    lines = member.stdout.splitlines()
    assert lines[1] == '  principal: subject user-1, claims {"groups": ["support"]}'
    assert "call open-ticket: DENIED CONDITION_DENIED" in lines
    assert "    denied: only on-call staff open urgent tickets" in lines
    oncall = seif(*base, "--claims", '{"groups": ["support", "oncall"]}', *call, "--json")
    assert oncall.returncode == 1  # not `corp`'s: the CLI gives no issuer
    report = json.loads(oncall.stdout)
    assert report["principal"] == {
        "issuer": None,
        "subject": None,
        "clientId": None,
        "claims": {"groups": ["support", "oncall"]},
    }
    assert (
        report["decision"]["explanation"]["detail"] == "tickets are opened by the company's users"
    )
    assert "principal" not in json.loads(seif(*base, "--json").stdout)


def test_eval_agrees_with_the_principal_tests(tmp_path: Path) -> None:
    """Each test of the principal corpus, evaluated as its principal, discloses and decides its
    first call as the test's run does."""
    path = principal_project(tmp_path)
    project = compile_document(json.loads(PRINCIPAL_CASE.read_text())["project"]).project
    assert project is not None
    from policy.engine.testing import run_tests

    results = {r.id: r for r in run_tests(project).results}
    for test in project.tests:
        calls = test.expect.tools.calls if test.expect.tools else ()
        first = Call(calls[0].tool, calls[0].arguments, calls[0].approved) if calls else None
        who = test.principal.to_json() if test.principal else None
        report = ev(path, test.objective, principal=who, call=first)
        for assertion in results[test.id].assertions:
            if " tool " in assertion.subject:
                tool = project.tool_by_id[assertion.subject.split(" tool ")[1]]
                shown = tool.name in [t["name"] for t in report["tools"]]
                assert shown == (assertion.actual == "disclosed"), (test.id, assertion)
            if assertion.pointer.endswith("/calls/0"):
                d = report["decision"]
                assert assertion.actual == d["outcome"] + (f" {d['reason']}" if d["reason"] else "")


def test_an_invalid_project_exits_1_with_its_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({**coordinates_doc(), "objectives": [{"id": "x", "profile": "nope"}]})
    )
    out = seif("eval", "--project", str(bad), "--objective", "x")
    assert out.returncode == 1 and "UNKNOWN_PROFILE" in out.stderr
    assert (
        seif("eval", "--project", str(tmp_path / "missing.json"), "--objective", "x").returncode
        == 2
    )


# --- what the runtime answers at the same coordinates -------------------------------------------


def test_eval_answers_as_the_runtime_does_at_the_same_coordinates(tmp_path: Path) -> None:
    """The runtime serving the project's build, resolving at the coordinates and deciding the
    same call, gives what `seif eval` says: messages, tools, omissions and the decision."""
    project = compile_document(coordinates_doc()).project
    assert project is not None
    write_build(project, tmp_path / "build")
    source = tmp_path / "project.json"
    source.write_text(json.dumps(coordinates_doc()))
    cases = [
        ({"environment": "production"}, "propose-change", PROPOSAL),
        ({"consumer": "trial", "environment": "staging"}, "propose-change", PROPOSAL),
        ({"deployment": "canary"}, "inspect-context", READ),
        ({"deployment": "stable"}, "inspect-context", READ),
    ]

    async def scenario() -> None:
        async with running_stack(tmp_path) as stack:
            for k, (at, tool, arguments) in enumerate(cases):
                resolved = await stack.resolve("authoring", **at)
                said = ev(source, coordinates=at, call=Call(tool, arguments))
                assert [m["id"] for m in resolved["messages"]] == [
                    m["id"] for m in said["messages"]
                ]
                assert resolved["tools"] == said["tools"]
                assert [(o["id"], o["reason"]) for o in resolved["omitted"]] == [
                    (o["tool"], o["reason"]) for o in said["omitted"]
                ]
                reply = await stack.call(
                    "POST",
                    "/v1/context/tools/execute",
                    {
                        "contextRef": resolved["contextRef"],
                        "tool": tool,
                        "callId": f"c-{k}",
                        "arguments": arguments,
                    },
                )
                assert reply.status == 200, reply
                receipt = reply.body
                decision = said["decision"]
                if decision["outcome"] == "ALLOW":
                    assert receipt["status"] == "SUCCEEDED", receipt
                else:
                    assert receipt["reason"] == decision["reason"], (at, receipt, decision)

    run_async(scenario())

"""`seif tool new|include|protect|show|check-call` as a user runs them (docs/authoring.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compiler.authoring.protect import protect_tool
from compiler.authoring.source import load_source, save
from compiler.authoring.tools import include_tool, new_tool
from tests.support.coordinates import PROPOSAL, coordinates_doc, seif, write_project
from tests.support.paths import ROOT

REFERENCE = ROOT / "reference" / "agent-tools"
TICKET = {"title": "Printer jammed", "description": "Floor 2", "priority": "low"}


@pytest.fixture(params=["json", "seif"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    target = tmp_path / f"context-project.{request.param}"
    shutil.copy(REFERENCE / target.name, target)
    return target


def test_the_walkthrough_changes_the_file_as_the_operations_do(
    project: Path, tmp_path: Path
) -> None:
    twin = tmp_path / ("twin" + project.suffix)
    shutil.copy(project, twin)
    new = seif(
        "tool",
        "new",
        "--project",
        str(project),
        "--template",
        "ticket-creation",
        "--id",
        "open-ticket",
    )
    assert new.returncode == 0, new.stderr
    assert "included nowhere: profiles learner, authoring do not include it" in new.stdout
    assert f"seif tool include --project {project} --tool open-ticket" in new.stdout
    included = seif(
        "tool",
        "include",
        "--project",
        str(project),
        "--tool",
        "open-ticket",
        "--profile",
        "authoring",
    )
    assert included.returncode == 0, included.stderr
    protected = seif("tool", "protect", "--project", str(project), "--tool", "open-ticket")
    assert protected.returncode == 0 and "added 3 guard(s)" in protected.stdout
    again = seif("tool", "protect", "--project", str(project), "--tool", "open-ticket")
    assert "already protected" in again.stdout and "unchanged" in again.stdout
    save(new_tool(load_source(twin), template="ticket-creation", tool_id="open-ticket"))
    save(include_tool(load_source(twin), tool_id="open-ticket", profile_id="authoring"))
    save(protect_tool(load_source(twin), tool_id="open-ticket"))
    assert project.read_bytes() == twin.read_bytes()
    assert seif("test", str(project)).returncode == 0


def test_bad_input_writes_nothing(project: Path) -> None:
    before = project.read_bytes()
    taken = seif(
        "tool",
        "new",
        "--project",
        str(project),
        "--template",
        "record-lookup",
        "--id",
        "inspect-context",
    )
    assert taken.returncode == 1  # the project refuses it
    assert "TOOL_EXISTS" in taken.stderr and "nothing was written" in taken.stderr
    typed = seif(
        "tool",
        "new",
        "--project",
        str(project),
        "--template",
        "custom",
        "--id",
        "x",
        "--field",
        "title:text:required",
    )
    assert typed.returncode == 2  # a malformed option
    assert "/fields/0: FIELD_TYPE_UNKNOWN" in typed.stderr and "string, integer" in typed.stderr
    template = seif("tool", "new", "--project", str(project), "--template", "form", "--id", "x")
    assert template.returncode == 2 and "record-lookup" in template.stderr
    assert project.read_bytes() == before


def test_a_schema_file_outside_the_subset(project: Path, tmp_path: Path) -> None:
    schema = tmp_path / "arguments.json"
    schema.write_text(
        json.dumps(
            {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
        )
    )
    before = project.read_bytes()
    out = seif(
        "tool",
        "new",
        "--project",
        str(project),
        "--template",
        "custom",
        "--id",
        "coded",
        "--schema",
        str(schema),
        "--json",
    )
    assert out.returncode == 1
    document = json.loads(out.stdout)
    assert document["ok"] is False
    assert {
        "code": "SCHEMA_UNSUPPORTED_PATTERN",
        "pointer": "/tools/3/parameters/properties/code/pattern",
    }.items() <= document["diagnostics"][0].items()
    assert project.read_bytes() == before


def test_check_call_exit_codes_and_json(project: Path) -> None:
    seif(
        "tool",
        "new",
        "--project",
        str(project),
        "--template",
        "ticket-creation",
        "--id",
        "open-ticket",
    )
    seif(
        "tool",
        "include",
        "--project",
        str(project),
        "--tool",
        "open-ticket",
        "--profile",
        "authoring",
    )
    base = [
        "tool",
        "check-call",
        "--project",
        str(project),
        "--objective",
        "authoring",
        "--tool",
        "open-ticket",
        "--arguments",
    ]
    pending = seif(*base, json.dumps(TICKET))
    assert pending.returncode == 1
    assert pending.stdout.startswith("DENIED APPROVAL_REQUIRED")
    assert "try --approved" in pending.stdout and "nothing was dispatched" in pending.stdout
    allowed = seif(*base, json.dumps(TICKET), "--approved", "--json")
    assert allowed.returncode == 0
    assert json.loads(allowed.stdout)["allowed"] is True
    wrong = seif(*base, json.dumps({"title": "", "priority": "soon"}))
    assert wrong.returncode == 1
    assert "/title: minLength" in wrong.stdout and "/priority: enum" in wrong.stdout
    hidden = seif(
        "tool",
        "check-call",
        "--project",
        str(project),
        "--objective",
        "learner",
        "--tool",
        "open_ticket",
        "--arguments",
        json.dumps(TICKET),
        "--approved",
    )
    assert hidden.returncode == 1 and "TOOL_NOT_DISCLOSED" in hidden.stdout
    unavailable = seif(*base, json.dumps(TICKET), "--approved", "--fixtures", "project")
    assert unavailable.returncode == 1 and "UNAVAILABLE" in unavailable.stdout
    not_json = seif(*base, "{title")
    assert not_json.returncode == 2 and "ARGUMENTS_NOT_JSON" in not_json.stderr


def test_show_has_three_sections(project: Path, tmp_path: Path) -> None:
    bindings = tmp_path / "bindings.json"
    bindings.write_text(
        json.dumps(
            {
                "environment": "staging",
                "revision": 2,
                "tools": {
                    "propose-change": {
                        "endpoint": "https://proposals.internal/seif",
                        "secretRef": "env:CONTEXT_TOOL_PROPOSE_CHANGE_TOKEN",
                        "timeoutMs": 5000,
                        "maxBytes": 65536,
                    }
                },
            }
        )
    )
    text = seif(
        "tool",
        "show",
        "--project",
        str(project),
        "--tool",
        "propose-change",
        "--bindings",
        str(bindings),
    )
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert [line for line in lines if line in ("audience", "protection", "connection")] == [
        "audience",
        "protection",
        "connection",
    ]
    assert "  excluded by: learner" in lines
    assert any(line.startswith("  guard learner-never-sees-proposals") for line in lines)
    assert (
        "  configured: https://proposals.internal/seif (environment staging, revision 2, "
        "secret env:CONTEXT_TOOL_PROPOSE_CHANGE_TOKEN)" in lines
    )
    as_json = json.loads(
        seif("tool", "show", "--project", str(project), "--tool", "propose-change", "--json").stdout
    )
    assert set(as_json) == {"tool", "audience", "protection", "connection"}
    unknown = seif("tool", "show", "--project", str(project), "--tool", "nope")
    assert unknown.returncode == 1 and "UNKNOWN_TOOL" in unknown.stderr


def test_show_refuses_a_file_that_is_not_a_bindings_file(project: Path, tmp_path: Path) -> None:
    for text in ("[1]", '{"tools": [1]}'):
        bad = tmp_path / "b.json"
        bad.write_text(text)
        out = seif(
            "tool",
            "show",
            "--project",
            str(project),
            "--tool",
            "inspect-context",
            "--bindings",
            str(bad),
            "--json",
        )
        assert out.returncode == 2
        assert json.loads(out.stdout)["diagnostics"][0]["code"] == "BINDINGS_INVALID"


def coordinates_project(tmp_path: Path, suffix: str) -> Path:
    """The project-test corpus's reference project with rules on each coordinate."""
    return write_project(tmp_path, coordinates_doc(), suffix)


@pytest.mark.parametrize("suffix", [".json", ".seif"])
def test_check_call_at_coordinates_names_the_condition(tmp_path: Path, suffix: str) -> None:
    path = coordinates_project(tmp_path, suffix)
    base = ["tool", "check-call", "--project", str(path), "--objective", "authoring"]
    call = [*base, "--tool", "propose-change", "--arguments", json.dumps(PROPOSAL), "--approved"]
    assert seif(*call, "--environment", "staging").returncode == 0
    hidden = seif(*call, "--environment", "production", "--deployment", "eu-1")
    assert hidden.returncode == 1
    assert hidden.stdout.startswith(
        "DENIED TOOL_NOT_DISCLOSED: propose-change for objective authoring at environment "
        "production, deployment eu-1"
    )
    assert "rule when: context.environment != 'production' is false here" in hidden.stdout
    trial = seif(*call, "--consumer", "trial")
    assert trial.returncode == 1, trial.stderr
    lines = trial.stdout.splitlines()
    assert lines[0].startswith("DENIED CONDITION_DENIED")
    head = next(line for line in lines if line.startswith("  condition 0 of the rule"))
    assert (
        f"in profile authoring ({path}:" in head and "/profiles/1/toolRules/2/conditions/0" in head
    )
    assert "    when: context.consumer == 'trial'" in lines
    assert "    denied: trial accounts do not propose changes" in lines
    as_json = json.loads(seif(*call, "--consumer", "trial", "--json").stdout)
    assert as_json["coordinates"] == {"consumer": "trial"}
    assert as_json["condition"]["when"] == "context.consumer == 'trial'"
    claims = seif(*call, "--claims", '"support"')
    assert claims.returncode == 2 and "CLAIMS_INVALID" in claims.stderr


PRINCIPAL_CASE = ROOT / "corpus" / "project-tests" / "principal-claims.json"


@pytest.mark.parametrize("suffix", [".json", ".seif"])
def test_check_call_as_a_principal_names_the_condition(tmp_path: Path, suffix: str) -> None:
    """``--claims`` and ``--subject`` are the caller's: a rule's ``when`` and a condition on
    ``principal.claims`` decide as a project test with that principal does."""
    document = json.loads(PRINCIPAL_CASE.read_text(encoding="utf-8"))["project"]
    path = write_project(tmp_path, document, suffix)
    base = ["tool", "check-call", "--project", str(path), "--objective", "desk"]
    call = [*base, "--tool", "open-ticket", "--arguments", '{"priority": "urgent"}']
    hidden = seif(*call)
    assert hidden.returncode == 1
    assert hidden.stdout.startswith("DENIED TOOL_NOT_DISCLOSED: open-ticket for objective desk")
    assert "rule when: has(principal.claims.groups) && 'support' in" in hidden.stdout
    support = seif(*call, "--claims", '{"groups": ["support"]}', "--subject", "user-1")
    assert support.returncode == 1, support.stderr
    lines = support.stdout.splitlines()
    assert lines[0].startswith("DENIED CONDITION_DENIED: open-ticket for objective desk")
    assert lines[1] == '  principal: subject user-1, claims {"groups": ["support"]}'
    assert "    denied: only on-call staff open urgent tickets" in lines
    as_json = json.loads(seif(*call, "--claims", '{"groups": ["support"]}', "--json").stdout)
    assert as_json["principal"]["claims"] == {"groups": ["support"]}
    assert as_json["principal"]["subject"] is None
    assert as_json["decision"]["reason"] == "CONDITION_DENIED"
    assert "principal" not in json.loads(seif(*call, "--json").stdout)


@pytest.mark.parametrize("suffix", [".json", ".seif"])
def test_check_call_names_the_condition_and_whether_it_was_true_or_failed(
    tmp_path: Path, suffix: str
) -> None:
    """A condition on an optional argument without `has()`: `seif validate` warns, and
    check-call names the condition where it is written, what it read and why it decided."""
    doc = coordinates_doc()
    rule = doc["profiles"][1]["toolRules"][0]
    rule["conditions"] = [{"when": "args.depth > 2", "then": "DENY", "reason": "deep reads"}]
    path = write_project(tmp_path, doc, suffix)
    validated = seif("validate", str(path))
    assert validated.returncode == 0 and "CEL_OPTIONAL_WITHOUT_HAS" in validated.stderr
    base = ["tool", "check-call", "--project", str(path), "--objective", "authoring"]
    base += ["--tool", "inspect-context", "--arguments"]
    failed = seif(*base, json.dumps({"ref": "a"}))
    assert failed.returncode == 1
    lines = failed.stdout.splitlines()
    assert lines[0].startswith("DENIED CONDITION_ERROR: inspect-context for objective authoring")
    head = next(line for line in lines if line.startswith("  condition 0 of the rule"))
    assert f"({path}:" in head and head.endswith(", /profiles/1/toolRules/0/conditions/0)")
    where = head.split(f"({path}:", 1)[1].split(",", 1)[0]
    line, column = (int(n) for n in where.split(":"))
    assert path.read_text().splitlines()[line - 1][column - 1 :].startswith('"args.depth > 2"')
    assert "    when: args.depth > 2" in lines
    assert (
        "    failed to evaluate: NO_SUCH_KEY: `args.depth` is optional: a call without it is "
        "denied CONDITION_ERROR here; write `has(args.depth) && ...` (or `!has(args.depth) || "
        "...`)"
    ) in lines
    true = seif(*base, json.dumps({"ref": "a", "depth": 3}))
    assert true.returncode == 1 and true.stdout.startswith("DENIED CONDITION_DENIED")
    assert "    denied: deep reads" in true.stdout.splitlines()
    false = seif(*base, json.dumps({"ref": "a", "depth": 1}))
    assert false.returncode == 0 and false.stdout.startswith("ALLOWED")
    assert "condition 0" not in false.stdout  # a false condition decides nothing


def test_protect_and_show_cover_every_scenario(tmp_path: Path) -> None:
    path = coordinates_project(tmp_path, ".seif")
    shown = seif("tool", "show", "--project", str(path), "--tool", "propose-change")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "  objective authoring (profile authoring, rule include): sees it" in lines
    assert "    at environment production: does not see it (CONDITION_NOT_MET)" in lines
    assert "    at consumer trial, deployment canary: sees it" in lines
    gaps = next(line for line in lines if line.startswith("  scenarios without a guard: "))
    assert "authoring at consumer trial, environment production" in gaps
    protected = seif("tool", "protect", "--project", str(path), "--tool", "propose-change")
    assert protected.returncode == 0, protected.stderr
    assert "propose-change-audience-authoring-at-trial-production-canary" in protected.stdout
    again = seif("tool", "show", "--project", str(path), "--tool", "propose-change")
    assert "  scenarios without a guard: -" in again.stdout.splitlines()
    assert seif("test", "--project", str(path)).returncode == 1  # the corpus's failing tests

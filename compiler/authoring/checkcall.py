"""``seif tool check-call``: one call decided by the engine alone, simulated, never dispatched.

Availability comes from ``current`` fixtures (every tool READY with its declared contract, as a
test with ``fixtures: current``) unless ``fixtures="project"`` (the project's ``toolFixtures``).
The call is decided in a fresh simulated context of the objective, exactly as a project test
decides its first call; ``approved`` records a simulated approval of exactly this call first.
Every failing argument is listed by its JSON pointer, whatever the decision's first reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.authoring.source import ProjectSource, compiled, refusal
from policy import reasons as R
from policy.engine.decision import ALLOW, Decision
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.testing import current_fixtures, simulate_calls
from policy.ir import Project, Tool
from policy.schema.validator import compile_validator

FIXTURE_MODES = ("current", "project")


@dataclass(frozen=True, slots=True)
class _Call:
    tool: str
    arguments: Any
    approved: bool
    call_id: str | None = "check-call-1"


def check_call(
    source: ProjectSource,
    *,
    objective: str,
    tool: str,
    arguments: Any,
    approved: bool = False,
    fixtures: str = "current",
) -> dict[str, Any]:
    """``{"allowed", "decision", "availability", "arguments", "approval", "dispatched": false}``;
    ``AuthoringError`` for an invalid project, an unknown objective, tool or fixtures mode."""
    ir, found = _resolve(source, objective, tool, fixtures)
    observations = current_fixtures(ir) if fixtures == "current" else ir.tool_fixtures
    d = disclose(ir, objective, observations)
    decision = _decide(ir, d, tool, arguments, approved)
    with_approval = decision if approved else _decide(ir, d, tool, arguments, True)
    return {
        "allowed": decision.outcome == ALLOW,
        "objective": objective,
        "tool": found.id,
        "decision": decision.to_json(),
        "availability": _availability(d, found, fixtures, observations),
        "arguments": _arguments(found, arguments),
        "approval": {
            "required": decision.approval_required or decision.reason == R.APPROVAL_REQUIRED,
            "simulated": approved,
            "withApproval": with_approval.outcome,
        },
        "dispatched": False,
    }


def _resolve(
    source: ProjectSource, objective: str, tool: str, fixtures: str
) -> tuple[Project, Tool]:
    ir = compiled(source)
    if fixtures not in FIXTURE_MODES:
        raise refusal(
            "INVALID_VALUE", f"`{fixtures}` is not a fixtures mode: write `current` or `project`"
        )
    if objective not in ir.objective_by_id:
        known = ", ".join(o.id for o in ir.objectives)
        raise refusal(
            "UNKNOWN_OBJECTIVE",
            f"`{objective}` is not an objective of this project (objectives: {known})",
        )
    found = ir.tool_by_id.get(tool) or ir.tool_by_id.get(ir.tool_id_by_name.get(tool, ""))
    if found is None:
        known = ", ".join(t.id for t in ir.tools) or "none"
        raise refusal(
            "UNKNOWN_TOOL",
            f"`{tool}` is neither a tool id nor a function name of this project (tools: {known})",
        )
    return ir, found


def _decide(ir: Project, d: Disclosure, tool: str, arguments: Any, approved: bool) -> Decision:
    return simulate_calls(ir, d, "check-call", [_Call(tool, arguments, approved)])[0]


def _availability(
    d: Disclosure, tool: Tool, fixtures: str, observations: Mapping[str, Any]
) -> dict[str, Any]:
    fixture = observations.get(tool.id)
    omitted = next((o for o in d.omitted if o.id == tool.id), None)
    return {
        "fixtures": fixtures,
        "state": getattr(fixture, "state", "UNAVAILABLE") if fixture is not None else "UNAVAILABLE",
        "resolution": d.status,
        "causes": sorted({c.reason for c in d.causes} | ({d.reason} if d.reason else set())),
        "disclosed": tool.id in d.tool_ids,
        "reason": omitted.reason if omitted is not None else None,
    }


def _arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    errors = compile_validator(tool.parameters).errors(arguments)
    return {
        "valid": not errors,
        "errors": [
            {"pointer": e.pointer, "keyword": e.keyword, "message": e.message} for e in errors
        ],
    }


def text_lines(report: Mapping[str, Any]) -> list[str]:
    """The report as the CLI prints it; the first line is the verdict."""
    decision = report["decision"]
    verdict = "ALLOWED" if report["allowed"] else f"DENIED {decision['reason']}"
    out = [
        f"{verdict}: {report['tool']} for objective {report['objective']} (simulated; nothing "
        "was dispatched)"
    ]
    a = report["availability"]
    seen = "disclosed" if a["disclosed"] else f"not disclosed ({a['reason'] or a['resolution']})"
    out.append(f"  availability ({a['fixtures']} fixtures): {a['state']}, {seen}")
    args = report["arguments"]
    out.append("  arguments: valid" if args["valid"] else "  arguments: invalid")
    out += [f"    {e['pointer'] or '/'}: {e['keyword']}: {e['message']}" for e in args["errors"]]
    approval = report["approval"]
    if approval["simulated"]:
        out.append("  approval: simulated (an approval of exactly this call)")
    elif approval["required"]:
        out.append(
            f"  approval: required; with an approval of exactly this call: "
            f"{approval['withApproval']} (try --approved)"
        )
    else:
        out.append("  approval: not required")
    return out

"""``seif tool check-call``: one call decided by the engine alone, simulated, never dispatched.

Availability comes from ``current`` fixtures (every tool READY with its declared contract, as a
test with ``fixtures: current``) unless ``fixtures="project"`` (the project's ``toolFixtures``).
The call is decided in a fresh simulated context of the objective at the given coordinates
(``consumer``, ``environment``, ``deployment``: what rules and conditions read as
``context.*``), exactly as a project test at those coordinates decides its first call;
``approved`` records a simulated approval of exactly this call first. Every failing argument is
listed by its JSON pointer, whatever the decision's first reason, and a condition that denied
the call (or made an approval required) is named where the author wrote it, with its expression
and the reason the engine gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.authoring.simulate import (
    FIXTURE_MODES,
    at_text,
    condition_lines,
    condition_of,
    known_objective,
    observations,
    principal_line,
    rule_when_line,
    rule_when_of,
)
from compiler.authoring.source import ProjectSource, compiled, refusal
from policy import reasons as R
from policy.engine.decision import ALLOW, Decision
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.principal import principal_value
from policy.engine.testing import simulate_calls
from policy.ir import Fixture, Project, Tool
from policy.json.value import thaw
from policy.schema.validator import compile_validator

__all__ = ["FIXTURE_MODES", "check_call", "text_lines"]


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
    coordinates: Mapping[str, str] | None = None,
    principal: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"allowed", "objective", "coordinates", "tool", "decision", "condition",
    "availability", "arguments", "approval", "dispatched": false}`` (and ``principal``, when
    one is given: who resolves and calls, as the rules read it); ``AuthoringError`` for an
    invalid project, an unknown objective, tool or fixtures mode."""
    ir, found, seen = _resolve(source, objective, tool, fixtures)
    at = {k: v for k, v in (coordinates or {}).items() if v}
    who = principal_value(principal)
    d = disclose(ir, objective, seen, at, who)
    decision = _decide(ir, d, tool, arguments, approved, at, who)
    with_approval = decision if approved else _decide(ir, d, tool, arguments, True, at, who)
    given = {} if principal is None else {"principal": thaw(who)}
    return {
        "allowed": decision.outcome == ALLOW,
        "objective": objective,
        "coordinates": at,
        **given,
        "tool": found.id,
        "decision": decision.to_json(),
        "condition": condition_of(ir, source, decision),
        "availability": _availability(d, found, fixtures, seen)
        | {"rule": rule_when_of(ir, source, d.profile, found.id, _omitted_reason(d, found))},
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
) -> tuple[Project, Tool, Mapping[str, Fixture]]:
    ir = compiled(source)
    seen = observations(ir, fixtures)
    known_objective(ir, objective)
    found = ir.tool_by_id.get(tool) or ir.tool_by_id.get(ir.tool_id_by_name.get(tool, ""))
    if found is None:
        known = ", ".join(t.id for t in ir.tools) or "none"
        raise refusal(
            "UNKNOWN_TOOL",
            f"`{tool}` is neither a tool id nor a function name of this project (tools: {known})",
        )
    return ir, found, seen


def _decide(
    ir: Project,
    d: Disclosure,
    tool: str,
    arguments: Any,
    approved: bool,
    coordinates: Mapping[str, str],
    principal: Mapping[str, Any],
) -> Decision:
    calls = [_Call(tool, arguments, approved)]
    return simulate_calls(ir, d, "check-call", calls, coordinates, principal)[0]


def _omitted_reason(d: Disclosure, tool: Tool) -> str | None:
    return next((o.reason for o in (*d.omitted, *d.causes) if o.id == tool.id), None)


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


def text_lines(report: Mapping[str, Any], file: str = "") -> list[str]:
    """The report as the CLI prints it; the first line is the verdict. ``file`` names the
    project file where a condition that decided is written."""
    decision = report["decision"]
    verdict = "ALLOWED" if report["allowed"] else f"DENIED {decision['reason']}"
    out = [
        f"{verdict}: {report['tool']} for objective {report['objective']}"
        f"{at_text(report['coordinates'])} (simulated; nothing was dispatched)"
    ]
    out += principal_line(report.get("principal"))
    a = report["availability"]
    seen = "disclosed" if a["disclosed"] else f"not disclosed ({a['reason'] or a['resolution']})"
    out.append(f"  availability ({a['fixtures']} fixtures): {a['state']}, {seen}")
    if a["rule"] is not None:
        out.append(rule_when_line(a["rule"], a["reason"] or R.CONDITION_ERROR, file))
    args = report["arguments"]
    out.append("  arguments: valid" if args["valid"] else "  arguments: invalid")
    out += [f"    {e['pointer'] or '/'}: {e['keyword']}: {e['message']}" for e in args["errors"]]
    if report["condition"] is not None:
        out += condition_lines(report["condition"], file)
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

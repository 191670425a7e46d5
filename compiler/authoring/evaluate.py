"""``seif eval``: what a context of one objective discloses, and how one call would be decided,
with the explanation, by the engine alone (as ``opa eval`` evaluates a query against policies).

The context is simulated as a project test simulates one (``policy.engine.testing``): resolved
at the given coordinates, by the given principal (``--subject``, ``--claims``; none: every
field null, as a test without ``principal``), under ``current`` or the project's fixtures,
opened at time 0; a call is decided in it, made by the same principal, ``approved`` recording a
simulated approval of exactly that call first.
Nothing is dispatched, no executor is asked, no runtime is involved.

The report is the document ``seif eval --json`` prints (``cli.md``): ``{"objective",
"coordinates", "resolution", "messages", "tools", "omitted": [{"tool", "reason"}], "tokens",
"decision": {"outcome", "reason", "explanation"} or null}``. ``coordinates`` are those the rules
read as ``context.*`` (an absent one is ``""``); ``tools`` are the model-facing schemas, as the
runtime discloses them; ``omitted`` lists the tools not disclosed (a blocked resolution's causes
first); an argument refusal's explanation lists each error's pointer and message in its
``detail``; with a principal given, ``principal`` is it as the rules read it (``{issuer,
subject, clientId, claims}``). :func:`facts` adds what the text output shows besides: the
profile, the omitted messages, a blocked resolution's causes, a rule's ``when`` or a condition
where it is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.authoring.simulate import (
    at_text,
    condition_lines,
    condition_of,
    known_objective,
    observations,
    principal_line,
    rule_when_line,
    rule_when_of,
)
from compiler.authoring.source import ProjectSource, compiled
from policy import reasons as R
from policy.engine.decision import Decision
from policy.engine.disclosure import Disclosure, disclose, disclosure_context
from policy.engine.principal import principal_value
from policy.engine.testing import simulate_calls
from policy.ir import COORDINATE_FIELDS, Project
from policy.json.value import thaw

MESSAGE_SHOWN = 96
"""Characters of a message's text the text output shows on its line (``--json`` has it all)."""


@dataclass(frozen=True, slots=True)
class Call:
    """The call to decide: a tool id or function name, its arguments, a simulated approval."""

    tool: str
    arguments: Any
    approved: bool = False
    call_id: str | None = "eval-1"


def evaluate(
    source: ProjectSource,
    *,
    objective: str,
    coordinates: Mapping[str, str] | None = None,
    fixtures: str = "current",
    call: Call | None = None,
    principal: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report (``seif eval --json``) with, under ``"facts"``, what only the text shows;
    ``AuthoringError`` for an invalid project, an unknown objective or fixtures mode."""
    ir = compiled(source)
    seen = observations(ir, fixtures)
    known_objective(ir, objective)
    at = {k: v for k, v in (coordinates or {}).items() if v}
    who = principal_value(principal)
    d = disclose(ir, objective, seen, at, who)
    decision = None
    if call is not None:
        decision = simulate_calls(ir, d, "eval", [call], at, who)[0]
    context = disclosure_context(objective, at)
    given = {} if principal is None else {"principal": thaw(who)}
    report = {
        "objective": objective,
        "coordinates": {name: context[name] for name in COORDINATE_FIELDS},
        **given,
        "resolution": d.status,
        "messages": [{"id": m.id, "role": m.role, "text": m.text} for m in d.messages],
        "tools": [thaw(t.model_schema) for t in d.tools],
        "omitted": [{"tool": o.id, "reason": o.reason} for o in _not_disclosed(d)],
        "tokens": d.tokens.to_json(),
        "decision": None if decision is None else _decision(decision),
    }
    return {**report, "facts": facts(ir, source, d, decision, at)}


def _not_disclosed(d: Disclosure) -> list[Any]:
    return [o for o in (*d.causes, *d.omitted) if o.kind == "tool"]


def _decision(decision: Decision) -> dict[str, Any]:
    explanation = decision.explanation.to_json() if decision.explanation else None
    if explanation is not None and decision.errors and not explanation.get("detail"):
        listed = "; ".join(f"{e.pointer or '/'}: {e.message}" for e in decision.errors)
        explanation["detail"] = f"invalid arguments: {listed}"
    return {"outcome": decision.outcome, "reason": decision.reason, "explanation": explanation}


def facts(
    ir: Project,
    source: ProjectSource,
    d: Disclosure,
    decision: Decision | None,
    at: Mapping[str, str],
) -> dict[str, Any]:
    """What the text output shows besides the report: the given coordinates, the profile,
    the tool ids disclosed, the omissions with where their rule's ``when`` is written, and the
    condition that decided the call."""
    omitted = []
    for o in (*d.causes, *d.omitted):
        rule = rule_when_of(ir, source, d.profile, o.id, o.reason) if o.kind == "tool" else None
        omitted.append({"id": o.id, "kind": o.kind, "reason": o.reason, "rule": rule})
    return {
        "given": dict(at),
        "profile": d.profile,
        "reason": d.reason,
        "toolIds": [t.id for t in d.tools],
        "blocking": [o.id for o in d.causes],
        "omitted": omitted,
        "condition": None if decision is None else condition_of(ir, source, decision),
        "call": None if decision is None else decision.tool,
    }


def denied(report: Mapping[str, Any]) -> bool:
    """A call was asked and not allowed."""
    decision = report["decision"]
    return decision is not None and decision["outcome"] != "ALLOW"


def text_lines(report: Mapping[str, Any], file: str = "") -> list[str]:
    """The report as the CLI prints it: the resolution, what it discloses and omits, the
    tokens, then the call's decision and its explanation."""
    f = report["facts"]
    profile = f" (profile {f['profile']})" if f["profile"] else ""
    status = report["resolution"] + (f" {f['reason']}" if f["reason"] else "")
    out = [f"objective {report['objective']}{at_text(f['given'])}: {status}{profile}"]
    out += principal_line(report.get("principal"))
    out.append(f"messages ({len(report['messages'])}):")
    out += [f"  {m['id']} ({m['role']}): {_clip(m['text'])}" for m in report["messages"]]
    names = [f"{t['name']} ({i})" for t, i in zip(report["tools"], f["toolIds"], strict=True)]
    out.append(f"tools ({len(names)}): {', '.join(names) or '-'}")
    out += _omitted_lines(f, file)
    t = report["tokens"]
    out.append(
        f"tokens: {t['total']} of {t['ceiling']} (messages {t['messages']}, tools "
        f"{t['tools']}), estimated"
    )
    if report["decision"] is not None:
        out += _decision_lines(report, file)
    out.append("(simulated by the engine alone; nothing was dispatched)")
    return out


def _clip(text: str) -> str:
    line = text.replace("\n", " ")
    return line if len(line) <= MESSAGE_SHOWN else line[: MESSAGE_SHOWN - 1] + "…"


def _omitted_lines(f: Mapping[str, Any], file: str) -> list[str]:
    if not f["omitted"]:
        return ["omitted: -"]
    out = ["omitted:"]
    for o in f["omitted"]:
        blocks = " (required: blocks the resolution)" if o["id"] in f["blocking"] else ""
        out.append(f"  {o['kind']} {o['id']}: {o['reason']}{blocks}")
        if o["rule"] is not None:
            out.append("  " + rule_when_line(o["rule"], o["reason"], file))
    return out


def _decision_lines(report: Mapping[str, Any], file: str) -> list[str]:
    decision, f = report["decision"], report["facts"]
    verdict = {"ALLOW": "ALLOWED", "DENY": "DENIED"}.get(decision["outcome"], decision["outcome"])
    reason = f" {decision['reason']}" if decision["reason"] else ""
    out = [f"call {f['call']}: {verdict}{reason}"]
    why = decision["explanation"]
    if why is not None:
        named = ", ".join(
            f"{k} {why[k]}" for k in ("profile", "rule", "condition", "tool") if k in why
        )
        detail = f": {why['detail']}" if why.get("detail") else ""
        out.append(f"  because: {why['pointer'] or '/'} ({named}){detail}")
    if f["condition"] is not None:
        out += condition_lines(f["condition"], file)
    if decision["reason"] == R.APPROVAL_REQUIRED:
        out.append("  an approval of exactly this call would be needed (try --approved)")
    return out


def document(report: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--json`` document: the report without the text output's facts."""
    return {k: v for k, v in report.items() if k != "facts"}

"""What ``seif tool check-call`` and ``seif eval`` share: a simulated context of one objective,
at given coordinates and under given fixtures, and the condition a decision names, found in the
source the author wrote.

The engine alone decides; nothing is dispatched. A condition is shown as the author wrote it:
its place (the rule's profile and tool, its index, its JSON pointer and its line and column in
the file), its expression, what it does, and the reason the engine gives (the condition's own
reason for a denial, the evaluation error for ``CONDITION_ERROR``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compiler.authoring.source import ProjectSource, refusal
from policy import reasons as R
from policy.cel.fields import OPTIONAL_WITHOUT_HAS, check_fields
from policy.diagnostic import Location
from policy.engine.decision import Decision
from policy.engine.testing import current_fixtures
from policy.explain import Explanation
from policy.ir import COORDINATE_FIELDS, Fixture, Project
from policy.json.strict import JsonError, loads

FIXTURE_MODES = ("current", "project")
CONDITION_REASONS = frozenset({R.CONDITION_DENIED, R.CONDITION_ERROR})


def coordinates_given(
    consumer: str | None = None, environment: str | None = None, deployment: str | None = None
) -> dict[str, str]:
    """The coordinates given and not empty, by name (an empty one reads as an absent one)."""
    values = (consumer, environment, deployment)
    return {k: v for k, v in zip(COORDINATE_FIELDS, values, strict=True) if v}


MAX_CLAIMS = 16
"""As many claims as an issuer may allowlist (docs/identity.md)."""


def principal_given(subject: str | None, claims: str | None) -> dict[str, Any] | None:
    """The principal ``--subject`` and ``--claims`` (JSON text) give: ``{"subject", "claims"}``
    (issuer and client null: a user as a project test's ``principal`` writes one); None when
    neither is given. ``CLAIMS_INVALID`` for claims that are not a JSON object of at most
    :data:`MAX_CLAIMS` claims, each a string, a number, a boolean or a list of strings."""
    if subject is None and claims is None:
        return None
    found: Any = {}
    if claims is not None:
        try:
            found = loads(claims)
        except JsonError as exc:
            raise refusal("CLAIMS_INVALID", f"--claims is not JSON: {exc}") from None
    if (
        not isinstance(found, dict)
        or len(found) > MAX_CLAIMS
        or not all(_claim(v) for v in found.values())
    ):
        raise refusal(
            "CLAIMS_INVALID",
            f"--claims must be a JSON object of at most {MAX_CLAIMS} claims, each a string, a "
            "number, a boolean or a list of strings",
        )
    out: dict[str, Any] = {"claims": found}
    if subject is not None:
        out["subject"] = subject
    return out


def principal_line(principal: Mapping[str, Any] | None) -> list[str]:
    """``  principal: subject alice, claims {"groups": ["authors"]}`` for a principal given
    (the text output's line), none otherwise."""
    if principal is None:
        return []
    subject = principal.get("subject")
    shown = "no subject" if subject is None else f"subject {subject}"
    claims = json.dumps(principal.get("claims") or {}, ensure_ascii=False, sort_keys=True)
    return [f"  principal: {shown}, claims {claims}"]


def _claim(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    return isinstance(value, (str, int, float, bool))


def observations(ir: Project, fixtures: str) -> Mapping[str, Fixture]:
    """Availability: every tool READY as declared (``current``) or the project's fixtures;
    ``INVALID_VALUE`` for another mode."""
    if fixtures not in FIXTURE_MODES:
        raise refusal(
            "INVALID_VALUE", f"`{fixtures}` is not a fixtures mode: write `current` or `project`"
        )
    return current_fixtures(ir) if fixtures == "current" else ir.tool_fixtures


def known_objective(ir: Project, objective: str) -> None:
    """``UNKNOWN_OBJECTIVE``, naming the project's objectives, unless ``objective`` is one."""
    if objective not in ir.objective_by_id:
        known = ", ".join(o.id for o in ir.objectives)
        raise refusal(
            "UNKNOWN_OBJECTIVE",
            f"`{objective}` is not an objective of this project (objectives: {known})",
        )


def at_text(coordinates: Mapping[str, str]) -> str:
    """``at environment production, consumer trial``, or ``""`` for none."""
    if not coordinates:
        return ""
    return " at " + ", ".join(f"{k} {v}" for k, v in coordinates.items())


# --- the condition a decision names -------------------------------------------------------------


def condition_of(ir: Project, source: ProjectSource, decision: Decision) -> dict[str, Any] | None:
    """The condition that denied the call (``CONDITION_DENIED``, ``CONDITION_ERROR``) or made
    an approval required, as the author wrote it; None when no condition decided."""
    why = decision.explanation
    if why is None or why.condition is None or why.profile is None or why.rule is None:
        return None
    rule = ir.profile_by_id[why.profile].tool_rules[why.rule]
    condition = rule.conditions[why.condition]
    line, column = position(source, f"{why.pointer}/when")  # where its expression is
    effect = "denied" if decision.reason in CONDITION_REASONS else "approval required"
    tool = ir.tool_by_id[rule.tool]
    unguarded = [
        d.message
        for d in check_fields(condition.when, "call", tool.parameters, tool.id)
        if d.code == OPTIONAL_WITHOUT_HAS
    ]
    return {
        "profile": why.profile,
        "tool": rule.tool,
        "index": why.condition,
        "pointer": why.pointer,
        "line": line,
        "column": column,
        "when": condition.when,
        "then": condition.then,
        "effect": "failed to evaluate" if decision.reason == R.CONDITION_ERROR else effect,
        "reason": _reason(why, decision, unguarded),
    }


EVALUATION_HINTS = {
    "NO_SUCH_KEY": "it reads a field the call or the context does not have (an optional "
    "argument: write `has(args.x) && ...`); the call is denied (fail closed)",
    "NO_MATCHING_OVERLOAD": "an operator or function met values of types it does not take "
    "(a string compared with a number, say); the call is denied (fail closed)",
    "NOT_BOOLEAN": "the expression did not give a boolean; the call is denied (fail closed)",
}
"""What an evaluation error code most often means, for the author who reads it."""


def _reason(why: Explanation, decision: Decision, unguarded: list[str]) -> str:
    """What the engine says: the condition's reason, or its evaluation error (with what that
    error most often means: for a missing field, the optional arguments the condition reads
    without ``has()``, as ``seif validate`` warns of them)."""
    if decision.reason != R.CONDITION_ERROR:
        return why.detail
    error = why.detail.removeprefix("evaluation failed: ")
    if error.startswith("NO_SUCH_KEY") and unguarded:
        return f"{error}: " + "; ".join(unguarded)
    hint = next((h for code, h in EVALUATION_HINTS.items() if error.startswith(code)), None)
    return f"{error}: {hint}" if hint else f"{error}; the call is denied (fail closed)"


def position(source: ProjectSource, pointer: str) -> tuple[int | None, int | None]:
    """The line and column where the element at ``pointer`` is written in the source file."""
    if source.kind == "seif":
        from compiler.seif.parse import SeifSyntaxError, parse_seif  # noqa: PLC0415  # lark

        try:
            at = parse_seif(source.text).position_of(pointer)
        except SeifSyntaxError:
            return None, None
        return at if at is not None else (None, None)
    from policy.json.positions import JsonPositions  # noqa: PLC0415  # only when one is shown

    where = JsonPositions.of(source.text).locate(Location(pointer=pointer))
    return where.line, where.column


def condition_lines(condition: Mapping[str, Any], file: str) -> list[str]:
    """The condition as the CLI prints it: where, the expression, what it did and why."""
    where = f"{file}:{condition['line']}:{condition['column']}" if condition["line"] else file
    head = (
        f"  condition {condition['index']} of the rule for {condition['tool']} in profile "
        f"{condition['profile']} ({where}, {condition['pointer']})"
    )
    then = "deny" if condition["then"] == "DENY" else "require_approval"
    reason = condition["reason"] or "no reason given"
    return [
        head,
        f"    when: {condition['when']}",
        f"    then: {then}",
        f"    {condition['effect']}: {reason}",
    ]


def rule_when_of(
    ir: Project, source: ProjectSource, profile: str | None, tool: str, reason: str | None
) -> dict[str, Any] | None:
    """The ``when`` of ``profile``'s rule for ``tool``, where it is written, when the tool was
    omitted because of it (``CONDITION_NOT_MET``: false here, ``CONDITION_ERROR``: failed)."""
    if profile is None or reason not in (R.CONDITION_NOT_MET, R.CONDITION_ERROR):
        return None
    index = ir.profile_by_id[profile].rule_index.get(tool)
    if index is None:
        return None
    rule = ir.profile_by_id[profile].tool_rules[index]
    pointer = f"/profiles/{ir.profile_position[profile]}/toolRules/{index}/when"
    line, column = position(source, pointer)
    return {"when": rule.when, "pointer": pointer, "line": line, "column": column}


def rule_when_line(found: Mapping[str, Any], reason: str, file: str) -> str:
    where = f"{file}:{found['line']}:{found['column']}" if found["line"] else file
    result = "is false here" if reason == R.CONDITION_NOT_MET else "failed to evaluate"
    return f"  rule when: {found['when']} {result} ({where}, {found['pointer']})"

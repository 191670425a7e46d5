"""``seif tool protect``: the guards that hold a tool's audience in every scenario.

For each objective and each of its scenarios (``compiler.authoring.scenarios``: every
combination of the coordinate values its profile's rules compare ``context.consumer``,
``context.environment`` and ``context.deployment`` with, and none of them), a *disclosure guard*
(fixtures ``current``, ``guard: true``, the scenario's ``coordinates``) asserting that the
objective's resolution there discloses the tool exactly as the engine discloses it now:
``include`` where it does, ``exclude`` and a call denied ``TOOL_NOT_DISCLOSED`` elsewhere. The
guard of the scenario without coordinates is ``<tool>-audience-<objective>``; the others add
``-at-`` and the scenario (``<tool>-audience-<objective>-at-environment-production``). And one
*compatibility guard* ``<tool>-compatible``: under the current contract, in the first objective
and scenario that disclose the tool and allow the call, it is called with small valid arguments
and the call is allowed (approval-required tools: denied ``APPROVAL_REQUIRED`` without an
approval, allowed with one).

The guards are derived, so protecting is idempotent: a guard already as derived is left alone,
one that differs (the audience changed) is rewritten and reported, one for an objective or a
scenario that is gone is removed. The guards must pass on the new text, or nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blake3 import blake3

from compiler.authoring import edits
from compiler.authoring.examples import example_arguments
from compiler.authoring.scenarios import Scenario, scenario_suffixes, scenarios
from compiler.authoring.source import (
    AuthoringError,
    Edit,
    ProjectSource,
    checked,
    compiled,
    refused,
    source_from_text,
    test_failures,
    tool_of,
)
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.testing import current_fixtures, run_tests, simulate_calls
from policy.ir import Project, TestCall, Tool
from policy.json.value import freeze

MAX_ID = 64


def guard_id(tool_id: str, suffix: str) -> str:
    """``<tool>-<suffix>``, shortened with a stable hash when longer than an id may be."""
    full = f"{tool_id}-{suffix}"
    if len(full) <= MAX_ID:
        return full
    tag = blake3(full.encode()).hexdigest()[:8]
    return f"{full[: MAX_ID - 9].rstrip('-')}-{tag}"


def derived_guards(ir: Project, tool: Tool) -> tuple[list[dict[str, Any]], list[str]]:
    """The guards of ``tool`` (in objective order, each objective's scenarios in order, the
    compatibility guard last) and notes; ``SCENARIOS_TOO_MANY`` for an objective with more
    scenarios than protect writes guards for."""
    guards, notes = [], []
    seen: list[tuple[str, Scenario, Disclosure]] = []
    fixtures = current_fixtures(ir)
    for objective in ir.objectives:
        each = scenarios(ir, objective.id)
        found = [(at, disclose(ir, objective.id, fixtures, at)) for at in each]
        for (at, d), suffix in zip(found, scenario_suffixes(each), strict=True):
            shown = tool.id in d.tool_ids
            guards.append(_disclosure_guard(tool, objective.id, d, shown, at, suffix))
            if shown:
                seen.append((objective.id, at, d))
        notes += _unseen(ir, tool, objective.id, found)
    if not seen:
        notes.append(
            f"no objective sees `{tool.id}`: no compatibility guard (include it in a "
            "profile, then protect again)"
        )
        return guards, notes
    compat, note = _compatibility(ir, tool, seen)
    guards.append(compat)
    return guards, notes + ([note] if note else [])


def _unseen(
    ir: Project, tool: Tool, objective: str, found: Sequence[tuple[Scenario, Disclosure]]
) -> list[str]:
    """A note when the objective's profile includes the tool but no scenario discloses it."""
    profile = ir.profile_by_id[ir.objective_by_id[objective].profile]
    ruled = any(r.tool == tool.id and r.participation == "include" for r in profile.tool_rules)
    if not ruled or any(tool.id in d.tool_ids for _, d in found):
        return []
    d = found[0][1]
    why = next((o.reason for o in d.omitted if o.id == tool.id), d.reason or d.status)
    return [
        f"profile `{profile.id}` includes `{tool.id}` but objective "
        f"`{objective}` does not see it under current fixtures ({why})"
    ]


def _compatibility(
    ir: Project, tool: Tool, seen: list[tuple[str, Scenario, Disclosure]]
) -> tuple[dict[str, Any], str | None]:
    """The compatibility guard in the first objective and scenario that see the tool and whose
    derived calls are decided as it expects, and a note when it can only check disclosure."""
    arguments = example_arguments(tool.parameters)
    test_id = guard_id(tool.id, "compatible")
    if arguments is None:
        objective, at, _ = seen[0]
        note = (
            f"no simple valid arguments for `{tool.id}`: its compatibility guard checks "
            "disclosure only"
        )
        return _guard(test_id, objective, {"include": [tool.id]}, coordinates=at), note
    calls = _compatible_calls(tool, arguments)
    for objective, at, d in seen:
        if _decided_as_expected(ir, d, calls, at):
            tools = {"include": [tool.id], "calls": calls}
            return _guard(test_id, objective, tools, coordinates=at), None
    objective, at, _ = seen[0]
    note = (
        f"a call of `{tool.id}` with simple valid arguments is not allowed in any scenario "
        "that sees it (a condition decides it): its compatibility guard checks disclosure only"
    )
    return _guard(test_id, objective, {"include": [tool.id]}, coordinates=at), note


def _decided_as_expected(
    ir: Project, d: Disclosure, calls: list[dict[str, Any]], at: Scenario
) -> bool:
    specs = [
        TestCall(
            tool=c["tool"],
            arguments=freeze(c["arguments"]),
            expect=c["expect"],
            approved=c.get("approved", False),
        )
        for c in calls
    ]
    decisions = simulate_calls(ir, d, "protect", specs, at)
    return all(
        x.outcome == c["expect"] and x.reason == c.get("reason")
        for x, c in zip(decisions, calls, strict=True)
    )


def _guard(
    test_id: str,
    objective: str,
    tools: dict[str, Any],
    blocked: bool = False,
    coordinates: Scenario | None = None,
) -> Any:
    expect: dict[str, Any] = {"resolution": "BLOCKED"} if blocked else {}
    expect["tools"] = tools
    guard: dict[str, Any] = {"id": test_id, "objective": objective, "guard": True}
    guard["fixtures"] = "current"
    if coordinates:
        guard["coordinates"] = dict(coordinates)
    guard["expect"] = expect
    return guard


def _disclosure_guard(
    tool: Tool, objective: str, d: Disclosure, shown: bool, at: Scenario, scenario: str
) -> Any:
    test_id = guard_id(tool.id, f"audience-{objective}" + (f"-at-{scenario}" if at else ""))
    if shown:
        return _guard(test_id, objective, {"include": [tool.id]}, coordinates=at)
    denied = {"tool": tool.id, "arguments": {}, "expect": "DENY", "reason": "TOOL_NOT_DISCLOSED"}
    tools: dict[str, Any] = {"exclude": [tool.id]}
    if d.resolved:
        tools["calls"] = [denied]
    return _guard(test_id, objective, tools, blocked=not d.resolved, coordinates=at)


def _compatible_calls(tool: Tool, arguments: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"tool": tool.id, "arguments": arguments}
    if tool.approval == "required":
        return [
            {**call, "expect": "DENY", "reason": "APPROVAL_REQUIRED"},
            {**call, "approved": True, "expect": "ALLOW"},
        ]
    return [{**call, "expect": "ALLOW"}]


def protect_tool(source: ProjectSource, *, tool_id: str) -> Edit:
    """Write the tool's guards (``details``: ``tool``, ``guards``, ``added``, ``updated``,
    ``removed``, ``unchanged``); an edit that changes nothing when they are current."""
    try:
        ir = compiled(source)
        tool = tool_of(ir, tool_id, "/tools")
        guards, notes = derived_guards(ir, tool)
    except AuthoringError as exc:
        return refused(source, exc)
    text, report = _apply(source, tool_id, guards)
    notes = [*_summary(tool_id, report), *notes]
    edit = checked(
        source, text, tuple(notes), tool=tool_id, guards=[g["id"] for g in guards], **report
    )
    return _guards_pass(edit, {g["id"] for g in guards})


def _apply(
    source: ProjectSource, tool_id: str, guards: list[dict[str, Any]]
) -> tuple[str, dict[str, list[str]]]:
    report: dict[str, list[str]] = {"added": [], "updated": [], "removed": [], "unchanged": []}
    current = source
    wanted = {g["id"]: g for g in guards}
    for guard in guards:
        index = _test_index(current.document, guard["id"])
        if index is None:
            text = edits.add_element(current, "tests", guard)
            report["added"].append(guard["id"])
        elif current.document["tests"][index] == guard:
            report["unchanged"].append(guard["id"])
            continue
        else:
            text = edits.replace_element(current, "tests", index, guard)
            report["updated"].append(guard["id"])
        current = source_from_text(source.path, text)
    for stale in _stale(current.document, tool_id, wanted):
        index = _test_index(current.document, stale)
        assert index is not None
        current = source_from_text(source.path, edits.remove_element(current, "tests", index))
        report["removed"].append(stale)
    return current.text, report


def _test_index(document: Mapping[str, Any], test_id: str) -> int | None:
    tests = document.get("tests")
    found = [i for i, t in enumerate(tests or []) if isinstance(t, dict) and t.get("id") == test_id]
    return found[0] if found else None


def _stale(document: Mapping[str, Any], tool_id: str, wanted: Mapping[str, Any]) -> list[str]:
    """Guards this command wrote for ``tool_id`` that it would not write now."""
    prefixes = (f"{tool_id}-audience-", guard_id(tool_id, "compatible"))
    return [
        t["id"]
        for t in document.get("tests") or []
        if isinstance(t, dict)
        and t.get("guard") is True
        and isinstance(t.get("id"), str)
        and t["id"].startswith(prefixes)
        and t["id"] not in wanted
        and _mentions(t, tool_id)
    ]


def _mentions(test: Mapping[str, Any], tool_id: str) -> bool:
    tools = test.get("expect", {}).get("tools", {})
    return tool_id in tools.get("include", []) or tool_id in tools.get("exclude", [])


def _summary(tool_id: str, report: Mapping[str, list[str]]) -> list[str]:
    if not (report["added"] or report["updated"] or report["removed"]):
        return [
            f"`{tool_id}` is already protected: {len(report['unchanged'])} guards current, "
            "nothing changed"
        ]
    out = []
    for key in ("added", "updated", "removed"):
        if report[key]:
            out.append(f"{key} {len(report[key])} guard(s): {', '.join(report[key])}")
    return out


def _guards_pass(edit: Edit, guard_ids: set[str]) -> Edit:
    """``edit``, refused with ``TESTS_FAILED`` when one of the tool's guards fails on it."""
    if not edit.ok or not edit.changed:
        return edit
    assert edit.project is not None  # a validating edit carries its IR
    failed = test_failures(run_tests(edit.project), guard_ids)
    if not failed:
        return edit
    return Edit(edit.source, edit.source.text, tuple(failed), edit.notes, edit.details)

"""``seif tool show``: one tool's audience, protection and connection, three separate sections.

- ``audience``: every objective and its profile's rule for the tool (include, required,
  exclude or none) and whether the engine discloses the tool there under current fixtures, in
  each of the objective's scenarios (``compiler.authoring.scenarios``: every combination of the
  coordinate values its rules compare with, and none of them; the first, without coordinates,
  is also the objective's own ``disclosed`` and ``reason``).
- ``protection``: the project tests that name the tool (in ``include``, ``exclude`` or a call),
  which are guards, whether each passes, and the objectives and scenarios no guard covers.
- ``connection``: the tool's entry in a bindings file, if one is given: revision, endpoint and
  secret reference, labelled ``configured`` (a placeholder endpoint is ``placeholder``); for a
  tool bound to an upstream, the upstream's id, its program or url and secret reference. Never
  ``ready``: readiness is what the runtime observes of a running executor or upstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.authoring.bindings import is_placeholder_upstream, placeholder_endpoint
from compiler.authoring.scenarios import Scenario, scenario_of, scenario_text, scenarios
from compiler.authoring.source import AuthoringError, ProjectSource, compiled, tool_of
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.testing import coordinates_of, current_fixtures, run_tests
from policy.ir import Profile, Project, ProjectTest, Tool


@dataclass(frozen=True, slots=True)
class Facts:
    """What every tool's report reads of the project, computed once: each objective's
    disclosure under current fixtures in each of its scenarios (the first without coordinates),
    whether each test passes, and the objectives with too many scenarios to report each."""

    disclosures: Mapping[str, Sequence[tuple[Scenario, Disclosure]]]
    passed: Mapping[str, bool]
    too_many: Mapping[str, str]

    @classmethod
    def of(cls, ir: Project) -> Facts:
        fixtures = current_fixtures(ir)
        disclosures, too_many = {}, {}
        for o in ir.objectives:
            try:
                each = scenarios(ir, o.id)
            except AuthoringError as exc:
                each, too_many[o.id] = [{}], exc.diagnostics[0].message
            disclosures[o.id] = [(at, disclose(ir, o.id, fixtures, at)) for at in each]
        passed = {r.id: r.passed for r in run_tests(ir).results}
        return cls(disclosures, passed, too_many)


def show_tool(
    source: ProjectSource, *, tool_id: str, bindings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The three sections; ``AuthoringError`` for an unknown tool or an invalid project."""
    ir = compiled(source)
    return report(ir, tool_of(ir, tool_id), Facts.of(ir), bindings)


def show_tools(
    source: ProjectSource, bindings: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The report of every tool, in catalogue order (the project's tests run once)."""
    ir = compiled(source)
    facts = Facts.of(ir)
    return [report(ir, tool, facts, bindings) for tool in ir.tools]


def report(
    ir: Project, tool: Tool, facts: Facts, bindings: Mapping[str, Any] | None
) -> dict[str, Any]:
    return {
        "tool": _contract(tool),
        "audience": audience(ir, tool, facts),
        "protection": protection(ir, tool, facts),
        "connection": connection(tool, bindings),
    }


def _contract(tool: Tool) -> dict[str, Any]:
    properties = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    return {
        "id": tool.id,
        "name": tool.name,
        "version": tool.version,
        "contractDigest": tool.contract_digest,
        "description": tool.description,
        "effect": tool.effect,
        "approval": tool.approval,
        "maxCalls": tool.max_calls,
        "timeoutMs": tool.timeout_ms,
        "arguments": [
            {"name": name, "type": schema.get("type"), "required": name in required}
            for name, schema in properties.items()
        ],
        **({} if tool.upstream is None else {"upstream": tool.upstream.to_json()}),
    }


def _rule_of(profile: Profile, tool_id: str) -> str:
    rule = next((r for r in profile.tool_rules if r.tool == tool_id), None)
    if rule is None:
        return "none"
    if rule.participation == "exclude":
        return "exclude"
    return "required" if rule.required else "include"


def _seen(tool: Tool, at: Scenario, d: Disclosure) -> dict[str, Any]:
    reason = None
    if tool.id not in d.tool_ids:
        reason = next((o.reason for o in d.omitted if o.id == tool.id), d.reason)
    return {"coordinates": dict(at), "disclosed": tool.id in d.tool_ids, "reason": reason}


def audience(ir: Project, tool: Tool, facts: Facts) -> dict[str, Any]:
    objectives = []
    for objective in ir.objectives:
        each = [_seen(tool, at, d) for at, d in facts.disclosures[objective.id]]
        objectives.append(
            {
                "objective": objective.id,
                "profile": objective.profile,
                "rule": _rule_of(ir.profile_by_id[objective.profile], tool.id),
                "disclosed": each[0]["disclosed"],
                "reason": each[0]["reason"],
                "scenarios": each,
                "tooManyScenarios": facts.too_many.get(objective.id),
            }
        )
    rules = {p.id: _rule_of(p, tool.id) for p in ir.profiles}
    return {
        "includedBy": [p for p, r in rules.items() if r in ("include", "required")],
        "requiredBy": [p for p, r in rules.items() if r == "required"],
        "excludedBy": [p for p, r in rules.items() if r == "exclude"],
        "noRule": [p for p, r in rules.items() if r == "none"],
        "objectives": objectives,
    }


def _names(test: ProjectTest, tool_id: str) -> list[str]:
    tools = test.expect.tools
    if tools is None:
        return []
    out = ["include"] if tool_id in tools.include else []
    out += ["exclude"] if tool_id in tools.exclude else []
    out += ["calls"] if any(c.tool == tool_id for c in tools.calls) else []
    return out


def protection(ir: Project, tool: Tool, facts: Facts) -> dict[str, Any]:
    passed = facts.passed
    tests = [
        {
            "id": t.id,
            "objective": t.objective,
            "guard": t.guard,
            "asserts": _names(t, tool.id),
            "fixtures": t.fixtures if isinstance(t.fixtures, str) or t.fixtures is None else "own",
            "passed": passed[t.id],
        }
        for t in ir.tests
        if _names(t, tool.id)
    ]
    guarded = {t["objective"] for t in tests if t["guard"]}
    at = {
        (t.objective, _key(scenario_of(ir, t.objective, coordinates_of(t))))
        for t in ir.tests
        if t.guard and _names(t, tool.id)
    }
    return {
        "tests": tests,
        "guards": [t["id"] for t in tests if t["guard"]],
        "unguardedObjectives": [o.id for o in ir.objectives if o.id not in guarded],
        "unguardedScenarios": [
            {"objective": o.id, "coordinates": dict(scenario)}
            for o in ir.objectives
            for scenario, _ in facts.disclosures[o.id]
            if (o.id, _key(scenario)) not in at
        ],
        "failing": [t["id"] for t in tests if not t["passed"]],
    }


def _key(coordinates: Scenario) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(coordinates.items()))


def connection(tool: Tool, bindings: Mapping[str, Any] | None) -> dict[str, Any]:
    if bindings is None:
        return {"state": "unknown", "note": "no bindings file given (--bindings FILE)"}
    tools = bindings.get("tools") if isinstance(bindings, Mapping) else None
    entry = tools.get(tool.id) if isinstance(tools, Mapping) else None
    base = {"environment": bindings.get("environment"), "revision": bindings.get("revision")}
    if not isinstance(entry, Mapping):
        return {**base, "state": "unbound", "note": f"the bindings file has no entry for {tool.id}"}
    if isinstance(entry.get("upstream"), str):
        return {**base, **_upstream_connection(entry, bindings)}
    endpoint = entry.get("endpoint")
    if not isinstance(endpoint, str):
        return {**base, "state": "unbound", "note": f"the entry of {tool.id} has no endpoint"}
    placeholder = endpoint == placeholder_endpoint(tool.id)
    return {
        **base,
        "state": "placeholder" if placeholder else "configured",
        "endpoint": endpoint,
        "secretRef": entry.get("secretRef"),
        "timeoutMs": entry.get("timeoutMs"),
        "note": "configured, not ready: readiness is checked by the runtime that serves the build",
    }


def _upstream_connection(entry: Mapping[str, Any], bindings: Mapping[str, Any]) -> dict[str, Any]:
    """An upstream-bound tool's connection: its upstream's id, and the command (program only:
    arguments may name something private) or url the file gives it."""
    server = entry["upstream"]
    upstreams = bindings.get("upstreams")
    served = upstreams.get(server) if isinstance(upstreams, Mapping) else None
    if not isinstance(served, Mapping):
        note = f"`upstreams` has no entry `{server}`"
        return {"state": "unbound", "upstream": server, "note": note}
    command = served.get("command")
    program = command[0] if isinstance(command, list) and command else None
    return {
        "state": "placeholder" if is_placeholder_upstream(server, served) else "configured",
        "upstream": server,
        "command": program if isinstance(program, str) else None,
        "url": served.get("url"),
        "secretRef": served.get("secretRef"),
        "timeoutMs": entry.get("timeoutMs"),
        "note": "configured, not ready: the runtime checks the upstream's listing against the pin",
    }


def text_lines(report: Mapping[str, Any]) -> list[str]:
    """The report as the CLI prints it: a header, then the three sections."""
    t = report["tool"]
    args = ", ".join(
        f"{a['name']}{'' if a['required'] else '?'}: {a['type']}" for a in t["arguments"]
    )
    out = [
        f"tool {t['id']} {t['version']} ({t['name']}) {t['contractDigest']}",
        f"  {t['effect']}, approval {t['approval']}, max {t['maxCalls']} calls, "
        f"timeout {t['timeoutMs']} ms; arguments: {args or 'none'}",
    ]
    if "upstream" in t:  # imported: docs/upstream-mcp.md
        pin = t["upstream"]
        out.append(f"  upstream {pin['server']} {pin['tool']} {pin['descriptorDigest']}")
    out += [
        "",
        "audience",
    ]
    a = report["audience"]
    for key, label in (
        ("includedBy", "included by"),
        ("requiredBy", "required by"),
        ("excludedBy", "excluded by"),
        ("noRule", "no rule in"),
    ):
        out.append(f"  {label}: {', '.join(a[key]) or '-'}")
    for o in a["objectives"]:
        out.append(
            f"  objective {o['objective']} (profile {o['profile']}, rule {o['rule']}): {_sees(o)}"
        )
        if len(o["scenarios"]) > 1:
            out += [
                f"    at {scenario_text(x['coordinates'])}: {_sees(x)}" for x in o["scenarios"][1:]
            ]
        if o["tooManyScenarios"]:
            out.append(f"    {o['tooManyScenarios']}")
    out += ["", "protection"]
    p = report["protection"]
    for test in p["tests"]:
        kind = "guard" if test["guard"] else "test"
        state = "passes" if test["passed"] else "FAILS"
        out.append(
            f"  {kind} {test['id']} ({test['objective']}: {', '.join(test['asserts'])}) {state}"
        )
    if not p["tests"]:
        out.append("  no test names it")
    out.append(f"  objectives without a guard: {', '.join(p['unguardedObjectives']) or '-'}")
    open_ = [
        f"{x['objective']} at {scenario_text(x['coordinates'])}"
        for x in p["unguardedScenarios"]
        if x["coordinates"] or x["objective"] not in p["unguardedObjectives"]
    ]
    out.append(f"  scenarios without a guard: {'; '.join(open_) or '-'}")
    out += ["", "connection", *_connection_lines(report["connection"])]
    return out


def _sees(seen: Mapping[str, Any]) -> str:
    if seen["disclosed"]:
        return "sees it"
    return f"does not see it ({seen['reason']})" if seen["reason"] else "does not see it"


def _connection_lines(c: Mapping[str, Any]) -> list[str]:
    if c["state"] in ("unknown", "unbound"):
        return [f"  {c['state']}: {c['note']}"]
    if "upstream" in c:
        target = c["url"] or c["command"] or "-"
        return [
            f"  {c['state']}: upstream {c['upstream']} {target} (environment {c['environment']}, "
            f"revision {c['revision']}, secret {c['secretRef']})",
            f"  {c['note']}",
        ]
    return [
        f"  {c['state']}: {c['endpoint']} (environment {c['environment']}, revision "
        f"{c['revision']}, secret {c['secretRef']})",
        f"  {c['note']}",
    ]

"""A call may name its tool by the function name the model saw as well as by its tool id.

The IR maps names to ids once per build; a decision names the tool by its id (so by id then by
name is one call: a duplicate); a tool id wins over a name; a name that is neither names what
the context discloses, repeating at most 64 characters of what was sent.
"""

from __future__ import annotations

from typing import Any

from compiler import compile_project
from policy import ALLOW, DENY, DUPLICATE, Call, ContextState, Project, decide, disclose
from policy.engine.decision import SHOWN

PROJECT = "reference/agent-tools/context-project.json"
T0 = 1_790_000_000_000
READ = {"ref": "course/overview"}
WRITE = {"target": "a", "kind": "clarify", "summary": "s"}


def opened(objective: str = "authoring") -> tuple[Project, ContextState]:
    ir = compile_project(PROJECT)
    obs = {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in ir.tools
    }
    return ir, ContextState.open("ctx-1", disclose(ir, objective, obs), T0)


def test_the_ir_maps_every_function_name_to_its_tool_id_once() -> None:
    ir = compile_project(PROJECT)
    assert dict(ir.tool_id_by_name) == {t.name: t.id for t in ir.tools}
    assert ir.tool_id_by_name["inspect_context"] == "inspect-context"
    again = compile_project(PROJECT)
    assert again == ir  # derived: no part of equality nor of the encoding


def test_a_call_by_name_is_decided_as_the_call_by_id_and_names_the_id() -> None:
    ir, state = opened()
    by_id = decide(ir, state, Call(tool="inspect-context", call_id="c1", arguments=READ), T0)
    by_name = decide(ir, state, Call(tool="inspect_context", call_id="c1", arguments=READ), T0)
    assert by_name.outcome == ALLOW and by_name.tool == "inspect-context"
    assert by_name == by_id


def test_by_id_then_by_name_is_one_call_a_duplicate_and_a_conflict() -> None:
    ir, state = opened()
    first = decide(ir, state, Call(tool="inspect-context", call_id="c1", arguments=READ), T0)
    assert first.fingerprint is not None
    state = state.record_dispatch("c1", first.tool, first.fingerprint)
    again = decide(ir, state, Call(tool="inspect_context", call_id="c1", arguments=READ), T0)
    assert (again.outcome, again.reason, again.tool) == (
        DUPLICATE,
        "DUPLICATE_CALL",
        "inspect-context",
    )
    other = decide(ir, state, Call(tool="inspect_context", call_id="c1", arguments={}), T0)
    assert (other.outcome, other.reason) == (DENY, "CALL_CONFLICT")


def test_the_limit_counts_calls_by_id_and_by_name_together() -> None:
    ir, state = opened()
    tool = ir.tool_by_id["search-knowledge"]
    args = {"query": "qq", "limit": 1}
    for i in range(tool.max_calls):
        name = "search_knowledge" if i % 2 else "search-knowledge"
        d = decide(ir, state, Call(tool=name, call_id=f"c{i}", arguments=args), T0)
        assert d.outcome == ALLOW and d.fingerprint is not None
        state = state.record_dispatch(f"c{i}", d.tool, d.fingerprint)
    last = decide(ir, state, Call(tool="search_knowledge", call_id="cx", arguments=args), T0)
    assert last.reason == "CALL_LIMIT_EXCEEDED"


def test_an_approval_of_the_id_serves_the_call_by_name() -> None:
    ir, state = opened()
    asked = decide(ir, state, Call(tool="propose_change", call_id="w1", arguments=WRITE), T0)
    assert (asked.reason, asked.tool) == ("APPROVAL_REQUIRED", "propose-change")
    assert asked.fingerprint is not None
    state = state.record_approval(
        "apr-1", tool="propose-change", call_id="w1", fingerprint=asked.fingerprint, now=T0
    )
    call = Call(tool="propose_change", call_id="w1", arguments=WRITE, approval_id="apr-1")
    allowed = decide(ir, state, call, T0)
    assert (allowed.outcome, allowed.tool) == (ALLOW, "propose-change")


def test_an_undisclosed_tool_by_name_is_explained_by_its_rule() -> None:
    ir, state = opened("learner")  # propose-change is excluded here
    d = decide(ir, state, Call(tool="propose_change", call_id="w1", arguments=WRITE), T0)
    assert (d.outcome, d.reason) == (DENY, "TOOL_NOT_DISCLOSED")
    assert d.explanation is not None
    assert d.explanation.tool == "propose-change"
    assert d.explanation.pointer == "/profiles/0/toolRules/2"


def test_a_wrong_name_is_told_the_names_the_context_discloses() -> None:
    ir, state = opened("learner")
    d = decide(ir, state, Call(tool="inspectContext", call_id="c1", arguments=READ), T0)
    assert (d.outcome, d.reason) == (DENY, "TOOL_NOT_DISCLOSED")
    assert d.explanation is not None
    why: dict[str, Any] = d.explanation.to_json()
    assert why["pointer"] == "/tools" and why["tool"] == "inspectContext"
    assert "`inspectContext`" in why["detail"]
    assert why["detail"].endswith("this context discloses: inspect_context, search_knowledge")


def test_a_long_wrong_name_is_cut_to_64_characters_in_the_explanation() -> None:
    ir, state = opened()
    sent = "x" * SHOWN + "SECRET-TAIL" * 20
    d = decide(ir, state, Call(tool=sent, call_id="c1", arguments=READ), T0)
    assert d.reason == "TOOL_NOT_DISCLOSED" and d.explanation is not None
    detail = d.explanation.detail
    assert "x" * SHOWN in detail and "SECRET" not in detail
    assert d.explanation.tool is not None and "SECRET" not in d.explanation.tool
    assert f"(+{len(sent) - SHOWN})" in detail
    assert "inspect_context, search_knowledge, propose_change" in detail


def test_a_tool_id_wins_over_another_tools_function_name() -> None:
    def tool(tool_id: str, name: str) -> dict[str, Any]:
        return {
            "id": tool_id,
            "name": name,
            "version": "1.0.0",
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {}},
            "effect": "read",
        }

    doc = {
        "format": "seif.context-project.v1",
        "id": "p",
        "version": "1.0.0",
        "objectives": [{"id": "o", "profile": "p"}],
        "profiles": [
            {
                "id": "p",
                "tokenCeiling": 10_000,
                "toolRules": [
                    {"tool": "alpha", "participation": "include"},
                    {"tool": "beta", "participation": "include"},
                ],
            }
        ],
        "tools": [tool("alpha", "beta"), tool("beta", "gamma")],
    }
    ir = compile_project(doc)
    obs = {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in ir.tools
    }
    state = ContextState.open("ctx", disclose(ir, "o", obs), T0)
    assert decide(ir, state, Call(tool="beta", call_id="c", arguments={}), T0).tool == "beta"
    assert decide(ir, state, Call(tool="gamma", call_id="c", arguments={}), T0).tool == "beta"

"""Focused unit tests: every reason code ``disclose`` and ``decide`` can give, on small
hand-written projects, with the explanation pointers; and ``run_tests``.

The last test pins a former disagreement with ``engine.md`` (error order and key order).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import policy
from compiler import compile_project
from policy import ALLOW, DENY, DUPLICATE, Call, ContextState, Decision, Project, decide, disclose
from policy.engine.state import APPROVAL_TTL_MS, CONTEXT_TTL_MS, fingerprint
from policy.engine.testing import run_tests

T0 = 1_700_000_000_000


def tool(
    tool_id: str,
    effect: str = "read",
    properties: dict[str, Any] | None = None,
    required: tuple[str, ...] = (),
    description: str = "A tool.",
    **more: Any,
) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        parameters["required"] = list(required)
    return {
        "id": tool_id,
        "name": tool_id.replace("-", "_"),
        "version": "1.0.0",
        "description": description,
        "parameters": parameters,
        "effect": effect,
        **more,
    }


def include(tool_id: str, **more: Any) -> dict[str, Any]:
    return {"tool": tool_id, "participation": "include", **more}


def project(
    profiles: list[dict[str, Any]], tools: list[dict[str, Any]], **more: Any
) -> dict[str, Any]:
    return {
        "format": "seif.context-project.v1",
        "id": "units",
        "version": "1.0.0",
        "objectives": [{"id": p["id"], "profile": p["id"]} for p in profiles],
        "profiles": profiles,
        "tools": tools,
        **more,
    }


def ready(ir: Project, **overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
        for t in ir.tools
    }
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not None}


def tokens_of(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def tool_tokens(declared: dict[str, Any]) -> int:
    schema = {k: declared[k] for k in ("name", "description", "parameters")}
    return tokens_of(json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def opened(
    ir: Project,
    objective: str = "p",
    obs: dict[str, Any] | None = None,
    coords: dict[str, str] | None = None,
) -> ContextState:
    disclosure = disclose(ir, objective, ready(ir) if obs is None else obs, coords)
    assert disclosure.resolved, disclosure
    return ContextState.open("ctx", disclosure, T0, coordinates=coords)


def call(
    state: ContextState | None,
    ir: Project,
    tool_id: str,
    args: Any = None,
    call_id: str = "c1",
    approval: str | None = None,
    at: int = T0 + 1,
) -> Decision:
    return decide(
        ir,
        state,
        Call(
            tool=tool_id,
            call_id=call_id,
            arguments={} if args is None else args,
            approval_id=approval,
        ),
        at,
    )


def approve(
    state: ContextState,
    tool_id: str,
    args: Any,
    call_id: str = "c1",
    approval: str = "a1",
    at: int = T0,
) -> ContextState:
    return state.record_approval(
        approval, tool=tool_id, call_id=call_id, fingerprint=fingerprint(args), now=at
    )


def reason(decision: Decision) -> tuple[str, str | None]:
    return decision.outcome, decision.reason


# ------------------------------------------------------------------------------ disclosure

NOTES = tool(
    "read-note",
    properties={
        "ref": {"type": "string", "maxLength": 8},
        "depth": {"type": "integer", "minimum": 0, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    required=("ref",),
)
SAVE = tool("save-note", "write", properties={"ref": {"type": "string"}}, required=("ref",))
SEARCH = tool("search", properties={"q": {"type": "string"}})
ADMIN = tool("admin")


def test_unknown_objective() -> None:
    ir = compile_project(project([{"id": "p", "toolRules": [include("search")]}], [SEARCH]))
    d = disclose(ir, "nope", ready(ir))
    assert (d.status, d.reason) == ("BLOCKED", "OBJECTIVE_UNKNOWN")
    assert d.tools == () and d.messages == () and d.tool_ids == frozenset()


def test_required_tools_unavailable_or_incompatible_block_with_each_cause() -> None:
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "toolRules": [
                        include("search"),
                        include("read-note", required=True),
                        include("save-note", required=True),
                    ],
                }
            ],
            [NOTES, SAVE, SEARCH],
        )
    )
    stale = {"state": "READY", "version": "1.0.0", "contractDigest": "sha256:" + "0" * 64}
    d = disclose(ir, "p", ready(ir, **{"read-note": None, "save-note": stale}))
    assert (d.status, d.reason) == ("BLOCKED", "RESOLUTION_BLOCKED")
    assert [(c.id, c.reason, c.explanation.pointer) for c in d.causes] == [
        ("read-note", "TOOL_UNAVAILABLE", "/profiles/0/toolRules/1"),
        ("save-note", "TOOL_INCOMPATIBLE", "/profiles/0/toolRules/2"),
    ]
    assert d.tools == () and d.tool_ids == frozenset()
    assert call(ContextState.open("ctx", d, T0), ir, "search").reason == "TOOL_NOT_DISCLOSED"


def test_optional_tools_unavailable_or_incompatible_are_omitted() -> None:
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "toolRules": [
                        include("search"),
                        include("read-note"),
                        include("save-note"),
                        include("admin"),
                    ],
                }
            ],
            [NOTES, SAVE, SEARCH, ADMIN],
        )
    )
    other_version = {**ready(ir)["read-note"], "version": "1.0.1"}
    d = disclose(
        ir,
        "p",
        ready(ir, search={"state": "UNAVAILABLE"}, admin=None, **{"read-note": other_version}),
    )
    assert d.status == "RESOLVED"
    assert [t.id for t in d.tools] == ["save-note"]
    assert [(o.id, o.reason, o.explanation.pointer) for o in d.omitted] == [
        ("search", "TOOL_UNAVAILABLE", "/profiles/0/toolRules/0"),
        ("read-note", "TOOL_INCOMPATIBLE", "/profiles/0/toolRules/1"),
        ("admin", "TOOL_UNAVAILABLE", "/profiles/0/toolRules/3"),
    ]
    assert d.contracts() == [
        {
            "id": "save-note",
            "name": "save_note",
            "version": "1.0.0",
            "contractDigest": ir.tools[1].contract_digest,
            "effect": "write",
            "approval": "required",
            "maxCalls": 1,
        }
    ]


def test_tools_are_disclosed_in_rule_order_with_model_facing_schemas() -> None:
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "toolRules": [
                        include("search"),
                        {"tool": "save-note", "participation": "exclude"},
                        include("read-note"),
                    ],
                }
            ],
            [NOTES, SAVE, SEARCH, ADMIN],
        )
    )
    d = disclose(ir, "p", ready(ir))
    assert [t.id for t in d.tools] == ["search", "read-note"]
    assert d.to_json()["tools"][0] == {
        "name": "search",
        "description": "A tool.",
        "parameters": SEARCH["parameters"],
    }
    assert d.omitted == ()


def test_a_required_message_that_does_not_fit_blocks() -> None:
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "tokenCeiling": 10,
                    "context": [
                        {"id": "small", "role": "system", "text": "x" * 8},
                        {"id": "big", "role": "system", "text": "x" * 41},
                    ],
                }
            ],
            [],
        )
    )
    d = disclose(ir, "p", {})
    assert (d.status, d.reason) == ("BLOCKED", "RESOLUTION_BLOCKED")
    assert [(c.kind, c.id, c.reason, c.explanation.pointer) for c in d.causes] == [
        ("message", "big", "TOKEN_BUDGET_EXCEEDED", "/profiles/0/context/1")
    ]
    assert d.messages == () and d.tokens.total == 0 and d.tokens.ceiling == 10


def test_a_required_tool_that_does_not_fit_blocks() -> None:
    ceiling = tool_tokens(SEARCH) + tool_tokens(NOTES) - 1
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "tokenCeiling": ceiling,
                    "toolRules": [
                        include("search", required=True),
                        include("read-note", required=True),
                    ],
                }
            ],
            [NOTES, SEARCH],
        )
    )
    d = disclose(ir, "p", ready(ir))
    assert d.status == "BLOCKED"
    assert [(c.id, c.reason, c.explanation.pointer) for c in d.causes] == [
        ("read-note", "TOKEN_BUDGET_EXCEEDED", "/profiles/0/toolRules/1")
    ]


def test_budget_admits_required_then_optional_items_greedily() -> None:
    required_text, optional_big, optional_small = "r" * 40, "b" * 400, "s" * 8
    ceiling = tokens_of(required_text) + tool_tokens(NOTES) + 2 + tool_tokens(ADMIN)
    assert tool_tokens(SEARCH) > tool_tokens(ADMIN)
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "tokenCeiling": ceiling,
                    "context": [
                        {"id": "big", "role": "user", "text": optional_big, "required": False},
                        {"id": "role", "role": "system", "text": required_text},
                        {"id": "small", "role": "user", "text": optional_small, "required": False},
                    ],
                    "toolRules": [
                        include("search"),
                        include("admin"),
                        include("read-note", required=True),
                    ],
                }
            ],
            [NOTES, SEARCH, ADMIN],
        )
    )
    d = disclose(ir, "p", ready(ir))
    assert d.status == "RESOLVED"
    # the big message and the search tool do not fit; later, smaller items still do
    assert [m.id for m in d.messages] == ["role", "small"]
    assert [t.id for t in d.tools] == ["admin", "read-note"]
    assert sorted((o.kind, o.id, o.reason, o.explanation.pointer) for o in d.omitted) == [
        ("message", "big", "TOKEN_BUDGET_EXCEEDED", "/profiles/0/context/0"),
        ("tool", "search", "TOKEN_BUDGET_EXCEEDED", "/profiles/0/toolRules/0"),
    ]
    used = tokens_of(required_text) + tokens_of(optional_small)
    tools_used = tool_tokens(ADMIN) + tool_tokens(NOTES)
    assert d.tokens.to_json() == {
        "messages": used,
        "tools": tools_used,
        "total": ceiling,
        "ceiling": ceiling,
        "estimated": True,
    }


def test_budget_admits_required_tools_before_optional_messages() -> None:
    text = "m" * 40
    ceiling = tool_tokens(SEARCH) + tokens_of(text) - 1
    ir = compile_project(
        project(
            [
                {
                    "id": "p",
                    "tokenCeiling": ceiling,
                    "context": [{"id": "hint", "role": "user", "text": text, "required": False}],
                    "toolRules": [include("search", required=True)],
                }
            ],
            [SEARCH],
        )
    )
    d = disclose(ir, "p", ready(ir))
    assert d.status == "RESOLVED" and [t.id for t in d.tools] == ["search"]
    assert [(o.kind, o.id, o.reason) for o in d.omitted] == [
        ("message", "hint", "TOKEN_BUDGET_EXCEEDED")
    ]
    assert d.tokens.messages == 0 and d.tokens.tools == tool_tokens(SEARCH)


def test_a_rule_whose_when_is_false_omits_the_tool_and_never_blocks() -> None:
    rules = [
        include("search", when="context.environment != 'production'"),
        include("read-note", required=True, when="context.consumer == 'trial'"),
    ]
    ir = compile_project(project([{"id": "p", "toolRules": rules}], [NOTES, SEARCH]))
    d = disclose(ir, "p", ready(ir), {"environment": "production"})
    assert d.status == "RESOLVED" and d.tools == ()
    assert [(o.id, o.reason, o.explanation.pointer) for o in d.omitted] == [
        ("search", "CONDITION_NOT_MET", "/profiles/0/toolRules/0"),
        ("read-note", "CONDITION_NOT_MET", "/profiles/0/toolRules/1"),
    ]
    d = disclose(ir, "p", ready(ir), {"environment": "staging", "consumer": "trial"})
    assert [t.id for t in d.tools] == ["search", "read-note"]
    assert (
        call(
            ContextState.open("x", disclose(ir, "p", ready(ir), {"environment": "production"}), T0),
            ir,
            "search",
        ).reason
        == "TOOL_NOT_DISCLOSED"
    )


def test_a_rule_whose_when_fails_to_evaluate_fails_closed() -> None:
    """A string plus an integer has no overload: the tool is not disclosed (CONDITION_ERROR),
    and a required one blocks the resolution."""
    broken = "context.consumer + 1 == 2"
    optional = compile_project(
        project([{"id": "p", "toolRules": [include("search", when=broken)]}], [SEARCH])
    )
    d = disclose(optional, "p", ready(optional))
    assert d.status == "RESOLVED" and d.tools == ()
    assert [(o.id, o.reason) for o in d.omitted] == [("search", "CONDITION_ERROR")]
    required = compile_project(
        project(
            [{"id": "p", "toolRules": [include("search", when=broken, required=True)]}], [SEARCH]
        )
    )
    d = disclose(required, "p", ready(required))
    assert (d.status, d.reason) == ("BLOCKED", "RESOLUTION_BLOCKED")
    assert [(c.id, c.reason, c.explanation.pointer) for c in d.causes] == [
        ("search", "CONDITION_ERROR", "/profiles/0/toolRules/0")
    ]


def test_omitted_tools_are_listed_in_declared_order() -> None:
    """engine.md, Disclosure 5: 'Order is deterministic: declared order' (budget omissions are
    not listed after availability omissions)."""
    big = tool("big", description="x" * 400)
    ir = compile_project(
        project(
            [{"id": "p", "tokenCeiling": 60, "toolRules": [include("big"), include("search")]}],
            [big, SEARCH],
        )
    )
    d = disclose(ir, "p", ready(ir, search=None))
    assert [(o.id, o.reason) for o in d.omitted] == [
        ("big", "TOKEN_BUDGET_EXCEEDED"),
        ("search", "TOOL_UNAVAILABLE"),
    ]


# ------------------------------------------------------------------------------ decisions

RULES = [
    include(
        "read-note",
        conditions=[
            {"when": "has(args.depth) && args.depth > 2", "then": "DENY", "reason": "too deep"},
            {"when": "args.ref == 'secret'", "then": "REQUIRE_APPROVAL", "reason": "secret refs"},
            {"when": "size(args.tags) > 1", "then": "DENY"},
        ],
    ),
    {"tool": "save-note", "participation": "exclude"},
    include(
        "search",
        conditions=[
            {
                "when": "call.count >= 1 && context.consumer == 'trial'",
                "then": "DENY",
                "reason": "trial accounts search once",
            }
        ],
    ),
    include("writer-tool"),
]
WRITER = tool("writer-tool", "write", properties={"n": {"type": "number"}})
DECIDING = compile_project(
    project([{"id": "p", "toolRules": RULES}], [NOTES, SAVE, SEARCH, ADMIN, WRITER])
)
STATE = opened(DECIDING, coords={"consumer": "trial"})


def test_context_unknown_and_expired_at_the_exact_instant() -> None:
    assert reason(call(None, DECIDING, "search")) == (DENY, "CONTEXT_UNKNOWN")
    assert STATE.expires_at == T0 + CONTEXT_TTL_MS
    assert reason(call(STATE, DECIDING, "search", at=STATE.expires_at - 1)) == (ALLOW, None)
    expired = call(STATE, DECIDING, "search", at=STATE.expires_at)
    assert reason(expired) == (DENY, "CONTEXT_EXPIRED")
    assert reason(call(STATE, DECIDING, "search", at=STATE.expires_at + 1)) == reason(expired)


def test_tool_not_disclosed_names_the_rule() -> None:
    excluded = call(STATE, DECIDING, "save-note", {"ref": "a"})
    assert reason(excluded) == (DENY, "TOOL_NOT_DISCLOSED")
    assert excluded.explanation is not None
    assert (excluded.explanation.pointer, excluded.explanation.rule) == (
        "/profiles/0/toolRules/1",
        1,
    )
    unmentioned = call(STATE, DECIDING, "admin")
    assert reason(unmentioned) == (DENY, "TOOL_NOT_DISCLOSED")
    assert unmentioned.explanation is not None
    assert unmentioned.explanation.pointer == "/profiles/0/toolRules"
    unknown = call(STATE, DECIDING, "no-such-tool")
    assert reason(unknown) == (DENY, "TOOL_NOT_DISCLOSED")
    omitted = opened(DECIDING, obs=ready(DECIDING, search=None))
    why = call(omitted, DECIDING, "search").explanation
    assert why is not None and why.pointer == "/profiles/0/toolRules/2"
    assert "TOOL_UNAVAILABLE" in why.detail


def test_duplicate_and_conflict() -> None:
    first = call(STATE, DECIDING, "read-note", {"ref": "a", "depth": 1, "tags": []})
    assert reason(first) == (ALLOW, None) and first.fingerprint is not None
    state = STATE.record_dispatch("c1", "read-note", first.fingerprint)
    again = call(state, DECIDING, "read-note", {"tags": [], "depth": 1.0, "ref": "a"})
    assert (again.outcome, again.reason) == (DUPLICATE, "DUPLICATE_CALL")
    assert reason(call(state, DECIDING, "read-note", {"ref": "b"})) == (DENY, "CALL_CONFLICT")
    assert reason(call(state, DECIDING, "search", {"ref": "a", "depth": 1})) == (
        DENY,
        "CALL_CONFLICT",
    )
    # the callId is checked before the arguments are validated
    assert reason(call(state, DECIDING, "read-note", {"ref": "a", "bad": 1})) == (
        DENY,
        "CALL_CONFLICT",
    )


def test_arguments_invalid_lists_pointers_and_keywords() -> None:
    decision = call(
        STATE,
        DECIDING,
        "read-note",
        {"depth": 9, "tags": ["a", 1], "ref": "0123456789", "zz": True},
    )
    assert reason(decision) == (DENY, "ARGUMENTS_INVALID")
    assert decision.explanation is not None
    assert decision.explanation.pointer == "/tools/0/parameters"
    assert sorted((e.pointer, e.keyword) for e in decision.errors) == [
        ("/depth", "maximum"),
        ("/ref", "maxLength"),
        ("/tags/1", "type"),
        ("/zz", "additionalProperties"),
    ]
    missing = call(STATE, DECIDING, "read-note", {"depth": 1})
    assert [(e.pointer, e.keyword) for e in missing.errors] == [("", "required")]
    not_an_object = call(STATE, DECIDING, "read-note", ["ref"])
    assert [(e.pointer, e.keyword) for e in not_an_object.errors] == [("", "type")]
    assert {"pointer", "keyword", "message"} <= set(decision.to_json()["errors"][0])


def test_condition_denied_names_the_condition() -> None:
    decision = call(STATE, DECIDING, "read-note", {"ref": "a", "depth": 3})
    assert reason(decision) == (DENY, "CONDITION_DENIED")
    assert decision.explanation is not None
    assert decision.explanation.pointer == "/profiles/0/toolRules/0/conditions/0"
    assert (decision.explanation.rule, decision.explanation.condition) == (0, 0)
    assert decision.explanation.detail == "too deep"
    later = call(STATE, DECIDING, "read-note", {"ref": "a", "tags": ["x", "y"]})
    assert reason(later) == (DENY, "CONDITION_DENIED")
    assert later.explanation is not None
    assert later.explanation.pointer == "/profiles/0/toolRules/0/conditions/2"


def test_condition_error_fails_closed_and_names_the_condition() -> None:
    decision = call(STATE, DECIDING, "read-note", {"ref": "a"})  # `size(args.tags)`: no tags
    assert reason(decision) == (DENY, "CONDITION_ERROR")
    assert decision.explanation is not None
    assert decision.explanation.pointer == "/profiles/0/toolRules/0/conditions/2"


def test_conditions_see_the_call_count_and_the_context() -> None:
    first = call(STATE, DECIDING, "search")
    assert reason(first) == (ALLOW, None) and first.fingerprint is not None
    assert first.explanation is not None
    assert first.explanation.pointer == "/profiles/0/toolRules/2"  # the rule that allowed it
    state = STATE.record_dispatch("c1", "search", first.fingerprint)
    second = call(state, DECIDING, "search", call_id="c2")
    assert reason(second) == (DENY, "CONDITION_DENIED")
    assert second.explanation is not None
    assert second.explanation.pointer == "/profiles/0/toolRules/2/conditions/0"
    other = opened(DECIDING, coords={"consumer": "ops"}).record_dispatch("c1", "search", "f")
    assert reason(call(other, DECIDING, "search", call_id="c2")) == (ALLOW, None)


def test_require_approval_condition_on_a_read_tool() -> None:
    args = {"ref": "secret", "tags": []}
    decision = call(STATE, DECIDING, "read-note", args)
    assert reason(decision) == (DENY, "APPROVAL_REQUIRED")
    assert decision.approval_required
    assert decision.explanation is not None
    assert decision.explanation.pointer == "/profiles/0/toolRules/0/conditions/1"
    state = approve(STATE, "read-note", args)
    allowed = call(state, DECIDING, "read-note", args, approval="a1")
    assert reason(allowed) == (ALLOW, None) and allowed.approval_required
    plain = call(STATE, DECIDING, "read-note", {"ref": "open", "tags": []})
    assert reason(plain) == (ALLOW, None) and not plain.approval_required


def test_call_limit_counts_dispatched_calls_only() -> None:
    ir = compile_project(
        project([{"id": "p", "toolRules": [include("search")]}], [{**SEARCH, "maxCalls": 2}])
    )
    state = opened(ir)
    for k in range(2):
        assert reason(call(state, ir, "search", {"bad": k}, call_id=f"bad-{k}")) == (
            DENY,
            "ARGUMENTS_INVALID",
        )
        ok = call(state, ir, "search", {"q": str(k)}, call_id=f"ok-{k}")
        assert reason(ok) == (ALLOW, None) and ok.fingerprint is not None
        state = state.record_dispatch(f"ok-{k}", "search", ok.fingerprint)
    over = call(state, ir, "search", {"q": "x"}, call_id="ok-3")
    assert reason(over) == (DENY, "CALL_LIMIT_EXCEEDED")
    assert over.explanation is not None and over.explanation.pointer == "/tools/0/maxCalls"


def test_limit_is_checked_after_conditions_and_before_approval() -> None:
    args = {"n": 1}
    first = approve(STATE, "writer-tool", args)
    allowed = call(first, DECIDING, "writer-tool", args, approval="a1")
    assert reason(allowed) == (ALLOW, None) and allowed.fingerprint is not None
    state = first.record_dispatch("c1", "writer-tool", allowed.fingerprint)
    assert reason(call(state, DECIDING, "writer-tool", args, call_id="c2")) == (
        DENY,
        "CALL_LIMIT_EXCEEDED",
    )
    state = state.record_dispatch("x", "read-note", "f").record_dispatch("y", "read-note", "g")
    state = state.record_dispatch("z", "read-note", "h")
    assert reason(call(state, DECIDING, "read-note", {"ref": "a", "depth": 4}, "c9")) == (
        DENY,
        "CONDITION_DENIED",
    )


def test_approval_required_invalid_and_expired() -> None:
    args = {"n": 2}
    missing = call(STATE, DECIDING, "writer-tool", args)
    assert reason(missing) == (DENY, "APPROVAL_REQUIRED") and missing.approval_required
    assert missing.explanation is not None and missing.explanation.pointer == "/tools/4"
    assert reason(call(STATE, DECIDING, "writer-tool", args, approval="a1")) == (
        DENY,
        "APPROVAL_INVALID",
    )
    for bound in (
        approve(STATE, "writer-tool", args, call_id="c2"),
        approve(STATE, "writer-tool", {"n": 2.5}),
        approve(STATE, "read-note", args),
    ):
        assert reason(call(bound, DECIDING, "writer-tool", args, approval="a1")) == (
            DENY,
            "APPROVAL_INVALID",
        )
    granted = approve(STATE, "writer-tool", {"n": 2.0}, at=T0 + 5)
    deadline = T0 + 5 + APPROVAL_TTL_MS
    assert reason(call(granted, DECIDING, "writer-tool", args, approval="a1", at=deadline - 1)) == (
        ALLOW,
        None,
    )
    assert reason(call(granted, DECIDING, "writer-tool", args, approval="a1", at=deadline)) == (
        DENY,
        "APPROVAL_EXPIRED",
    )


def test_a_denied_call_leaves_no_trace_and_can_be_retried() -> None:
    args = {"n": 3}
    denied = call(STATE, DECIDING, "writer-tool", args)
    assert reason(denied) == (DENY, "APPROVAL_REQUIRED")
    assert STATE.dispatched == {} and STATE.counts == {}
    retried = call(
        approve(STATE, "writer-tool", args), DECIDING, "writer-tool", args, approval="a1"
    )
    assert reason(retried) == (ALLOW, None)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_arguments_are_denied_not_raised(value: float) -> None:
    """NaN and infinities are never valid (project-format.md), and the engine reports problems
    inside its result: a denial, also when the callId was dispatched before."""
    decision = call(STATE, DECIDING, "writer-tool", {"n": value})
    assert reason(decision) == (DENY, "ARGUMENTS_INVALID")
    assert [(e.pointer, e.keyword) for e in decision.errors] == [("/n", "type")]
    state = STATE.record_dispatch("c1", "writer-tool", fingerprint({"n": 1}))
    assert reason(call(state, DECIDING, "writer-tool", {"n": value})) == (
        DENY,
        "ARGUMENTS_INVALID",
    )


# ------------------------------------------------------------------------------ run_tests


def test_project_tests_report_failures_and_separate_figures() -> None:
    doc = project(
        [
            {
                "id": "p",
                "context": [{"id": "role", "role": "system", "text": "Read notes."}],
                "toolRules": [
                    include("read-note", required=True),
                    {"tool": "save-note", "participation": "exclude"},
                    include("writer-tool"),
                ],
            }
        ],
        [NOTES, SAVE, WRITER],
        toolFixtures={"read-note": {"state": "UNAVAILABLE"}},
        tests=[
            {
                "id": "current-fixtures",
                "objective": "p",
                "fixtures": "current",
                "expect": {
                    "context": {"include": ["role"]},
                    "tools": {
                        "include": ["read-note", "writer-tool"],
                        "exclude": ["save-note"],
                        "calls": [
                            {
                                "tool": "writer-tool",
                                "arguments": {"n": 1},
                                "expect": "DENY",
                                "reason": "APPROVAL_REQUIRED",
                            },
                            {
                                "tool": "writer-tool",
                                "arguments": {"n": 1},
                                "approved": True,
                                "expect": "ALLOW",
                            },
                            {
                                "tool": "writer-tool",
                                "arguments": {"n": 1},
                                "approved": True,
                                "expect": "DENY",
                                "reason": "CALL_LIMIT_EXCEEDED",
                            },
                            {
                                "tool": "save-note",
                                "arguments": {"ref": "a"},
                                "approved": True,
                                "expect": "ALLOW",
                            },
                        ],
                    },
                },
            },
            {
                "id": "project-fixtures",
                "objective": "p",
                "expect": {
                    "resolution": "BLOCKED",
                    "causes": ["TOOL_UNAVAILABLE"],
                    "context": {"include": ["role"]},
                },
            },
            {
                "id": "expects-resolved",
                "objective": "p",
                "expect": {"tools": {"include": ["read-note"]}},
            },
        ],
    )
    report = run_tests(compile_project(doc))
    assert not report.passed
    first, second, third = report.results
    broken = [a for a in first.assertions if not a.passed]
    assert [(a.expected, a.actual, a.pointer) for a in broken] == [
        ("ALLOW", "DENY TOOL_NOT_DISCLOSED", "/tests/0/expect/tools/calls/3")
    ]
    assert [(a.subject, a.passed) for a in second.assertions] == [
        ("resolution", True),
        ("cause TOOL_UNAVAILABLE", True),
        ("include message role", False),
    ]
    assert second.assertions[2].actual == "not disclosed"  # a blocked resolution shows nothing
    resolved = third.assertions[0]
    assert (resolved.passed, resolved.expected) == (False, "RESOLVED")
    assert resolved.actual == {
        "resolution": "BLOCKED",
        "causes": ["RESOLUTION_BLOCKED", "TOOL_UNAVAILABLE"],
    }
    figures = report.to_json()
    assert figures["context"] == {"passed": 1, "total": 2}
    assert figures["tools"] == {"passed": 9, "total": 12}
    assert str(report.figure("context")) == "1/2"


def test_project_tests_of_a_tool_free_project_count_resolution_as_context() -> None:
    doc = project(
        [{"id": "p", "context": [{"id": "role", "role": "system", "text": "Hi."}]}],
        [],
        tests=[
            {
                "id": "t",
                "objective": "p",
                "expect": {"context": {"include": ["role"], "exclude": []}},
            }
        ],
    )
    del doc["tools"]
    report = run_tests(compile_project(doc))
    assert report.passed
    assert report.to_json()["context"] == {"passed": 2, "total": 2}
    assert report.to_json()["tools"] == {"passed": 0, "total": 0}


# ------------------------------------------------------------------- former disagreements


def test_an_invalid_call_gets_the_same_decision_whatever_its_key_order() -> None:
    one = call(STATE, DECIDING, "search", {"y": 1, "z": 2})
    other = call(STATE, DECIDING, "search", {"z": 2, "y": 1})
    assert one == other


# ------------------------------------------------------------------------------ the principal

SUPPORT = "has(principal.claims.groups) && 'support' in principal.claims.groups"


def test_rules_and_conditions_read_the_principal_given() -> None:
    """``principal`` is an argument of ``disclose`` (who resolves) and of ``decide`` (who
    calls); none given is no one known: every field null, no claims."""
    rules = [
        include("search", when=SUPPORT),
        include(
            "read-note",
            conditions=[
                {"when": "principal.clientId != 'desk'", "then": "DENY", "reason": "desk only"},
                {"when": "principal.subject == 'ann'", "then": "REQUIRE_APPROVAL"},
            ],
        ),
    ]
    ir = compile_project(project([{"id": "p", "toolRules": rules}], [NOTES, SEARCH]))
    support = {
        "issuer": "corp",
        "subject": "bob",
        "clientId": "desk",
        "claims": {"groups": ["support"]},
    }
    assert [t.id for t in disclose(ir, "p", ready(ir), principal=support).tools] == [
        "search",
        "read-note",
    ]
    nobody = disclose(ir, "p", ready(ir))
    assert [(o.id, o.reason) for o in nobody.omitted] == [("search", "CONDITION_NOT_MET")]
    learner = {**support, "claims": {"groups": ("learners",)}}  # a tuple is a list
    assert [t.id for t in disclose(ir, "p", ready(ir), principal=learner).tools] == ["read-note"]
    state = ContextState.open("ctx", nobody, T0)
    note = Call(tool="read-note", call_id="c1", arguments={"ref": "a"})
    assert reason(decide(ir, state, note, T0, support)) == (ALLOW, None)
    assert reason(decide(ir, state, note, T0)) == (DENY, "CONDITION_DENIED")
    assert reason(decide(ir, state, note, T0, policy.static_principal("desk"))) == (ALLOW, None)
    ann = {**support, "subject": "ann"}
    assert reason(decide(ir, state, note, T0, ann)) == (DENY, "APPROVAL_REQUIRED")


def test_principal_value_is_every_field_frozen() -> None:
    value = policy.principal_value({"subject": "s", "claims": {"groups": ["a"], "n": 1}})
    assert dict(value) == {
        "issuer": None,
        "subject": "s",
        "clientId": None,
        "claims": {"groups": ("a",), "n": 1},
    }
    assert policy.principal_value(value) is value  # made once, passed as it is
    assert dict(policy.principal_value()) == {
        "issuer": None,
        "subject": None,
        "clientId": None,
        "claims": {},
    }
    assert policy.static_principal("app")["clientId"] == "app"
    with pytest.raises(TypeError):
        value["subject"] = "other"  # type: ignore[index]
    hash(value)  # a cache key (the runtime keeps resolutions by it)


def test_a_test_s_principal_is_who_resolves_and_calls() -> None:
    rules = [
        include(
            "search",
            when=SUPPORT,
            conditions=[
                {"when": "principal.issuer != 'corp'", "then": "DENY", "reason": "corp only"},
            ],
        )
    ]
    tests = [
        {
            "id": "support",
            "objective": "p",
            "principal": {"issuer": "corp", "claims": {"groups": ["support"]}},
            "expect": {
                "tools": {
                    "include": ["search"],
                    "calls": [{"tool": "search", "arguments": {}, "expect": "ALLOW"}],
                }
            },
        },
        {
            "id": "support-elsewhere",
            "objective": "p",
            "principal": {"issuer": "partner", "claims": {"groups": ["support"]}},
            "expect": {
                "tools": {
                    "calls": [
                        {
                            "tool": "search",
                            "arguments": {},
                            "expect": "DENY",
                            "reason": "CONDITION_DENIED",
                        }
                    ]
                }
            },
        },
        {"id": "nobody", "objective": "p", "expect": {"tools": {"exclude": ["search"]}}},
    ]
    doc = project(
        [{"id": "p", "toolRules": rules}],
        [SEARCH],
        tests=tests,
        toolFixtures={
            "search": {
                "state": "READY",
                "version": "1.0.0",
                "contractDigest": policy.contract_digest(SEARCH),
            }
        },
    )
    report = run_tests(compile_project(doc))
    assert report.passed, report.failures()

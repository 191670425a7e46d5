"""Properties the engine keeps whatever the project: checked directly, without the model.

Tools a profile does not include are never disclosed nor callable; a call that needs approval is
allowed only with an exact, unexpired approval; unrelated state and key order change nothing;
decisions are deterministic and leave the state alone; limits count dispatched calls only;
expiry happens at the exact millisecond.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import compile_project
from policy import ALLOW, DENY, Call, ContextState, Decision, Project, decide, disclose
from policy.engine.state import APPROVAL_TTL_MS, CONTEXT_TTL_MS, fingerprint
from policy.json.value import EMPTY_MAP
from tests.support.strategies import (
    COORDINATES,
    all_ready,
    argument_pools,
    observations,
    projects,
    steps,
)

SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
SOME = settings(max_examples=120, deadline=None, suppress_health_check=SLOW)
T0 = 1_700_000_000_000


class Walk:
    """Drive the engine alone through a generated history; every decision is kept with the
    state and the time it was made at."""

    def __init__(self, ir: Project, state: ContextState, pools: dict[str, list[Any]]) -> None:
        self.ir, self.state, self.pools, self.now = ir, state, pools, T0
        self.seen: list[tuple[ContextState, Call, Decision, int]] = []

    def args(self, tool: str, index: int) -> Any:
        pool = self.pools.get(tool, [{}])
        return pool[index % len(pool)]

    def approve(self, approval_id: str, tool: str, call_id: str, args: Any, at: int) -> None:
        self.state = self.state.record_approval(
            approval_id, tool=tool, call_id=call_id, fingerprint=fingerprint(args), now=at
        )

    def step(self, op: tuple[Any, ...]) -> None:
        """Run one op of :func:`strategies.steps`; the clock only moves forward (named advances
        other than to the context's expiry, or 1 ms before it, are ignored here)."""
        if op[0] == "advance":
            expiry = self.state.expires_at
            target = {"context": expiry, "context-1": expiry - 1}.get(op[1], self.now)
            self.now = max(self.now + (op[1] if isinstance(op[1], int) else 0), target)
            return
        if op[0] == "approve":
            _, approval_id, tool, call_id, index = op
            self.approve(approval_id, tool, call_id, self.args(tool, index), self.now)
            return
        _, tool, call_id, index, how = op
        args = self.args(tool, index)
        bound = {
            "exact": (tool, call_id, args, self.now),
            "expired": (tool, call_id, args, self.now - APPROVAL_TTL_MS),
            "edge": (tool, call_id, args, self.now - APPROVAL_TTL_MS + 1),
            "args": (tool, call_id, self.args(tool, index + 1), self.now),
            "callId": (tool, call_id + "x", args, self.now),
            "tool": ("other", call_id, args, self.now),
        }.get(how)
        if bound is not None:
            self.approve(how, *bound)
        call = Call(tool=tool, call_id=call_id, arguments=args, approval_id=how)
        decision = decide(self.ir, self.state, call, self.now)
        self.seen.append((self.state, call, decision, self.now))
        if decision.outcome == ALLOW:
            assert decision.fingerprint is not None
            self.state = self.state.record_dispatch(call_id, tool, decision.fingerprint)


@st.composite
def walks(draw: st.DrawFn) -> Walk:
    doc = draw(projects(tight=False))
    ir = compile_project(doc)
    objective = draw(st.sampled_from([o["id"] for o in doc["objectives"]]))
    disclosure = disclose(ir, objective, all_ready(doc), draw(COORDINATES))
    walk = Walk(ir, ContextState.open("ctx", disclosure, T0), draw(argument_pools(doc)))
    for op in draw(steps(doc, [t.id for t in disclosure.tools])):
        walk.step(op)
    return walk


def reordered(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


@SOME
@given(doc=projects(), data=st.data())
def test_tools_a_profile_does_not_include_are_never_disclosed_nor_callable(
    doc: dict[str, Any], data: st.DataObject
) -> None:
    ir = compile_project(doc)
    pools = data.draw(argument_pools(doc))
    obs = data.draw(st.one_of(observations(doc), st.just(all_ready(doc))))
    for objective, profile in zip(doc["objectives"], doc["profiles"], strict=True):
        included = {r["tool"] for r in profile["toolRules"] if r["participation"] == "include"}
        hidden = [t["id"] for t in doc["tools"] if t["id"] not in included]
        disclosure = disclose(ir, objective["id"], obs, data.draw(COORDINATES))
        assert not set(hidden) & disclosure.tool_ids
        assert not set(hidden) & {t.id for t in disclosure.tools}
        state = ContextState.open("ctx", disclosure, T0)
        for tool in hidden:
            for args in pools[tool]:
                state = state.record_approval(
                    "ok", tool=tool, call_id="c1", fingerprint=fingerprint(args), now=T0
                )
                call = Call(tool=tool, call_id="c1", arguments=args, approval_id="ok")
                decision = decide(ir, state, call, T0 + 1)
                assert (decision.outcome, decision.reason) == (DENY, "TOOL_NOT_DISCLOSED")


@SOME
@given(walk=walks())
def test_calls_needing_approval_are_allowed_only_with_an_exact_unexpired_approval(
    walk: Walk,
) -> None:
    for state, call, decision, now in walk.seen:
        tool = walk.ir.tool(call.tool)
        if decision.outcome != ALLOW or tool is None:
            continue
        if tool.effect == "write" or tool.approval == "required" or decision.approval_required:
            approval = state.approvals[call.approval_id]
            assert (approval.tool, approval.call_id) == (call.tool, call.call_id)
            assert approval.fingerprint == fingerprint(call.arguments)
            assert now < approval.expires_at


@SOME
@given(walk=walks())
def test_decisions_are_deterministic_and_leave_the_state_alone(walk: Walk) -> None:
    for state, call, decision, now in walk.seen:
        before = replace(state)
        again = decide(walk.ir, state, call, now)
        assert again == decision
        assert again.to_json() == decision.to_json()
        assert state == before
        assert dict(state.dispatched) == dict(before.dispatched)
        assert dict(state.counts) == dict(before.counts)


@SOME
@given(walk=walks())
def test_call_limits_count_dispatched_calls_only(walk: Walk) -> None:
    allowed: dict[str, int] = {}
    for state, call, decision, _ in walk.seen:
        assert dict(state.counts) == {k: v for k, v in allowed.items() if v}
        if decision.outcome == ALLOW:
            allowed[call.tool] = allowed.get(call.tool, 0) + 1
            tool = walk.ir.tool(call.tool)
            assert tool is not None and allowed[call.tool] <= tool.max_calls
        if decision.reason == "CALL_LIMIT_EXCEEDED":
            tool = walk.ir.tool(call.tool)
            assert tool is not None and state.counts.get(call.tool, 0) == tool.max_calls
    assert dict(walk.state.counts) == {k: v for k, v in allowed.items() if v}


@SOME
@given(walk=walks(), data=st.data())
def test_unrelated_state_does_not_change_a_decision(walk: Walk, data: st.DataObject) -> None:
    for state, call, decision, now in walk.seen[-3:]:
        extra = state
        for tool in walk.ir.tools:
            if tool.id == call.tool:
                continue
            room = tool.max_calls - extra.counts.get(tool.id, 0)
            for k in range(data.draw(st.integers(0, max(room, 0)))):
                extra = extra.record_dispatch(f"other-{tool.id}-{k}", tool.id, fingerprint({}))
        for k, tool in enumerate(
            data.draw(st.lists(st.sampled_from([t.id for t in walk.ir.tools]), max_size=3))
        ):
            extra = extra.record_approval(
                f"unrelated-{k}",
                tool=tool,
                call_id=call.call_id,
                fingerprint=fingerprint(call.arguments),
                now=now,
            )
        assert decide(walk.ir, extra, call, now) == decision


@SOME
@given(walk=walks())
def test_approvals_matter_only_for_tools_that_may_need_one(walk: Walk) -> None:
    """The runtime reads a context's approvals only for ``ir.approval_tools``: for any other
    tool, a state without approvals decides the same."""
    needing = {t.id for t in walk.ir.tools if t.approval == "required"}
    assert needing <= walk.ir.approval_tools
    for state, call, decision, now in walk.seen:
        if call.tool not in walk.ir.approval_tools:
            assert decide(walk.ir, replace(state, approvals=EMPTY_MAP), call, now) == decision


@SOME
@given(walk=walks())
def test_decisions_do_not_depend_on_argument_key_order(walk: Walk) -> None:
    """Byte for byte, ARGUMENTS_INVALID errors included."""
    for state, call, decision, now in walk.seen:
        turned = replace(call, arguments=reordered(call.arguments))
        assert decide(walk.ir, state, turned, now) == decision


@SOME
@given(doc=projects(), data=st.data())
def test_disclosure_does_not_depend_on_key_order(doc: dict[str, Any], data: st.DataObject) -> None:
    ir = compile_project(doc)
    obs, coords = data.draw(observations(doc)), data.draw(COORDINATES)
    for objective in doc["objectives"]:
        plain = disclose(ir, objective["id"], obs, coords)
        turned = disclose(ir, objective["id"], reordered(obs), reordered(coords))
        assert plain == turned
        assert plain.to_json() == turned.to_json()
        assert disclose(ir, objective["id"], obs, coords) == plain  # deterministic


SIMPLE = compile_project(
    {
        "format": "seif.context-project.v1",
        "id": "simple",
        "version": "1.0.0",
        "objectives": [{"id": "o", "profile": "p"}],
        "profiles": [
            {
                "id": "p",
                "toolRules": [
                    {"tool": "w", "participation": "include"},
                    {"tool": "r", "participation": "include"},
                ],
            }
        ],
        "tools": [
            {
                "id": "w",
                "name": "w",
                "version": "1.0.0",
                "description": "write",
                "effect": "write",
                "maxCalls": 20,
                "parameters": {"type": "object", "additionalProperties": True},
            },
            {
                "id": "r",
                "name": "r",
                "version": "1.0.0",
                "description": "read",
                "effect": "read",
                "maxCalls": 20,
                "parameters": {"type": "object", "additionalProperties": True},
            },
        ],
    }
)
READY = {
    t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
    for t in SIMPLE.tools
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([0.5, -2.25]) | st.text("ab"),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("xyz", max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


def floated(value: Any, flips: list[bool]) -> Any:
    """``value`` with some integers written as integer-valued floats."""
    if type(value) is int:
        return float(value) if (flips.pop() if flips else True) else value
    if isinstance(value, dict):
        return {k: floated(v, flips) for k, v in value.items()}
    if isinstance(value, list):
        return [floated(v, flips) for v in value]
    return value


@SOME
@given(
    args=st.dictionaries(st.text("nm", max_size=2), JSON, max_size=4),
    flips=st.lists(st.booleans()),
    start=st.integers(0, 2**41),
)
def test_integer_valued_floats_are_the_same_call(
    args: dict[str, Any], flips: list[bool], start: int
) -> None:
    other = reordered(floated(args, flips))
    state = ContextState.open("ctx", disclose(SIMPLE, "o", READY), start)
    state = state.record_approval(
        "a", tool="w", call_id="c", fingerprint=fingerprint(args), now=start
    )
    decision = decide(
        SIMPLE, state, Call(tool="w", call_id="c", arguments=other, approval_id="a"), start + 1
    )
    assert decision.outcome == ALLOW
    assert decision.fingerprint == fingerprint(args)
    state = state.record_dispatch("c", "w", fingerprint(args))
    again = decide(SIMPLE, state, Call(tool="w", call_id="c", arguments=other), start + 2)
    assert (again.outcome, again.reason) == ("DUPLICATE", "DUPLICATE_CALL")
    changed = {**args, "extra": 1.5}
    conflict = decide(SIMPLE, state, Call(tool="w", call_id="c", arguments=changed), start + 2)
    assert (conflict.outcome, conflict.reason) == (DENY, "CALL_CONFLICT")
    state2 = state.record_approval(
        "b", tool="w", call_id="d", fingerprint=fingerprint(args), now=start
    )
    wrong = decide(
        SIMPLE, state2, Call(tool="w", call_id="d", arguments=changed, approval_id="b"), start + 2
    )
    assert (wrong.outcome, wrong.reason) == (DENY, "APPROVAL_INVALID")


@SOME
@given(
    start=st.integers(0, 2**41),
    approved_after=st.integers(0, CONTEXT_TTL_MS - 1),
    shift=st.integers(-2, 2),
)
def test_expiry_happens_at_the_exact_millisecond(
    start: int, approved_after: int, shift: int
) -> None:
    state = ContextState.open("ctx", disclose(SIMPLE, "o", READY), start)
    assert state.expires_at == start + CONTEXT_TTL_MS
    read = Call(tool="r", call_id="c", arguments={})
    at = state.expires_at + shift
    expected = "CONTEXT_EXPIRED" if shift >= 0 else None
    assert decide(SIMPLE, state, read, at).reason == expected
    granted = start + approved_after
    state = state.record_approval(
        "a", tool="w", call_id="c", fingerprint=fingerprint({}), now=granted
    )
    write = Call(tool="w", call_id="c", arguments={}, approval_id="a")
    at = granted + APPROVAL_TTL_MS + shift
    decision = decide(SIMPLE, state, write, at)
    if at >= state.expires_at:
        assert decision.reason == "CONTEXT_EXPIRED"
    else:
        assert decision.reason == ("APPROVAL_EXPIRED" if shift >= 0 else None)
    aware = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=at, microseconds=999)
    assert decide(SIMPLE, state, write, aware) == decision

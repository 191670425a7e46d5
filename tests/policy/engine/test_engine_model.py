"""The engine agrees with the naive reference model on generated projects and histories.

Disclosure: status, reason, disclosed message ids, tool ids in order, omissions and causes (kind,
id, reason, pointer), token figures. Decisions: outcome, reason, and the pointer of the deciding
condition, over generated call histories (calls with or without approvals, approvals bound
exactly or to something else, clock advances to exactly the expiry instants) and in a rule-based
state machine that also resolves new contexts between calls.

Omissions and causes are compared in order: declared order (messages in context order, then
tools in rule order).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from compiler import compile_project
from policy import ALLOW, Call, ContextState, Disclosure, Project, decide, disclose
from tests.support import reference_model as model
from tests.support.strategies import (
    APPROVALS,
    CALL_IDS,
    COORDINATES,
    PRINCIPALS,
    all_ready,
    argument_pools,
    observations,
    projects,
    steps,
)

SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
PLAIN = (None, "a1", "a2", "a3")


def engine_view(d: Disclosure) -> dict[str, Any]:
    def rows(items: Any) -> list[tuple[str, str, str, str]]:
        return [(o.kind, o.id, o.reason, o.explanation.pointer) for o in items]

    assert d.tokens.estimated is True
    assert d.tokens.total == d.tokens.messages + d.tokens.tools
    return {
        "status": d.status,
        "reason": d.reason,
        "messages": [m.id for m in d.messages],
        "tools": [t.id for t in d.tools],
        "omitted": rows(d.omitted),
        "causes": rows(d.causes),
        "tokens": (d.tokens.messages, d.tokens.tools, d.tokens.ceiling),
    }


class Lockstep:
    """The engine and the model, driven through the same history at the same clock."""

    def __init__(self, doc: dict[str, Any], ir: Project, pools: dict[str, list[Any]]) -> None:
        self.doc, self.ir, self.pools = doc, ir, pools
        self.now = 1_700_000_000_000
        self.engine: ContextState | None = None
        self.model: dict[str, Any] | None = None
        self.approval_expiry = self.now
        self.fresh = 0
        self.decisions: list[str] = []
        self.last: tuple[str, str, int, str | None] | None = None
        self.disclosed: list[str] = []
        self.principal: dict[str, Any] | None = None
        """Who resolves, and makes the calls (a rule may change it between calls)."""

    def args(self, tool: str, index: int) -> Any:
        pool = self.pools.get(tool, [{}])
        return pool[index % len(pool)]

    def call_by_name(self, tool: str, call_id: str, index: int, approval_id: str | None) -> None:
        """Call the tool ``tool`` (an id) by its function name, with that id's arguments."""
        name = self.doc["tools"][self.position(tool)]["name"]
        self.pools.setdefault(name, self.pools.get(tool, [{}]))
        self.call(name, call_id, index, approval_id)

    def resolve(
        self,
        objective: str,
        obs: dict[str, Any],
        coords: dict[str, str],
        principal: dict[str, Any] | None = None,
    ) -> None:
        self.principal = principal
        d = disclose(self.ir, objective, obs, coords, principal)
        m = model.disclose(self.doc, objective, obs, coords, principal)
        assert engine_view(d) == m
        for tool in d.tools:
            assert tool.contract_digest == model.digest(self.doc["tools"][self.position(tool.id)])
        self.engine = self.model = None
        self.disclosed = [t.id for t in d.tools]
        if d.resolved:
            self.engine = ContextState.open("ctx", d, self.now, coordinates=coords)
            self.model = model.open_context(self.doc, m, objective, self.now, coords)

    def position(self, tool_id: str) -> int:
        return [t["id"] for t in self.doc["tools"]].index(tool_id)

    def approve(self, approval_id: str, tool: str, call_id: str, args: Any, at: int) -> None:
        if self.engine is None or self.model is None:
            return
        self.engine = self.engine.record_approval(
            approval_id,
            tool=tool,
            call_id=call_id,
            fingerprint=self.engine.fingerprint(args),
            now=at,
        )
        model.record_approval(self.model, approval_id, tool, call_id, args, at)
        self.approval_expiry = at + model.APPROVAL_TTL

    def approve_for(
        self, how: str, tool: str, call_id: str, index: int, approval_id: str | None = None
    ) -> str:
        """Record an approval (a fresh id by default) for the call (tool, call_id,
        args #index), bound ``how``: exactly, or to another tool, callId or arguments."""
        self.fresh += 1
        approval_id = approval_id or f"fresh-{self.fresh}"
        tools = [t["id"] for t in self.doc["tools"]]
        bound = {
            "tool": (
                tools[(tools.index(tool) + 1) % len(tools)] if tool in tools else tools[0],
                call_id,
                self.args(tool, index),
            ),
            "callId": (tool, call_id + "-other", self.args(tool, index)),
            "args": (tool, call_id, self.args(tool, index + 1)),
        }.get(how, (tool, call_id, self.args(tool, index)))
        if how == "tool" and bound[0] == tool:
            bound = ("other-tool", *bound[1:])
        at = self.now - {"expired": model.APPROVAL_TTL, "edge": model.APPROVAL_TTL - 1}.get(how, 0)
        self.approve(approval_id, *bound, at)
        return approval_id

    def call(self, tool: str, call_id: str, index: int, approval_id: str | None) -> None:
        args = self.args(tool, index)
        before = self.engine
        decision = decide(
            self.ir,
            self.engine,
            Call(tool=tool, call_id=call_id, arguments=args, approval_id=approval_id),
            self.now,
            self.principal,
        )
        expected = model.decide(
            self.doc, self.model, tool, call_id, args, approval_id, self.now, self.principal
        )
        pointer = decision.explanation.pointer if expected[2] and decision.explanation else None
        assert (decision.outcome, decision.reason, pointer) == expected, decision
        assert self.engine is before  # deciding never changes the state
        self.decisions.append(f"{decision.outcome} {decision.reason}")
        self.last = (tool, call_id, index, approval_id)
        if self.model is not None and expected[1] not in ("CONTEXT_EXPIRED", "TOOL_NOT_DISCLOSED"):
            assert decision.tool == model.disclosed_id(self.doc, self.model, tool)  # the id
        if decision.outcome == ALLOW:
            assert self.engine is not None and self.model is not None
            assert decision.fingerprint is not None
            self.engine = self.engine.record_dispatch(call_id, decision.tool, decision.fingerprint)
            model.record_dispatch(self.model, call_id, decision.tool, args)

    def advance(self, how: int | str) -> None:
        targets = {
            "context": self.engine.expires_at if self.engine else self.now,
            "approval": self.approval_expiry,
        }
        if isinstance(how, int):
            self.now += how
        else:
            target = targets[how.removesuffix("-1")] - how.endswith("-1")
            self.now = max(self.now, target)

    def step(self, op: tuple[Any, ...]) -> None:
        if op[0] == "call":
            _, tool, call_id, index, how = op
            approval_id = how if how in PLAIN else self.approve_for(how, tool, call_id, index)
            self.call(tool, call_id, index, approval_id)
        elif op[0] == "approve":
            _, approval_id, tool, call_id, index = op
            self.approve(approval_id, tool, call_id, self.args(tool, index), self.now)
        else:
            self.advance(op[1])

    def check_state(self) -> None:
        if self.engine is None or self.model is None:
            assert self.engine is None and self.model is None
            return
        assert set(self.engine.dispatched) == set(self.model["dispatched"])
        for tool in self.engine.counts:
            count = sum(1 for t, _ in self.model["dispatched"].values() if t == tool)
            assert self.engine.counts[tool] == count


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW)
@given(doc=projects(), data=st.data())
def test_disclosure_agrees_with_model(doc: dict[str, Any], data: st.DataObject) -> None:
    ir = compile_project(doc)
    obs = data.draw(observations(doc))
    coords = data.draw(COORDINATES)
    who = data.draw(PRINCIPALS)
    for objective in [o["id"] for o in doc["objectives"]] + ["unknown"]:
        d = disclose(ir, objective, obs, coords, who)
        assert engine_view(d) == model.disclose(doc, objective, obs, coords, who)


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW)
@given(doc=projects(tight=False), data=st.data())
def test_decisions_over_histories_agree_with_model(
    doc: dict[str, Any], data: st.DataObject
) -> None:
    lock = Lockstep(doc, compile_project(doc), data.draw(argument_pools(doc)))
    objective = data.draw(st.sampled_from([o["id"] for o in doc["objectives"]]))
    obs = data.draw(observations(doc, ready_weight=12))
    lock.resolve(objective, obs, data.draw(COORDINATES), data.draw(PRINCIPALS))
    for op in data.draw(steps(doc, lock.disclosed)):
        lock.step(op)
        lock.check_state()


class EngineAgainstModel(RuleBasedStateMachine):
    """Resolve, call (an ALLOW is dispatched), approve the last call exactly or for other
    arguments, callId or tool, retry it, and move the clock, sometimes to exactly an expiry."""

    lock: Lockstep

    @initialize(doc=projects(tight=False), data=st.data())
    def setup(self, doc: dict[str, Any], data: st.DataObject) -> None:
        self.lock = Lockstep(doc, compile_project(doc), data.draw(argument_pools(doc)))
        self.resolve_with(data)

    def resolve_with(self, data: st.DataObject) -> None:
        """Resolve a (rarely unknown) objective, under all-READY observations half the time."""
        doc = self.lock.doc
        objectives = [o["id"] for o in doc["objectives"]]
        objective = data.draw(st.sampled_from([*objectives, *objectives, *objectives, "nope"]))
        obs = data.draw(st.one_of(st.just(all_ready(doc)), observations(doc)))
        self.lock.resolve(objective, obs, data.draw(COORDINATES), data.draw(PRINCIPALS))

    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        self.resolve_with(data)

    @rule(principal=PRINCIPALS)
    def calls_by_another_principal(self, principal: dict[str, Any] | None) -> None:
        """The next calls are made by another principal (a new token's claims): conditions
        read the caller's, the disclosure stays the resolver's."""
        self.lock.principal = principal

    def call_one_of(self, tools: list[str], data: st.DataObject, by_name: bool = False) -> None:
        """Call one of ``tools`` (ids), by its id or, ``by_name``, by its function name (its
        arguments and approval are the id's: one tool, two ways of naming it)."""
        how = data.draw(APPROVALS)
        tool, call_id = data.draw(st.sampled_from(tools)), data.draw(CALL_IDS)
        index = data.draw(st.integers(0, 2))
        approval_id = how if how in PLAIN else self.lock.approve_for(how, tool, call_id, index)
        if by_name:
            self.lock.call_by_name(tool, call_id, index, approval_id)
        else:
            self.lock.call(tool, call_id, index, approval_id)

    @rule(data=st.data())
    def call_any_tool(self, data: st.DataObject) -> None:
        self.call_one_of([t["id"] for t in self.lock.doc["tools"]], data)

    @rule(data=st.data())
    def call_disclosed_tool(self, data: st.DataObject) -> None:
        if self.lock.disclosed:
            self.call_one_of(self.lock.disclosed, data)

    @rule(data=st.data())
    def call_any_tool_by_name(self, data: st.DataObject) -> None:
        self.call_one_of([t["id"] for t in self.lock.doc["tools"]], data, by_name=True)

    @rule(
        how=st.sampled_from(["exact", "exact", "args", "callId", "tool"]),
        approval_id=st.sampled_from(["a1", "a2"]),
    )
    def approve_last(self, how: str, approval_id: str) -> None:
        if self.lock.last is None:
            return
        tool, call_id, index, _ = self.lock.last
        self.lock.approve_for(how, tool, call_id, index, approval_id)
        self.lock.last = (tool, call_id, index, approval_id)

    @rule()
    def retry_last(self) -> None:
        if self.lock.last is not None:
            self.lock.call(*self.lock.last)

    @rule(
        how=st.one_of(
            st.integers(0, 100_000),
            st.sampled_from(["context", "context-1", "approval", "approval-1"]),
        )
    )
    def advance(self, how: int | str) -> None:
        self.lock.advance(how)

    @invariant()
    def states_agree(self) -> None:
        if hasattr(self, "lock"):
            self.lock.check_state()


EngineAgainstModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=SLOW
)
test_engine_against_model_state_machine = EngineAgainstModel.TestCase

"""Project tests, run with the engine alone: ``run_tests(ir) -> TestReport``.

Each test resolves its objective under its fixtures and at its coordinates (``consumer``,
``environment``, ``deployment``: what rules and conditions read as ``context.*``), checks the
resolution, the disclosed context messages and tools, then evaluates its calls in order against
one simulated context at those coordinates, opened at time 0 (each allowed call counts as
dispatched). Its ``principal`` (``{issuer, subject, clientId, claims}``, each optional) is
who resolves and calls (what rules and conditions read as ``principal``); a test without one
runs with no principal known, every field null, as a static credential's but for its
``clientId``. ``approved: true`` is a synthetic fact: an approval of exactly that call is
recorded just before it. Context assertions and tool assertions have separate denominators; the
resolution assertion counts with the tools of a project that declares tools and with the context
of a tool-free one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from policy.engine.decision import ALLOW, Decision, decide
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.principal import PrincipalValue, principal_value
from policy.engine.state import Call, ContextState
from policy.ir import Fixture, Project, ProjectTest, TestCall

SIMULATED_NOW = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Assertion:
    kind: str  # "context" or "tools"
    subject: str
    expected: Any
    actual: Any
    passed: bool
    pointer: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
            "passed": self.passed,
            "pointer": self.pointer,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TestResult:
    id: str
    objective: str
    guard: bool
    assertions: tuple[Assertion, ...]

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.assertions)


@dataclass(frozen=True, slots=True)
class Figure:
    passed: int
    total: int

    def __str__(self) -> str:
        return f"{self.passed}/{self.total}"


@dataclass(frozen=True, slots=True)
class TestReport:
    results: tuple[TestResult, ...]

    def figure(self, kind: str) -> Figure:
        found = [a for r in self.results for a in r.assertions if a.kind == kind]
        return Figure(sum(a.passed for a in found), len(found))

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def failures(self) -> list[tuple[TestResult, Assertion]]:
        return [(r, a) for r in self.results for a in r.assertions if not a.passed]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.passed,
            "context": {
                "passed": self.figure("context").passed,
                "total": self.figure("context").total,
            },
            "tools": {"passed": self.figure("tools").passed, "total": self.figure("tools").total},
            "tests": [
                {
                    "id": r.id,
                    "objective": r.objective,
                    "guard": r.guard,
                    "passed": r.passed,
                    "assertions": [a.to_json() for a in r.assertions],
                }
                for r in self.results
            ],
        }


def test_fixtures(ir: Project, test: ProjectTest) -> Mapping[str, Fixture]:
    """The observations a test runs under: the project's, the current contracts, or its own."""
    if test.fixtures is None:
        return ir.tool_fixtures
    if test.fixtures == "current":
        return current_fixtures(ir)
    assert isinstance(test.fixtures, Mapping)
    return test.fixtures


def current_fixtures(ir: Project) -> dict[str, Fixture]:
    """Every declared tool READY with its declared version and contract digest."""
    return {
        t.id: Fixture(state="READY", version=t.version, contract_digest=t.contract_digest)
        for t in ir.tools
    }


def run_tests(ir: Project) -> TestReport:
    return TestReport(tuple(run_test(ir, i, test) for i, test in enumerate(ir.tests)))


def coordinates_of(test: ProjectTest) -> dict[str, str]:
    """The coordinates a test's context is simulated at, those given and not empty (an empty
    coordinate reads as an absent one)."""
    given = {} if test.coordinates is None else test.coordinates.given()
    return {k: v for k, v in given.items() if v}


def principal_of(test: ProjectTest) -> PrincipalValue:
    """Who a test's context is resolved and its calls made by (every field null without
    ``principal``)."""
    return principal_value(None if test.principal is None else test.principal.to_json())


def run_test(ir: Project, index: int, test: ProjectTest) -> TestResult:
    base = f"/tests/{index}/expect"
    fixtures = test_fixtures(ir, test)
    who = principal_of(test)
    disclosure = disclose(ir, test.objective, fixtures, coordinates_of(test), principal=who)
    assertions = _resolution(ir, disclosure, test, base)
    expect = test.expect
    if expect.context is not None:
        shown = {m.id for m in disclosure.messages}
        assertions += _membership(
            "context",
            "message",
            shown,
            expect.context.include,
            expect.context.exclude,
            f"{base}/context",
        )
    if expect.tools is not None:
        assertions += _membership(
            "tools",
            "tool",
            set(disclosure.tool_ids),
            expect.tools.include,
            expect.tools.exclude,
            f"{base}/tools",
        )
        assertions += _calls(ir, disclosure, test, expect.tools.calls, f"{base}/tools/calls")
    return TestResult(
        id=test.id, objective=test.objective, guard=test.guard, assertions=tuple(assertions)
    )


def _resolution(ir: Project, d: Disclosure, test: ProjectTest, base: str) -> list[Assertion]:
    kind = "tools" if ir.has_tools else "context"
    actual_causes = sorted({c.reason for c in d.causes} | ({d.reason} if d.reason else set()))
    actual = {"resolution": d.status, "causes": actual_causes}
    out = [
        Assertion(
            kind=kind,
            subject="resolution",
            expected=test.expect.resolution,
            actual=actual,
            passed=d.status == test.expect.resolution,
            pointer=f"{base}/resolution",
        )
    ]
    for i, cause in enumerate(test.expect.causes):
        out.append(
            Assertion(
                kind=kind,
                subject=f"cause {cause}",
                expected=cause,
                actual=actual_causes,
                passed=cause in actual_causes,
                pointer=f"{base}/causes/{i}",
            )
        )
    return out


def _membership(
    kind: str,
    noun: str,
    shown: set[str],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    base: str,
) -> list[Assertion]:
    out = [
        Assertion(
            kind=kind,
            subject=f"include {noun} {x}",
            expected="disclosed",
            actual="disclosed" if x in shown else "not disclosed",
            passed=x in shown,
            pointer=f"{base}/include/{i}",
        )
        for i, x in enumerate(include)
    ]
    out += [
        Assertion(
            kind=kind,
            subject=f"exclude {noun} {x}",
            expected="not disclosed",
            actual="disclosed" if x in shown else "not disclosed",
            passed=x not in shown,
            pointer=f"{base}/exclude/{i}",
        )
        for i, x in enumerate(exclude)
    ]
    return out


class SimulatedCall(Protocol):
    """What :func:`simulate_calls` reads of a call (a test's ``TestCall`` is one)."""

    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> Any: ...
    @property
    def approved(self) -> bool: ...
    @property
    def call_id(self) -> str | None: ...


def simulate_calls(
    ir: Project,
    d: Disclosure,
    context_id: str,
    calls: Sequence[SimulatedCall],
    coordinates: Mapping[str, str] | None = None,
    principal: Mapping[str, Any] | None = None,
) -> list[Decision]:
    """Decide ``calls`` in order against one simulated context of ``d`` at ``coordinates``
    (those ``d`` was disclosed at), each made by ``principal`` (None: no one known), opened at
    time 0: an allowed call counts as dispatched,
    ``approved`` records an approval of exactly that call just before it. Nothing is
    dispatched: this is the engine alone."""
    state = None
    if d.resolved:
        given = dict(coordinates or {})
        state = ContextState.open(context_id, d, SIMULATED_NOW, coordinates=given)
    who = principal_value(principal)
    out: list[Decision] = []
    for k, spec in enumerate(calls):
        call_id = spec.call_id or f"call-{k + 1}"
        approval_id = None
        if spec.approved and state is not None:
            approval_id = f"approval-{k + 1}"
            state = state.record_approval(
                approval_id,
                tool=spec.tool,
                call_id=call_id,
                fingerprint=state.fingerprint(spec.arguments),
                now=SIMULATED_NOW,
            )
        call = Call(
            tool=spec.tool, call_id=call_id, arguments=spec.arguments, approval_id=approval_id
        )
        decision = decide(ir, state, call, SIMULATED_NOW, who)
        if decision.outcome == ALLOW and state is not None:
            assert decision.fingerprint is not None
            state = state.record_dispatch(call_id, spec.tool, decision.fingerprint)
        out.append(decision)
    return out


def _calls(
    ir: Project, d: Disclosure, test: ProjectTest, calls: tuple[TestCall, ...], base: str
) -> list[Assertion]:
    decisions = simulate_calls(
        ir, d, f"test:{test.id}", calls, coordinates_of(test), principal_of(test)
    )
    out: list[Assertion] = []
    for k, (spec, decision) in enumerate(zip(calls, decisions, strict=True)):
        call_id = spec.call_id or f"call-{k + 1}"
        passed = decision.outcome == spec.expect and (
            spec.reason is None or decision.reason == spec.reason
        )
        expected = spec.expect if spec.reason is None else f"{spec.expect} {spec.reason}"
        actual = decision.outcome + (f" {decision.reason}" if decision.reason else "")
        out.append(
            Assertion(
                kind="tools",
                subject=f"call {k + 1} {spec.tool} ({call_id})",
                expected=expected,
                actual=actual,
                passed=passed,
                pointer=f"{base}/{k}",
            )
        )
    return out

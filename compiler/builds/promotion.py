"""Promotion: a candidate build must keep every obligation of its baseline, unweakened.

The obligations of a baseline build (docs/release.md) are, for each of its tests:

- the test id exists in the candidate, on the same objective, at the same coordinates and as
  the same principal (a test moved to another environment, or to a user of another group, no
  longer checks the one it checked), and a guard stays a guard;
- every tool the test saw available under its fixtures is still available to it (so that an
  exclusion cannot be made to pass by declaring the tool unavailable);
- every ``exclude`` of ``expect.context`` and ``expect.tools`` is still there;
- every call expected ``DENY`` is still expected ``DENY``, with the same reason when the baseline
  names one. Calls are matched by tool, canonical arguments and ``approved``, the k-th occurrence
  in the baseline with the k-th in the candidate; the call id does not take part;
- a guard (``guard: true``) keeps everything it asserts: its includes, every call with its
  expectation, its resolution and causes.

Strengthening (more tests, excludes, denials) is allowed. :func:`broken_obligations` is a pure
function of the two projects; :func:`promote` adds the registry, the candidate's tests and the
append-only record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from compiler.builds.build import Build
from compiler.builds.registry import PromotionRecord, Registry
from policy.diagnostic import Diagnostic, Location
from policy.engine.disclosure import availability
from policy.engine.testing import (
    TestReport,
    coordinates_of,
    principal_of,
    run_tests,
    test_fixtures,
)
from policy.ir import Membership, Project, ProjectTest, TestCall, ToolExpectation
from policy.json.canonical import canonical_json, identity_value
from policy.json.value import thaw

BLOCKED = "PROMOTION_BLOCKED"
DENY = "DENY"

CallKey = tuple[str, str, bool]


def _blocked(pointer: str, message: str) -> Diagnostic:
    return Diagnostic(
        code=BLOCKED, message=message, location=Location(pointer=pointer), pass_name="promotion"
    )


def broken_obligations(baseline: Project, candidate: Project) -> list[Diagnostic]:
    """Every baseline obligation the candidate breaks; pointers point into the baseline."""
    by_id = {t.id: t for t in candidate.tests}
    out: list[Diagnostic] = []
    for i, test in enumerate(baseline.tests):
        other = by_id.get(test.id)
        if other is None:
            out.append(_blocked(f"/tests/{i}", f"test `{test.id}` is missing"))
            continue
        out += _test_obligations(baseline, candidate, test, other, f"/tests/{i}")
    return out


def _test_obligations(
    bp: Project, cp: Project, test: ProjectTest, other: ProjectTest, base: str
) -> list[Diagnostic]:
    said = f"test `{test.id}`"
    out: list[Diagnostic] = []
    if test.guard and not other.guard:
        out.append(_blocked(f"{base}/guard", f"{said} is no longer a guard"))
    if test.objective != other.objective:
        message = f"{said} now checks objective `{other.objective}`, not `{test.objective}`"
        out.append(_blocked(f"{base}/objective", message))
    if coordinates_of(test) != coordinates_of(other):
        message = f"{said} now runs at {_at(other)}, not at {_at(test)}"
        out.append(_blocked(f"{base}/coordinates", message))
    if principal_of(test) != principal_of(other):
        message = f"{said} now runs as another principal (its issuer, subject, client or claims)"
        out.append(_blocked(f"{base}/principal", message))
    out += _availability(bp, cp, test, other, base)
    expect, got = test.expect, other.expect
    for kind, noun in (("context", "message"), ("tools", "tool")):
        mine: Membership | ToolExpectation | None = getattr(expect, kind)
        theirs: Membership | ToolExpectation | None = getattr(got, kind)
        where = f"{base}/expect/{kind}"
        out += _kept(said, f"exclusion of {noun}", where, "exclude", mine, theirs)
        if test.guard:
            out += _kept(said, f"inclusion of {noun}", where, "include", mine, theirs)
    base_calls = expect.tools.calls if expect.tools else ()
    cand_calls = got.tools.calls if got.tools else ()
    out += _calls(said, base_calls, cand_calls, f"{base}/expect/tools/calls", guard=test.guard)
    if test.guard:
        out += _resolution(said, test, other, base)
    return out


def _at(test: ProjectTest) -> str:
    given = coordinates_of(test)
    return ", ".join(f"{k} `{v}`" for k, v in given.items()) or "no coordinates"


def _available(project: Project, test: ProjectTest) -> set[str]:
    fixtures = test_fixtures(project, test)
    return {t.id for t in project.tools if availability(t, fixtures.get(t.id)) is None}


def _availability(
    bp: Project, cp: Project, test: ProjectTest, other: ProjectTest, base: str
) -> list[Diagnostic]:
    pointer = f"{base}/fixtures" if test.fixtures is not None else "/toolFixtures"
    out: list[Diagnostic] = []
    for tool in sorted(_available(bp, test) - _available(cp, other)):
        how = "declared" if cp.tool(tool) is None else "available under its fixtures"
        out.append(_blocked(pointer, f"test `{test.id}`: tool `{tool}` is no longer {how}"))
    return out


def _kept(
    said: str,
    what: str,
    where: str,
    field: str,
    mine: Membership | ToolExpectation | None,
    theirs: Membership | ToolExpectation | None,
) -> list[Diagnostic]:
    if mine is None:
        return []
    have = set(getattr(theirs, field)) if theirs is not None else set()
    return [
        _blocked(f"{where}/{field}/{j}", f"{said}: the {what} `{x}` was removed")
        for j, x in enumerate(getattr(mine, field))
        if x not in have
    ]


def call_key(call: TestCall) -> CallKey:
    """What identifies a test call across builds: tool, canonical arguments, ``approved``."""
    return call.tool, canonical_json(identity_value(thaw(call.arguments))), call.approved


def _matched(
    base_calls: tuple[TestCall, ...], cand_calls: tuple[TestCall, ...]
) -> Iterator[tuple[int, TestCall, TestCall | None]]:
    """Each baseline call with the candidate call of the same key and occurrence, if any."""
    pool: defaultdict[CallKey, list[TestCall]] = defaultdict(list)
    for call in cand_calls:
        pool[call_key(call)].append(call)
    seen: defaultdict[CallKey, int] = defaultdict(int)
    for k, call in enumerate(base_calls):
        key = call_key(call)
        found = pool[key][seen[key]] if seen[key] < len(pool[key]) else None
        seen[key] += 1
        yield k, call, found


def _show_call(k: int, call: TestCall) -> str:
    named = f" `{call.call_id}`" if call.call_id else ""
    return f"call {k + 1}{named} of `{call.tool}`"


def _expectation(call: TestCall) -> str:
    return call.expect + (f" {call.reason}" if call.reason else "")


def _calls(
    said: str,
    base_calls: tuple[TestCall, ...],
    cand_calls: tuple[TestCall, ...],
    where: str,
    *,
    guard: bool,
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for k, call, found in _matched(base_calls, cand_calls):
        if call.expect != DENY and not guard:
            continue
        shown, pointer = _show_call(k, call), f"{where}/{k}"
        if found is None:
            out.append(_blocked(pointer, f"{said}: {shown} ({_expectation(call)}) was removed"))
        elif found.expect != call.expect:
            message = f"{said}: {shown} flipped from {call.expect} to {found.expect}"
            out.append(_blocked(pointer, message))
        elif call.reason is not None and found.reason != call.reason:
            message = (
                f"{said}: {shown} now expects `{_expectation(found)}`, not `{_expectation(call)}`"
            )
            out.append(_blocked(pointer, message))
    return out


def _resolution(said: str, test: ProjectTest, other: ProjectTest, base: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    if test.expect.resolution != other.expect.resolution:
        message = (
            f"{said} now expects resolution `{other.expect.resolution}`, "
            f"not `{test.expect.resolution}`"
        )
        out.append(_blocked(f"{base}/expect/resolution", message))
    out += [
        _blocked(f"{base}/expect/causes/{j}", f"{said}: the cause `{cause}` was removed")
        for j, cause in enumerate(test.expect.causes)
        if cause not in other.expect.causes
    ]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Promotion:
    """The outcome of :func:`promote`: promoted when ``record`` is set."""

    candidate: Build
    baseline: Build | None
    report: TestReport
    broken: tuple[Diagnostic, ...]
    record: PromotionRecord | None


def promote(
    registry: Registry, *, candidate: str, baseline: str | None, by: str, at: int
) -> Promotion:
    """Check ``candidate`` against ``baseline`` (default: the current promotion) and, when its
    tests pass and it keeps every obligation, append its promotion record. Raises
    :class:`compiler.builds.registry.RegistryError` for a digest that is not registered or an entry
    or history that does not verify. The check and the append hold the registry lock.
    """
    with registry.locked():
        cand = registry.load(candidate)
        base_digest = registry.current() if baseline is None else baseline
        base = registry.load(base_digest) if base_digest is not None else None
        report = run_tests(cand.project)
        broken = tuple(broken_obligations(base.project, cand.project)) if base else ()
        record = None
        if report.passed and not broken:
            previous = base.digest if base else None
            record = registry.append(candidate=cand, baseline=previous, by=by, at=at)
    return Promotion(candidate=cand, baseline=base, report=report, broken=broken, record=record)

"""The text output of `seif replay`: the replay verdict, each mismatch, the what-if."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policy.recorded import RecordRef
from policy.replay import ABSENT, Mismatch, ReplayReport, WhatIfReport
from policy.strictjson import dumps
from policy.whatif import DisclosureChange, RecordChange
from seif.trace_verify import describe
from seif.tracefile import TraceLog
from servers.log.chain import Verified

_SHOWN = 300
"""Characters of a value shown in a difference line."""


def _value(value: Any) -> str:
    if value is ABSENT:
        return "absent"
    text = dumps(value, sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _ref(ref: RecordRef) -> str:
    return f"seq {ref.seq} contextRef {ref.context_ref or '-'} objective {ref.objective or '-'}"


def _counts(pairs: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{name} ({n})" for name, n in pairs) or "none"


def render(
    log: TraceLog,
    report: ReplayReport,
    changes: WhatIfReport | None,
    chain: Verified | None = None,
) -> list[str]:
    """The replay (after the chain of record digests the replay walked, if given), then the
    what-if."""
    lines = [*_replay(log, report), *(_what_if(changes) if changes is not None else ())]
    if chain is not None:
        lines[1:1] = ["  chain of record digests:", *("  " + line for line in describe(chain))]
    return lines


def _replay(log: TraceLog, report: ReplayReport) -> Iterator[str]:
    yield f"replay of {log.path} ({log.format}, {report.records} records) with {report.build}"
    yield (
        f"  DISCLOSED of this build: {report.disclosed}, reproduced {report.reproduced}, "
        f"mismatched {len(report.mismatches)} ({report.distinct_inputs} distinct inputs)"
    )
    if report.other_builds:
        yield f"  skipped, of other builds: {_counts(report.other_builds)}"
    yield f"  other events: {report.other_events}"
    if log.torn:
        yield f"  left out a torn final record ({log.torn} bytes)"
    for mismatch in report.mismatches:
        yield from _mismatch(mismatch)
    if report.mismatches:
        yield f"FAIL: {len(report.mismatches)} of {report.disclosed} disclosures do not reproduce"
    elif not report.ok:
        yield f"FAIL: no DISCLOSED record of {report.build} in the log"
    else:
        yield f"OK: all {report.disclosed} disclosures reproduce exactly"


def _mismatch(mismatch: Mismatch) -> Iterator[str]:
    yield f"MISMATCH {_ref(mismatch.record)}"
    if mismatch.problem is not None:
        yield f"  unusable record: {mismatch.problem}"
    for d in mismatch.differences:
        yield f"  {d.pointer}: recorded {_value(d.recorded)}, replayed {_value(d.replayed)}"


def _what_if(report: WhatIfReport) -> Iterator[str]:
    yield (
        f"what-if: candidate {report.candidate} against {report.build}, "
        f"{report.considered} disclosures"
    )
    for change in report.changes:
        yield from _change(change)
    for ref, problem in report.unusable:
        yield f"  {_ref(ref)}: not evaluated: {problem}"
    s = report.summary
    yield f"summary: {s.records_changed} of {report.considered} records change"
    yield f"  newly disclosed: {_counts(s.newly_disclosed)}"
    yield f"  newly withheld: {_counts(s.newly_withheld)}"
    yield f"  status changes: {_counts(s.status_changes)}"
    yield (
        f"  budget: {s.budget_changes} records change their token figures "
        f"({s.ceiling_changes} their ceiling); estimated tokens over all records "
        f"{s.tokens_baseline} -> {s.tokens_candidate}"
    )


def _change(record: RecordChange) -> Iterator[str]:
    yield f"  {_ref(record.record)}:"
    for part in _parts(record.change):
        yield f"    {part}"


def _parts(c: DisclosureChange) -> Iterator[str]:
    if c.status[0] != c.status[1] or c.reason[0] != c.reason[1]:
        yield f"status {c.status[0]} {c.reason[0] or ''} -> {c.status[1]} {c.reason[1] or ''}"
    if c.disclosed:
        yield f"newly disclosed: {', '.join(c.disclosed)}"
    for w in c.withheld:
        yield f"newly withheld: {w.id} ({w.reason or 'not included by the candidate'})"
    if c.contracts:
        yield f"contract digest changed: {', '.join(c.contracts)}"
    if c.messages_added:
        yield f"messages added: {', '.join(c.messages_added)}"
    if c.messages_removed:
        yield f"messages removed: {', '.join(c.messages_removed)}"
    for o in c.omissions:
        was, now = o.baseline or "not omitted", o.candidate or "not omitted"
        yield f"omission of {o.kind} {o.id}: {was} -> {now}"
    before, after = c.tokens
    if before != after:
        yield (
            f"tokens {before['total']}/{before['ceiling']} -> {after['total']}/{after['ceiling']}"
        )

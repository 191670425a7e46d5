"""`seif replay`: the decision log's disclosures evaluated again offline, and a candidate's
what-if; its text output.

Replay needs only a build and a log file (no executor, no network, no data directory). Replay
walks the chain of record digests as it reads (the walk of `seif trace verify`,
``seif.cli.trace``) and refuses a log whose chain breaks (``LOG_CHAIN_BROKEN``) before it
reports anything. Exit codes: 0 all reproduce, 1 a disclosure does not reproduce (or none of the
log's disclosures is of the build), 2 unreadable input or a broken chain.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from compiler.builds.build import Build, load_build
from compiler.diagnostics import CompileError
from policy.diagnostic import headline
from policy.json.strict import dumps
from policy.offline.recorded import RecordRef
from policy.offline.replay import ABSENT, Mismatch, ReplayReport, WhatIfReport, replay, what_if
from policy.offline.whatif import DisclosureChange, RecordChange
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, emit_json, say, warn
from seif.cli.parsing import command
from seif.cli.trace import describe
from seif.tracefile import (
    ChainBrokenError,
    TraceFileError,
    TraceLog,
    open_log,
)
from servers.log.chain import Chain, Verified

EXAMPLE = "seif replay --build out/build --log decisions.cbor --candidate out/candidate"


def add_parser(sub: Any) -> None:
    """``seif replay``."""
    summary = "re-evaluate the log's disclosures offline (and a candidate's what-if)"
    replaying = command(sub, "replay", summary, EXAMPLE)
    replaying.add_argument(
        "--build", required=True, metavar="DIR", help="the build whose disclosures to replay"
    )
    replaying.add_argument("--log", required=True, metavar="FILE", help="a cbor or jsonl log")
    replaying.add_argument("--candidate", metavar="DIR", help="a candidate build: the what-if")
    replaying.add_argument("--json", action="store_true", help="print one JSON document")
    replaying.set_defaults(run=cmd_replay)


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _load(directory: str) -> Build:
    try:
        return load_build(directory)
    except CompileError as exc:
        problems = "; ".join(headline(d) for d in exc.diagnostics)
        raise _Refused("BUILD_UNREADABLE", f"{directory}: {problems}") from None


Ran = tuple[TraceLog, Verified, ReplayReport, WhatIfReport | None]


def _run(args: argparse.Namespace) -> Ran:
    build = _load(args.build)
    candidate = _load(args.candidate) if args.candidate else None
    chain = Chain()
    try:
        log = open_log(args.log)
        report = replay(build.project, log.records(chain), build_digest=build.digest)
        found = None
        if candidate is not None:  # a second pass over the same snapshot
            found = what_if(
                build.project,
                candidate.project,
                log.records(),
                build_digest=build.digest,
                candidate_digest=candidate.digest,
            )
    except ChainBrokenError as exc:
        message = f"{exc}; nothing was replayed (`seif trace verify --log {args.log}`)"
        raise _Refused("LOG_CHAIN_BROKEN", message) from None
    except TraceFileError as exc:
        raise _Refused("LOG_UNREADABLE", str(exc)) from None
    return log, chain.verified(), report, found


def cmd_replay(args: argparse.Namespace) -> int:
    try:
        log, chain, report, changes = _run(args)
    except _Refused as refused:
        warn(f"seif replay: {refused.message}")
        if args.json:
            emit_json({"ok": False, "error": {"code": refused.code, "message": refused.message}})
        return EXIT_USAGE
    if args.json:
        found = {"path": str(log.path), "format": log.format, "tornBytes": log.torn}
        document: dict[str, Any] = {
            "ok": report.ok,
            "log": {**found, "chain": chain.to_json()},
            "replay": report.to_json(),
        }
        if changes is not None:
            document["whatIf"] = changes.to_json()
        emit_json(document)
    else:
        for line in render(log, report, changes, chain):
            say(line)
    return EXIT_OK if report.ok else EXIT_NOT_ACCEPTABLE


# --- the text output -------------------------------------------------------------------------

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
    for ref in report.not_reproducible:
        yield (
            f"NOT REPRODUCIBLE {_ref(ref)}: its rules read principal.subject, recorded as a "
            "keyed fingerprint"
        )
    for mismatch in report.mismatches:
        yield from _mismatch(mismatch)
    unverified = len(report.not_reproducible)
    if report.mismatches:
        yield f"FAIL: {len(report.mismatches)} of {report.disclosed} disclosures do not reproduce"
    elif not report.ok:
        yield f"FAIL: no DISCLOSED record of {report.build} in the log"
    elif unverified:
        yield (
            f"OK: {report.reproduced} of {report.disclosed} disclosures reproduce exactly; "
            f"{unverified} not reproducible (a rule reads principal.subject)"
        )
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

"""`seif shadow report`: what a candidate run in shadow (``seif serve --shadow``) would have done.

Reads a decision log (a file, or a data directory's, while the runtime runs: a consistent
snapshot, no lock) and summarises, per candidate: the decisions it was handed, how many it
compared, how many it would have decided otherwise, per tool how often it would have disclosed
or withheld it, and per reason code how often a call would have been decided otherwise
(:func:`policy.offline.shadow.report`). Exit codes: 0 the report, 2 an unreadable log.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from policy.offline.shadow import report
from seif.cli.output import EXIT_OK, emit_json, refused, say
from seif.cli.parsing import command, subcommands
from seif.tracefile import TraceFileError, data_log, open_log

EXAMPLE = "seif shadow report --data /var/lib/seif"


def add_parser(sub: Any) -> None:
    """``seif shadow report``."""
    shadow = command(sub, "shadow", "a candidate build run in shadow on live traffic", EXAMPLE)
    actions = subcommands(shadow, "shadow_command")
    reporting = actions.add_parser(
        "report", help="what the shadow build would have decided otherwise (from the log)"
    )
    source = reporting.add_mutually_exclusive_group(required=True)
    source.add_argument("--log", metavar="FILE", help="a decision log file (cbor or jsonl)")
    source.add_argument("--data", metavar="DIR", help="a data directory (its decision log)")
    reporting.add_argument("--json", action="store_true", help="print one JSON document")
    reporting.set_defaults(run=cmd_shadow_report)


def cmd_shadow_report(args: argparse.Namespace) -> int:
    try:
        log = data_log(args.data) if args.data is not None else open_log(args.log)
        found = report(log.records())
    except TraceFileError as exc:
        return refused("seif shadow report", "LOG_UNREADABLE", str(exc), as_json=args.json)
    path = log.path
    if args.json:
        emit_json({"ok": True, "log": str(path), **found})
    else:
        for line in render(path, found):
            say(line)
    return EXIT_OK


def render(path: Path, found: Mapping[str, Any]) -> Iterator[str]:
    """The report as text, a candidate at a time."""
    yield f"shadow report of {path} ({found['records']} records)"
    if not found["candidates"]:
        yield "  no shadow build was loaded while this log was written"
    for run in found["candidates"]:
        yield from _candidate(run)
    if found["unshadowed"]:
        yield f"  decisions no shadow compared: {found['unshadowed']}"


def _candidate(run: Mapping[str, Any]) -> Iterator[str]:
    yield f"candidate {run['candidate']}"
    yield (
        f"  decisions compared: {run['compared']} of {run['decisions']} handed to it"
        f" ({run['failed']} failed), would differ: {run['differ']}"
    )
    disclosures, calls = run["disclosures"], run["calls"]
    yield f"  disclosures that differ: {disclosures['differ']}"
    yield from _counts("    newly disclosed", disclosures["newlyDisclosed"])
    yield from _counts("    newly withheld", disclosures["newlyWithheld"])
    yield from _counts("    withheld because", disclosures["withheldBecause"])
    if disclosures["tokensChanged"]:
        yield f"    token figures changed: {disclosures['tokensChanged']}"
    yield f"  calls that would be decided otherwise: {calls['differ']}"
    yield from _counts("    ", calls["transitions"], sep="")
    yield from _counts("    by reason code", calls["byReason"])
    yield from _counts("  comparisons that raised", run["errors"])


def _counts(label: str, counted: Mapping[str, int], sep: str = ": ") -> Iterator[str]:
    for key, n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])):
        yield f"{label}{sep}{key} x{n}"

"""`seif promote`: promote a registered build that keeps every obligation of its baseline
(docs/release.md)."""

from __future__ import annotations

import argparse
import getpass
import os
import time
from typing import Any

from compiler.builds.promotion import BLOCKED, Promotion, promote
from compiler.builds.registry import Registry, check_by
from compiler.diagnostics import CompileError
from seif.cli.builds import refuse
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    emit_json,
    print_diagnostics,
    print_report,
    problem,
    report_json,
    say,
)
from seif.cli.parsing import command

EXAMPLE = "seif promote --registry /srv/seif-registry --candidate blake3:<digest>"


def add_parser(sub: Any) -> None:
    promoting = command(
        sub, "promote", "promote a registered build that keeps its baseline", EXAMPLE
    )
    promoting.add_argument(
        "--registry", required=True, metavar="REG", help="the registry directory"
    )
    promoting.add_argument(
        "--candidate", required=True, metavar="DIGEST", help="the registered build to promote"
    )
    promoting.add_argument(
        "--baseline", metavar="DIGEST", help="default: the currently promoted build"
    )
    promoting.add_argument("--by", metavar="NAME", help="who promotes; default: the OS user")
    promoting.add_argument("--json", action="store_true", help="print one JSON document")
    promoting.set_defaults(run=cmd_promote)


def default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def cmd_promote(args: argparse.Namespace) -> int:
    try:
        by = check_by(args.by if args.by is not None else default_user())
        outcome = promote(
            Registry(args.registry),
            candidate=args.candidate,
            baseline=args.baseline,
            by=by,
            at=now_ms(),
        )
    except CompileError as exc:
        return refuse(exc, args.registry, as_json=args.json, extra={"promoted": False})
    if args.json:
        emit_json(_promotion_json(outcome))
    else:
        _print_promotion(outcome)
    return EXIT_OK if outcome.record is not None else EXIT_NOT_ACCEPTABLE


def _promotion_json(p: Promotion) -> dict[str, Any]:
    baseline = p.baseline.digest if p.baseline else None
    return {
        "ok": p.record is not None,
        "promoted": p.record is not None,
        "candidate": p.candidate.digest,
        "baseline": baseline,
        "tests": report_json(p.report),
        "diagnostics": [d.to_json(baseline or "") for d in p.broken],
        "record": p.record.to_json() if p.record else None,
    }


def _print_promotion(p: Promotion) -> None:
    baseline = p.baseline.digest if p.baseline else None
    if p.record is not None:
        over = f"over {baseline}" if baseline else "(the first promotion)"
        say(f"promoted {p.candidate.digest} {over}, record {p.record.seq} by {p.record.by}")
        return
    if not p.report.passed:
        print_report(p.candidate.digest, p.report, to_stderr=True)
        problem(p.candidate.digest, BLOCKED, "the candidate's tests fail; not promoted")
    print_diagnostics(p.broken, baseline or "")
    if p.broken:
        count = len(p.broken)
        broken = f"{count} obligation{'s' if count != 1 else ''} of the baseline {baseline} broken"
        problem(p.candidate.digest, BLOCKED, f"{broken}; not promoted")

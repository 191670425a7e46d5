"""`seif register`, `seif promote`, `seif registry list` and `seif registry history`."""

from __future__ import annotations

import argparse
import getpass
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compiler.build import BUILD_FILE, MANIFEST_FILE, Build, load_build
from compiler.diagnostics import CompileError
from compiler.promotion import BLOCKED, Promotion, promote
from compiler.registry import Entry, PromotionRecord, Registry, RegistryError, check_by
from policy.diagnostic import Diagnostic
from policy.testing import TestReport, run_tests
from seif.authoring import print_report
from seif.output import (
    EXIT_LOCKED,
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    problem,
    say,
)

USAGE_CODES = frozenset(
    {
        "DIGEST_INVALID",
        "BUILD_NOT_FOUND",
        "BUILD_NOT_REGISTERED",
        "REGISTRY_UNREADABLE",
        "REGISTRY_WRITE_FAILED",
        "BY_INVALID",
    }
)


def exit_code(diagnostics: list[Diagnostic]) -> int:
    """2 for a bad argument or a missing registry or build, 3 when locked, else 1."""
    codes = {d.code for d in diagnostics}
    if "REGISTRY_LOCKED" in codes:
        return EXIT_LOCKED
    if codes and codes <= USAGE_CODES:
        return EXIT_USAGE
    return EXIT_NOT_ACCEPTABLE


def refuse(
    exc: CompileError, file: str, *, as_json: bool, extra: dict[str, Any] | None = None
) -> int:
    """Render a refusal in one place: diagnostics on stderr, or one JSON document."""
    where = exc.file if isinstance(exc, RegistryError) else file
    if as_json:
        emit_json(
            {
                "ok": False,
                **(extra or {}),
                "diagnostics": [d.to_json(where) for d in exc.diagnostics],
            }
        )
    else:
        print_diagnostics(exc.diagnostics, where)
    return exit_code(exc.diagnostics)


def verified_build(build_dir: str) -> Build:
    """``load_build`` with a missing build told apart (``BUILD_NOT_FOUND``, exit 2) from a
    build that does not verify (its own codes, exit 1)."""
    directory = Path(build_dir)
    if not (directory / BUILD_FILE).is_file() or not (directory / MANIFEST_FILE).is_file():
        message = f"no `{BUILD_FILE}` and `{MANIFEST_FILE}` in this directory"
        missing = Diagnostic(code="BUILD_NOT_FOUND", message=message, pass_name="load")
        raise RegistryError(build_dir, [missing])
    return load_build(directory)


def _tests_json(report: TestReport) -> dict[str, Any]:
    """The two figures and every failing assertion."""
    doc = report.to_json()
    failures = [{"test": r.id, **a.to_json()} for r, a in report.failures()]
    return {"ok": doc["ok"], "context": doc["context"], "tools": doc["tools"], "failures": failures}


def cmd_register(args: argparse.Namespace) -> int:
    try:
        build = verified_build(args.build)
    except CompileError as exc:
        return refuse(exc, args.build, as_json=args.json)
    report = run_tests(build.project)
    if not report.passed:
        if args.json:
            emit_json({"ok": False, "digest": build.digest, "tests": _tests_json(report)})
        else:
            print_report(args.build, report, to_stderr=True)
            problem(args.build, "TESTS_FAILED", "the build's tests fail; not registered")
        return EXIT_NOT_ACCEPTABLE
    try:
        registered = Registry(args.registry).register(build)
    except CompileError as exc:
        return refuse(exc, args.registry, as_json=args.json)
    if args.json:
        emit_json(
            {
                "ok": True,
                "digest": build.digest,
                "stored": registered.stored,
                "path": str(registered.path),
                "tests": _tests_json(report),
            }
        )
    else:
        how = "registered" if registered.stored else "already registered, verified unchanged:"
        say(f"{how} {build.digest}")
    return EXIT_OK


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
        "tests": _tests_json(p.report),
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


def _entry_json(entry: Entry, promoted: set[str], current: str | None) -> dict[str, Any]:
    if entry.build is None:
        return {
            "entry": entry.name,
            "ok": False,
            "diagnostics": [d.to_json() for d in entry.problems],
        }
    build = entry.build
    return {
        "ok": True,
        "digest": build.digest,
        "format": build.format,
        "requiresRuntime": build.requires_runtime,
        "project": {"id": build.project.id, "version": build.project.version},
        "tests": len(build.project.tests),
        "promoted": build.digest in promoted,
        "current": build.digest == current,
    }


def cmd_registry_list(args: argparse.Namespace) -> int:
    registry = Registry(args.registry)
    try:
        entries = registry.entries()
        records = registry.history()
    except CompileError as exc:
        return refuse(exc, args.registry, as_json=args.json)
    current = records[-1].candidate if records else None
    promoted = {r.candidate for r in records}
    rows = [_entry_json(e, promoted, current) for e in entries]
    ok = all(row["ok"] for row in rows)
    if args.json:
        emit_json({"ok": ok, "current": current, "builds": rows})
        return EXIT_OK if ok else EXIT_NOT_ACCEPTABLE
    for entry, row in zip(entries, rows, strict=True):
        if entry.build is None:
            print_diagnostics(entry.problems, str(registry.root / "builds" / entry.name))
            continue
        mark = " (current)" if row["current"] else " (promoted before)" if row["promoted"] else ""
        project = row["project"]
        say(f"{row['digest']} {project['id']} {project['version']} {row['format']}{mark}")
    say(f"{len(rows)} build{'s' if len(rows) != 1 else ''}, current: {current or 'none promoted'}")
    return EXIT_OK if ok else EXIT_NOT_ACCEPTABLE


def _when(at: int) -> str:
    return datetime.fromtimestamp(at / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _show_record(r: PromotionRecord) -> str:
    over = f"over {r.baseline}" if r.baseline else "(first)"
    project = f"{r.project['id']} {r.project['version']}"
    return f"{r.seq} {_when(r.at)} {r.by}: promoted {r.candidate} {over} [{project}]"


def cmd_registry_history(args: argparse.Namespace) -> int:
    try:
        records = Registry(args.registry).history()
    except CompileError as exc:
        return refuse(exc, args.registry, as_json=args.json)
    current = records[-1].candidate if records else None
    if args.json:
        emit_json({"ok": True, "current": current, "promotions": [r.to_json() for r in records]})
        return EXIT_OK
    for record in records:
        say(_show_record(record))
    say(f"{len(records)} promotion{'s' if len(records) != 1 else ''}, current: {current or 'none'}")
    return EXIT_OK

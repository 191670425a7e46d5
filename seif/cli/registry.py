"""`seif registry list` and `seif registry history`: a registry's builds, verified, and its
promotions (docs/release.md)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from compiler.builds.registry import Entry, PromotionRecord, Registry
from compiler.diagnostics import CompileError
from seif.cli.builds import refuse
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, emit_json, print_diagnostics, say
from seif.cli.parsing import command, subcommands

EXAMPLE = "seif registry list --registry /srv/seif-registry"


def add_parser(sub: Any) -> None:
    registry = command(sub, "registry", "list a registry's builds or its promotions", EXAMPLE)
    inner = subcommands(registry, "registry_command")
    for name, help_text, handler in (
        ("list", "every registered build, verified", cmd_registry_list),
        ("history", "the promotion history, oldest first", cmd_registry_history),
    ):
        listing = inner.add_parser(name, help=help_text)
        listing.add_argument("--registry", required=True, metavar="REG", help="the registry")
        listing.add_argument("--json", action="store_true", help="print one JSON document")
        listing.set_defaults(run=handler)


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

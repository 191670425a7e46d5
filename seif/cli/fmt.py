"""`seif fmt FILE [--check]`: a project file formatted in place. A `.seif` file keeps its
comments (docs/language.md); any other file is read as a JSON project and written with two-space
indentation, its keys in their order, one newline at the end. Both are stable: formatting twice
changes nothing. Only the text must be well formed (a `.seif` file that parses; JSON without a
syntax error or duplicate key): `seif validate` judges the project.

Exit codes: 0 done (or already formatted), 1 `--check` and the file would change, 2 an
unreadable or unparsable input (each problem located at its line and column, and the file left
untouched)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from seif.cli.convert import document_of, read_project
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, print_diagnostics, say, warn
from seif.cli.parsing import command

EXAMPLE = "seif fmt p.seif --check"


def add_parser(sub: Any) -> None:
    summary = "format a project file (.seif or JSON) in place"
    fmt = command(sub, "fmt", summary, EXAMPLE, description=summary)
    fmt.add_argument(
        "file", metavar="FILE", help="a `.seif` project, or a JSON project, formatted in place"
    )
    fmt.add_argument("--check", action="store_true", help="exit 1 if it would change")
    fmt.set_defaults(run=cmd_fmt)


def formatted_seif(path: str, text: str) -> str | None:
    """``text`` formatted as `.seif`, or None (its syntax error reported, located)."""
    from compiler.seif.fmt import format_seif  # noqa: PLC0415
    from compiler.seif.parse import SeifSyntaxError  # noqa: PLC0415

    try:
        return format_seif(text)
    except SeifSyntaxError:
        document_of(path, text)  # reports the syntax error, located
        return None


def formatted_json(path: str, text: str) -> str | None:
    """``text`` as two-space indented JSON, keys in their order, or None (each syntax error and
    duplicate key reported at its line and column)."""
    from compiler.diagnostics import Collector  # noqa: PLC0415
    from compiler.passes.parse import parse_json_text  # noqa: PLC0415
    from policy.json.positions import with_positions  # noqa: PLC0415
    from policy.json.strict import dumps  # noqa: PLC0415

    out = Collector("parse")
    doc = parse_json_text(text, out)
    if out.items:
        located = with_positions(out.items, text)
        cited = [replace(d, location=replace(d.location, cite="line")) for d in located]
        print_diagnostics(cited, path, text)
        return None
    return dumps(doc, indent=2) + "\n"


def cmd_fmt(args: argparse.Namespace) -> int:
    text = read_project(args.file)
    if text is None:
        return EXIT_USAGE
    fmt = formatted_seif if args.file.endswith(".seif") else formatted_json
    formatted = fmt(args.file, text)
    if formatted is None:
        warn(f"{args.file}: not formatted; the file is unchanged")
        return EXIT_USAGE
    if formatted == text:
        return EXIT_OK
    if args.check:
        say(f"{args.file}: would be reformatted")
        return EXIT_NOT_ACCEPTABLE
    Path(args.file).write_text(formatted, encoding="utf-8")
    say(f"{args.file}: formatted")
    return EXIT_OK

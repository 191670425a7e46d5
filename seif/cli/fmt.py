"""`seif fmt FILE [--check]`: a `.seif` file formatted in place, its comments kept
(docs/language.md). Exit codes: 0 done (or already formatted), 1 `--check` and the file would
change, 2 an unreadable or unparsable input (reported as `seif convert` reports it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seif.cli.convert import document_of, read_project
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, say
from seif.cli.parsing import command

EXAMPLE = "seif fmt p.seif --check"


def add_parser(sub: Any) -> None:
    fmt = command(sub, "fmt", "format a .seif file in place", EXAMPLE)
    fmt.add_argument("file", metavar="FILE", help="a `.seif` project, formatted in place")
    fmt.add_argument("--check", action="store_true", help="exit 1 if it would change")
    fmt.set_defaults(run=cmd_fmt)


def cmd_fmt(args: argparse.Namespace) -> int:
    from compiler.seif.fmt import format_seif  # noqa: PLC0415
    from compiler.seif.parse import SeifSyntaxError  # noqa: PLC0415

    text = read_project(args.file)
    if text is None:
        return EXIT_USAGE
    try:
        formatted = format_seif(text)
    except SeifSyntaxError:
        document_of(args.file, text)  # reports the syntax error, located
        return EXIT_USAGE
    if formatted == text:
        return EXIT_OK
    if args.check:
        say(f"{args.file}: would be reformatted")
        return EXIT_NOT_ACCEPTABLE
    Path(args.file).write_text(formatted, encoding="utf-8")
    say(f"{args.file}: formatted")
    return EXIT_OK

"""`seif convert FILE --to json|seif [--out FILE]` and `seif fmt FILE [--check]`
(docs/language.md).

Converting is exact: JSON to `.seif` and back gives the same document, hence the same IR and
digests; a construct the language has no readable form for is written as its `json` form.
Exit codes: 0 done, 1 `fmt --check` would change the file, 2 an unreadable or unparsable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seif.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, print_diagnostics, problem, say


def add_parsers(sub: Any) -> None:
    convert = sub.add_parser("convert", help="convert a project between JSON and .seif")
    convert.add_argument("file", metavar="FILE", help="a project, `.json` or `.seif`")
    convert.add_argument(
        "--to", required=True, choices=("json", "seif"), help="the front end to write"
    )
    convert.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    convert.set_defaults(run=cmd_convert)
    fmt = sub.add_parser("fmt", help="format a .seif file in place")
    fmt.add_argument("file", metavar="FILE", help="a `.seif` project, formatted in place")
    fmt.add_argument("--check", action="store_true", help="exit 1 if it would change")
    fmt.set_defaults(run=cmd_fmt)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem(path, "FILE_UNREADABLE", str(getattr(exc, "strerror", None) or exc))
        return None


def _document(path: str, text: str) -> Any:
    """The JSON document of ``text`` (a `.seif` or a JSON project), or None (reported)."""
    from compiler.diagnostics import Collector  # noqa: PLC0415
    from compiler.parse import parse_json_text  # noqa: PLC0415
    from compiler.seif_parse import SeifSyntaxError, parse_seif  # noqa: PLC0415

    if path.endswith(".seif"):
        try:
            return parse_seif(text).document
        except SeifSyntaxError as exc:
            print_diagnostics([exc.diagnostic], path, text)
            return None
    out = Collector("parse")
    doc = parse_json_text(text, out)
    print_diagnostics(out.items, path, text)
    return doc


def cmd_convert(args: argparse.Namespace) -> int:
    from compiler.seif_print import to_seif  # noqa: PLC0415
    from policy.strictjson import dumps  # noqa: PLC0415

    text = _read(args.file)
    doc = None if text is None else _document(args.file, text)
    if doc is None:
        return EXIT_USAGE
    result = to_seif(doc) if args.to == "seif" else dumps(doc, indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(result)
        return EXIT_OK
    try:
        Path(args.out).write_text(result, encoding="utf-8")
    except OSError as exc:
        problem(args.out, "FILE_UNWRITABLE", str(exc.strerror or exc))
        return EXIT_USAGE
    return EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from compiler.seif_parse import SeifSyntaxError  # noqa: PLC0415
    from compiler.seif_print import format_seif  # noqa: PLC0415

    text = _read(args.file)
    if text is None:
        return EXIT_USAGE
    try:
        formatted = format_seif(text)
    except SeifSyntaxError:
        _document(args.file, text)  # reports the syntax error, located
        return EXIT_USAGE
    if formatted == text:
        return EXIT_OK
    if args.check:
        say(f"{args.file}: would be reformatted")
        return EXIT_NOT_ACCEPTABLE
    Path(args.file).write_text(formatted, encoding="utf-8")
    say(f"{args.file}: formatted")
    return EXIT_OK

"""`seif convert FILE --to json|seif [--out FILE]`: a project from one front end to the other
(docs/language.md).

Converting is exact: JSON to `.seif` and back gives the same document, hence the same IR and
digests; a construct the language has no readable form for is written as its `json` form. A JSON
file's top-level `$schema` (for editors, not in the IR) has no `.seif` form: it is left out, and
the command says so on stderr.
Exit codes: 0 done, 2 an unreadable or unparsable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seif.cli.output import (
    EXIT_OK,
    EXIT_USAGE,
    print_diagnostics,
    problem,
    warn,
)
from seif.cli.parsing import command

EXAMPLE = "seif convert reference/agent-tools/context-project.json --to seif --out p.seif"


def add_parser(sub: Any) -> None:
    convert = command(sub, "convert", "convert a project between JSON and .seif", EXAMPLE)
    convert.add_argument("file", metavar="FILE", help="a project, `.json` or `.seif`")
    convert.add_argument(
        "--to", required=True, choices=("json", "seif"), help="the front end to write"
    )
    convert.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    convert.set_defaults(run=cmd_convert)


def read_project(path: str) -> str | None:
    """The text of the project file ``path``, or None (``FILE_UNREADABLE`` reported)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem(path, "FILE_UNREADABLE", str(getattr(exc, "strerror", None) or exc))
        return None


def document_of(path: str, text: str) -> Any:
    """The JSON document of ``text`` (a `.seif` or a JSON project), or None (reported)."""
    from compiler.diagnostics import Collector  # noqa: PLC0415
    from compiler.passes.parse import parse_json_text  # noqa: PLC0415
    from compiler.seif.parse import SeifSyntaxError, parse_seif  # noqa: PLC0415

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
    from compiler.passes import SCHEMA_KEY, without_schema  # noqa: PLC0415
    from compiler.seif.printer import to_seif  # noqa: PLC0415
    from policy.json.strict import dumps  # noqa: PLC0415

    text = read_project(args.file)
    doc = None if text is None else document_of(args.file, text)
    if doc is None:
        return EXIT_USAGE
    if args.to == "seif" and isinstance(doc, dict) and SCHEMA_KEY in doc:
        warn(
            f"{args.file}: `{SCHEMA_KEY}` (for editors of the JSON file) has no .seif form: "
            "left out"
        )
        doc = without_schema(doc)
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

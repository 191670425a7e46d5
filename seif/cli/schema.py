"""`seif schema project`: the JSON Schema (2020-12) of a project file on stdout, for editors
(generated from the IR's field tables, as the compiler's structure pass reads them:
:mod:`compiler.project_schema`). Save it beside a project and name it in the project's
``$schema`` (what ``seif init`` does). Exit code 0."""

from __future__ import annotations

import argparse
from typing import Any

from seif.cli.output import EXIT_OK, emit_json
from seif.cli.parsing import command, subcommands

EXAMPLE = "seif schema project > seif-project.schema.json"


def add_parser(sub: Any) -> None:
    summary = "print the JSON Schema of a file format, for editors"
    schema = command(sub, "schema", summary, EXAMPLE, description=summary)
    inner = subcommands(schema, "schema_command")
    project = inner.add_parser(
        "project", help="the JSON Schema (2020-12) of a project file (`.json`)"
    )
    project.set_defaults(run=cmd_schema_project)


def cmd_schema_project(args: argparse.Namespace) -> int:
    from compiler.project_schema import project_schema  # noqa: PLC0415

    emit_json(project_schema())
    return EXIT_OK

"""`seif bindings template`: the bindings file of a build with placeholders to fill in.

The template and its ``contracts.json`` are made by :mod:`compiler.authoring.bindings` (shared
with ``seif release``, ``seif bundle`` and the Design workstation); this module is the command:
its options and what it prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compiler.authoring.bindings import bindings_template, write_template
from compiler.diagnostics import CompileError
from seif.cli.builds import refuse, verified_build
from seif.cli.output import EXIT_OK, emit_json, say, warn
from seif.cli.parsing import command, subcommands

EXAMPLE = "seif bindings template --build out/build --out bindings.template.json"


def add_parser(sub: Any) -> None:
    """``seif bindings template``."""
    bindings = command(sub, "bindings", "bindings files for a build", EXAMPLE)
    inner = subcommands(bindings, "bindings_command")
    template = inner.add_parser("template", help="a bindings file to fill in, one entry per tool")
    template.add_argument("--build", required=True, metavar="DIR", help="the build to bind")
    template.add_argument(
        "--out", metavar="FILE", help="write FILE and contracts.json beside it (default: stdout)"
    )
    template.set_defaults(run=cmd_bindings_template)


def cmd_bindings_template(args: argparse.Namespace) -> int:
    try:
        build = verified_build(args.build)
    except CompileError as exc:
        return refuse(exc, args.build, as_json=False)
    if args.out is None:
        emit_json(bindings_template(build.project))
        for tool in build.project.tools:
            warn(f"describe of {tool.id} must answer {tool.version} {tool.contract_digest}")
        return EXIT_OK
    contracts = write_template(build, Path(args.out))
    say(f"wrote {args.out} (fill in each endpoint and set each secretRef's variable)")
    say(f"wrote {contracts} (what each executor's describe must answer):")
    for tool in build.project.tools:
        say(f"  {tool.id} {tool.version} {tool.contract_digest}")
    return EXIT_OK

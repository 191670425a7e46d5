"""`seif bindings template`: the bindings file of a build with placeholders to fill in.

The template and its ``contracts.json`` are made by :mod:`compiler.authoring.bindings` (shared
with ``seif release``, ``seif bundle`` and the Design workstation); this module is the command:
its options and what it prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compiler.authoring.bindings import bindings_template, servers_of, write_template
from compiler.diagnostics import CompileError
from policy.ir import Project
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
        for line in _served(build.project):
            warn(line)
        return EXIT_OK
    contracts = write_template(build, Path(args.out))
    say(f"wrote {args.out} (fill in each endpoint and set each secretRef's variable)")
    servers = servers_of(build.project)
    if servers:
        named = ", ".join(servers)
        say(f"  and replace the placeholder command of each upstream ({named}) or give its url")
    say(f"wrote {contracts} (what each executor's describe must answer):")
    for tool in build.project.tools:
        say(f"  {tool.id} {tool.version} {tool.contract_digest}")
    return EXIT_OK


def _served(project: Project) -> list[str]:
    """What serves each tool: the executor whose describe must answer its contract, or the
    upstream whose listing must match its pin."""
    return [
        f"describe of {t.id} must answer {t.version} {t.contract_digest}"
        if t.upstream is None
        else f"{t.id} is served by upstream {t.upstream.server}: its tool {t.upstream.tool} "
        f"must list as {t.upstream.descriptor_digest}"
        for t in project.tools
    ]

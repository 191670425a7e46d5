"""The `seif` command: one module per command here, each with its parser, its handler and the
example its help ends with; :data:`COMMANDS` lists them in the order ``seif --help`` shows.

A command's module is imported to build the parser (every command builds all of it), so what
only the command needs (aiohttp and the servers, the proof's steps, the guided release, the
bundle's wheels) is imported when its handler runs, never at start-up.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from seif import __version__
from seif.cli import (
    approval_server,
    bindings,
    bundle,
    convert,
    design,
    evaluate,
    fmt,
    init,
    project,
    promote,
    prove,
    register,
    registry,
    release,
    replay,
    schema,
    serve,
    shadow,
    starter,
    tool,
    trace,
)
from seif.cli.output import EXIT_USAGE, warn
from seif.cli.parsing import Parser

COMMANDS = (
    init,
    project,  # validate, test, build
    serve,
    approval_server,
    prove,
    convert,
    fmt,
    schema,  # schema project
    trace,  # trace export, trace verify
    replay,
    shadow,  # shadow report
    register,
    promote,
    registry,  # registry list, registry history
    bundle,
    bindings,  # bindings template
    release,
    tool,  # tool new, include, protect, show, check-call
    evaluate,  # eval
    starter,
    design,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="seif", description="Declarative policy for the tools an AI agent may see and call."
    )
    parser.add_argument("--version", action="version", version=f"seif {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


SERVER_MODULES = frozenset(
    {"httptools", "uvloop", "keyring", "mcp", "mcp_types", "psycopg", "psycopg_pool",
     "cryptography", "prometheus_client", "joserfc"}
)  # fmt: skip
"""The modules of the ``server`` extra: the engine, the compiler, the SDK and the offline commands
run without them."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "project_file"):
        project.project_of(parser, args)
    try:
        code: int = args.run(args)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in SERVER_MODULES:
            raise
        command = " ".join(a for a in (argv if argv is not None else sys.argv[1:])[:1])
        warn(
            f"seif {command}: SERVER_STACK_MISSING: this command needs the server stack "
            f"(`{missing}` is not installed): pip install 'seif[server]'"
        )
        return EXIT_USAGE
    return code

"""`seif starter`: a runnable executor project for one tool of a build (docs/authoring.md).

The starter itself is written by :func:`compiler.authoring.starter.write_starter`; this module
is the command: its options, what it prints, and its exit codes (2 for a missing or unreadable
build, an unknown tool or language; 1 for a build that does not verify or an ``--out`` that
cannot be written).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from compiler.authoring.starter import (
    LANGS,
    TOKEN_ENV,
    AuthoringError,
    StarterResult,
    binding_entry,
    write_starter,
)
from compiler.diagnostics import CompileError
from policy.ir import Tool
from seif.cli.builds import refuse, verified_build
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, print_diagnostics, say

EXAMPLE = "seif starter --build out/build --tool inspect-context --lang python --out executor"
USAGE_CODES = frozenset({"UNKNOWN_TOOL", "STARTER_LANG_UNKNOWN"})


def add_parser(sub: Any) -> None:
    """Add ``seif starter`` to the sub-commands ``sub``."""
    summary = "write a runnable executor starter for one tool of a build"
    parser: argparse.ArgumentParser = sub.add_parser(
        "starter",
        help=summary,
        description=(
            f"{summary}: an HTTP server of context-tool-executor.v1 (GET /describe, POST "
            "/execute at the root of its URL) carrying the tool's exact contract digest, with "
            "a business handler that answers ok: false NOT_IMPLEMENTED until you implement it"
        ),
        epilog=f"example:\n  {EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--build", required=True, metavar="DIR", help="the build directory (`seif build --out`)"
    )
    parser.add_argument(
        "--tool", required=True, metavar="ID", help="the id of the tool the executor serves"
    )
    parser.add_argument(
        "--lang",
        required=True,
        choices=LANGS,
        help="python (aiohttp) or node (Node 20, its built-in http module, no dependencies)",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the folder to write: new, or empty (nothing is written into a folder with files)",
    )
    parser.set_defaults(run=cmd_starter)


def cmd_starter(args: argparse.Namespace) -> int:
    try:
        build = verified_build(args.build)
    except CompileError as exc:
        return refuse(exc, args.build, as_json=False)
    try:
        result = write_starter(build.project, args.tool, args.lang, Path(args.out))
    except AuthoringError as exc:
        print_diagnostics(exc.diagnostics, args.out)
        codes = {d.code for d in exc.diagnostics}
        return EXIT_USAGE if codes and codes <= USAGE_CODES else EXIT_NOT_ACCEPTABLE
    tool = build.project.tool_by_id[result.tool_id]
    for line in report_lines(result, tool):
        say(line)
    return EXIT_OK


def report_lines(result: StarterResult, tool: Tool) -> list[str]:
    """What ``seif starter`` prints: the files, the digest, how to start and bind the starter."""
    out = shlex.quote(str(result.out))
    entry = json.dumps({result.tool_id: binding_entry(tool)})
    lines = [f"wrote a {result.lang} executor for {result.tool_id} {result.version} in {out}:"]
    lines += [f"  {name}" for name in result.files]
    return [
        *lines,
        f"contract digest: {result.contract_digest} (GET /describe answers it)",
        "",
        "start it (any secret; the runtime's binding must send the same one):",
        f"  {TOKEN_ENV}=<secret> {result.run}",
        "until its handler is implemented, every call answers ok: false NOT_IMPLEMENTED",
        f"(implement handle() in {out}/handler.{'py' if result.lang == 'python' else 'js'}, "
        f"and make {out}/store.{'py' if result.lang == 'python' else 'js'} durable)",
        "",
        'bind it: add to the "tools" of the runtime\'s bindings file (docs/runtime-config.md,',
        "`seif bindings template`), with the same secret in the variable its secretRef names:",
        f"  {entry}",
        f"more in {out}/README.md",
    ]

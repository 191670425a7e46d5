"""`seif design`: the Design workstation, a local page over one project file (docs/authoring.md).

It prints ``seif design listening on http://127.0.0.1:PORT/#token=TOKEN`` once it accepts
requests: the token is new on every start and is in the URL's fragment, which a browser never
sends to a server. Exit codes: 0 after a clean shutdown (SIGINT or SIGTERM), 2 when the project
file cannot be read or the port cannot be listened on.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Any

from seif.cli.output import EXIT_OK, EXIT_USAGE, problem, warn

DEFAULT_PORT = 8789
"""cli.md's default: beside the runtime (8787) and the approval server (8788), and not the
synthetic executor's 8790 of the docs."""
EPILOG = """example:
  seif design --project context-project.seif --registry registry
  # seif design listening on http://127.0.0.1:8789/#token=...   (open that URL)

Every change is written to the project file only once it validates; the page runs the same
operations as `seif tool new|include|protect|check-call`, `seif starter` and `seif release`.
"""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "design",
        help="the Design workstation: a local page to author tools in one project file",
        description="Serve the Design workstation, a page on this machine over one project "
        "file: tool cards, new tools, inclusion, guards, call checks, starters and releases.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--project", required=True, metavar="FILE", help="the project file (.json or .seif)"
    )
    parser.add_argument(
        "--registry", metavar="REG", help='the registry "Prepare release & connect" registers in'
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: %(default)s, this machine only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port to listen on, 0 for any free one (default: %(default)s)",
    )
    parser.set_defaults(run=cmd_design)


def cmd_design(args: argparse.Namespace) -> int:
    from seif.serve.runtime import run_loop  # noqa: PLC0415  # aiohttp loads only for this command
    from servers.design.app import run_design  # noqa: PLC0415

    project = Path(args.project)
    if not project.is_file():
        problem(args.project, "FILE_UNREADABLE", "not a file; give a `.json` or `.seif` project")
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        warn(f"--port {args.port}: use 0..65535")
        return EXIT_USAGE
    registry = Path(args.registry) if args.registry else None
    token = secrets.token_urlsafe(32)
    try:
        run_loop(run_design(project, registry, args.host, args.port, token, sys.stdout))
    except OSError as exc:
        warn(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
        return EXIT_USAGE
    return EXIT_OK

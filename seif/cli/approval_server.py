"""`seif approval-server`: the approval server in front of one runtime (docs/approval-server.md).

Exit codes: 0 after a clean shutdown (SIGINT or SIGTERM), 2 for bad arguments or configuration
(the approvers file, the runner approval credential, the runtime URL), each problem named with
its file, JSON pointer and code.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from seif.cli.output import EXIT_OK, EXIT_USAGE, print_diagnostics, warn
from seif.cli.parsing import command

DEFAULT_PORT = 8788
EXAMPLE = "seif approval-server --runtime http://127.0.0.1:8787 --approvers approvers.json"


def add_parser(sub: Any) -> None:
    summary = "run the approval server and the approvers' page"
    parser = command(sub, "approval-server", summary, EXAMPLE)
    parser.add_argument("--runtime", required=True, metavar="URL", help="the runtime's base URL")
    parser.add_argument("--approvers", required=True, metavar="FILE", help="approvers.json")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port to listen on (default: %(default)s)"
    )
    parser.set_defaults(run=cmd_approval_server)


def cmd_approval_server(args: argparse.Namespace) -> int:
    # aiohttp and the server load only for this command
    from seif.serve.runtime import run_loop, serve_app  # noqa: PLC0415
    from servers.approval.app import ApprovalConfig, create_app  # noqa: PLC0415
    from servers.config.approvers import load_approvers, runner_token, runtime_url  # noqa: PLC0415
    from servers.config.files import ConfigError  # noqa: PLC0415
    from servers.http.serving import Limits  # noqa: PLC0415

    try:
        url = runtime_url(args.runtime)
        approvers = load_approvers(args.approvers, os.environ)
        token = runner_token(os.environ, approvers)
    except ConfigError as exc:
        print_diagnostics(exc.diagnostics)
        return EXIT_USAGE
    config = ApprovalConfig(runtime_url=url, approvers=approvers, runner_token=token)
    try:
        run_loop(serve_app(create_app(config), "approval-server", args.host, args.port, Limits()))
    except OSError as exc:
        warn(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
        return EXIT_USAGE
    return EXIT_OK

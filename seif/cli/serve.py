"""`seif serve`: the runtime server (docs/runtime.md). The server itself, and aiohttp with it,
loads only when the command runs (:mod:`seif.serve.runtime`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seif.cli.parsing import command, lazy
from servers.mcp.origins import origin

EXAMPLE = (
    "seif serve --build out/build --bindings bindings.json --credentials credentials.json "
    "--data /var/lib/seif"
)


def add_parser(sub: Any) -> None:
    serve = command(sub, "serve", "run the runtime server", EXAMPLE)
    for arguments in (_inputs, _listening, _limits, _features):
        arguments(serve)
    serve.set_defaults(run=lazy("seif.serve.runtime", "cmd_serve"))


def _inputs(serve: argparse.ArgumentParser) -> None:
    """The build, its bindings, the credentials and the store."""
    serve.add_argument("--build", required=True, metavar="BUILD_DIR", help="the build to serve")
    serve.add_argument(
        "--bindings",
        required=True,
        metavar="FILE",
        help="each tool's executor (docs/runtime-config.md)",
    )
    serve.add_argument(
        "--credentials", required=True, metavar="FILE", help="the applications' credentials"
    )
    serve.add_argument(
        "--data",
        metavar="DATA_DIR",
        help="the data directory of a SQLite store (created, mode 0700); or --store",
    )
    serve.add_argument(
        "--store",
        metavar="STORE",
        help="sqlite:DATA_DIR (as --data), or postgresql://USER@HOST/DB for runtime replicas on "
        "one database (docs/scale-out.md), or memory: (nothing kept across a restart: for "
        "trying seif and for tests); exactly one of --data and --store",
    )
    serve.add_argument(
        "--replica-id",
        metavar="ID",
        help="this replica's name in the decision log, with --store postgresql:// (default: "
        "host and pid)",
    )
    serve.add_argument(
        "--lease-timeout",
        type=up_to_300_seconds,
        default=15.0,
        metavar="SECONDS",
        help="with --store postgresql://: how long this replica's lease lasts unrenewed (renewed "
        "every third of it); its unfinished calls become UNKNOWN that long after it died "
        "(default: %(default)s)",
    )


def _listening(serve: argparse.ArgumentParser) -> None:
    """Where to listen, and the shadow build and turns."""
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port",
        type=int,
        default=8787,
        help="port to listen on, 0 for a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--shadow",
        metavar="CANDIDATE_BUILD_DIR",
        help="a candidate build evaluated on live traffic, never enforced: its differences are "
        "logged as SHADOW records (`seif shadow report`, docs/operations.md)",
    )
    serve.add_argument(
        "--shadow-backlog",
        type=at_least_one,
        default=1024,
        metavar="N",
        help="decisions waiting for the shadow build at most; beyond, one is not compared and "
        "is counted in seif_shadow_dropped_total (default 1024)",
    )
    serve.add_argument(
        "--require-turn",
        action="store_true",
        help="refuse resolve and execute without a live turnId the application started",
    )


def _limits(serve: argparse.ArgumentParser) -> None:
    """The connection limits."""
    serve.add_argument(
        "--max-connections",
        type=at_least_one,
        default=1024,
        metavar="N",
        help="client connections open at once (default 1024)",
    )
    serve.add_argument(
        "--header-timeout",
        type=header_seconds,
        default=10.0,
        metavar="SECONDS",
        help="time for a connection to send a request's headers, at most 10 (default 10)",
    )
    serve.add_argument(
        "--write-timeout",
        type=up_to_300_seconds,
        default=10.0,
        metavar="SECONDS",
        help="time a client may take none of a pending answer before its connection is "
        "aborted, more than 0 and at most 300 (default 10)",
    )


def _features(serve: argparse.ArgumentParser) -> None:
    """The log format and MCP."""
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="the server's own log on stderr: text lines, or one JSON object per line "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--mcp",
        action="store_true",
        help="also serve MCP (Streamable HTTP) at /mcp/{objective} (docs/mcp.md)",
    )
    serve.add_argument(
        "--mcp-approval-wait",
        type=up_to_300_seconds,
        default=120.0,
        metavar="SECONDS",
        help="how long an MCP tools/call waits for a human's approval, more than 0 and at "
        "most the approval window, 300 (default 120)",
    )
    serve.add_argument(
        "--mcp-allowed-origin",
        type=an_origin,
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an Origin (scheme://host[:port]) whose pages may call MCP, repeatable; on a "
        "loopback --host, http://localhost, http://127.0.0.1 and http://[::1] (any port) are "
        "allowed too, and nothing else (docs/mcp.md#transport-security)",
    )
    serve.add_argument(
        "--upstream-stderr",
        type=a_directory,
        default=None,
        metavar="DIR",
        help="write each stdio upstream MCP server's stderr to DIR/<server>.stderr (mode 0600, "
        "appended); without it, discarded: it may echo arguments (docs/upstream-mcp.md)",
    )


def a_directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return path


def at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def an_origin(text: str) -> str:
    try:
        return origin(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"`{text[:64]}` is {exc}") from None


def header_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not a number") from None
    if not 0 < value <= 10:  # the spec's bound, in seconds
        raise argparse.ArgumentTypeError("must be more than 0 and at most 10 seconds")
    return value


def up_to_300_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not a number") from None
    if not 0 < value <= 300:  # `not` also refuses NaN
        raise argparse.ArgumentTypeError("must be more than 0 and at most 300 seconds")
    return value

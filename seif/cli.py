"""The `seif` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from seif import __version__
from seif.approval_cmd import add_parser as add_approval_parser
from seif.authoring import cmd_build, cmd_test, cmd_validate
from seif.language_cmd import add_parsers as add_language_parsers
from seif.output import EXIT_USAGE
from seif.prove import add_parser as add_prove_parser
from seif.release_cli import add_release_commands
from seif.replay_cmd import add_parsers as add_replay_parsers
from seif.shadow_cmd import add_parsers as add_shadow_parsers


def add_authoring_commands(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Guided tool setup (docs/authoring.md): `seif tool ...`, `starter`, `design` (`release` is
    wired with the release commands)."""
    from seif import design_cmd, starter_cmd, tool_cmd  # noqa: PLC0415

    tool_cmd.add_parser(sub, parser_class)
    starter_cmd.add_parser(sub)
    design_cmd.add_parser(sub)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # argparse's is NoReturn
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="seif", description="Declarative policy for the tools an AI agent may see and call."
    )
    parser.add_argument("--version", action="version", version=f"seif {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    validate = _command(
        sub, "validate", "check a project declaration (JSON or .seif)",
        "seif validate reference/agent-tools/context-project.json",
    )  # fmt: skip
    _project_arguments(validate)
    validate.set_defaults(run=cmd_validate)

    test = _command(
        sub, "test", "run the project's tests with the engine alone (no executor)",
        "seif test reference/agent-tools/context-project.seif",
    )  # fmt: skip
    _project_arguments(test)
    test.set_defaults(run=cmd_test)

    build = _command(
        sub, "build", "validate, test and write an immutable build",
        "seif build reference/agent-tools/context-project.json --out out/build",
    )  # fmt: skip
    _project_arguments(build, json_output=False)
    build.add_argument(
        "--out", required=True, metavar="DIR",
        help="the build directory: new, empty, or holding a previous build (replaced)",
    )  # fmt: skip
    build.set_defaults(run=cmd_build)
    serve = sub.add_parser("serve", help="run the runtime server")
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
        "one database (docs/scale-out.md); exactly one of --data and --store",
    )
    serve.add_argument(
        "--replica-id",
        metavar="ID",
        help="this replica's name in the decision log, with --store postgresql:// (default: "
        "host and pid)",
    )
    serve.add_argument(
        "--lease-timeout",
        type=_up_to_300_seconds,
        default=15.0,
        metavar="SECONDS",
        help="with --store postgresql://: how long this replica's lease lasts unrenewed (renewed "
        "every third of it); its unfinished calls become UNKNOWN that long after it died "
        "(default: %(default)s)",
    )
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
        type=_at_least_one,
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
    serve.add_argument(
        "--max-connections",
        type=_at_least_one,
        default=1024,
        metavar="N",
        help="client connections open at once (default 1024)",
    )
    serve.add_argument(
        "--header-timeout",
        type=_header_seconds,
        default=10.0,
        metavar="SECONDS",
        help="time for a connection to send a request's headers, at most 10 (default 10)",
    )
    serve.add_argument(
        "--write-timeout",
        type=_up_to_300_seconds,
        default=10.0,
        metavar="SECONDS",
        help="time a client may take none of a pending answer before its connection is "
        "aborted, more than 0 and at most 300 (default 10)",
    )
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
        type=_up_to_300_seconds,
        default=120.0,
        metavar="SECONDS",
        help="how long an MCP tools/call waits for a human's approval, more than 0 and at "
        "most the approval window, 300 (default 120)",
    )
    serve.set_defaults(run=_serve)
    add_approval_parser(sub)  # `seif approval-server`
    add_prove_parser(sub)  # `seif prove`
    add_language_parsers(sub)  # `seif convert`, `seif fmt`
    add_replay_parsers(sub)  # `seif trace export`, `seif replay`
    add_shadow_parsers(sub)  # `seif shadow report`
    add_release_commands(sub, _Parser)  # register, promote, registry, bundle, bindings
    add_authoring_commands(sub, _Parser)  # tool, starter, release, design
    _with_examples(sub)
    return parser


EXAMPLES = {
    "serve": "seif serve --build out/build --bindings bindings.json --credentials "
    "credentials.json --data /var/lib/seif",
    "approval-server": "seif approval-server --runtime http://127.0.0.1:8787 --approvers "
    "approvers.json",
    "prove": "seif prove --output evidence/context-tools-delivery.json --keep",
    "convert": "seif convert reference/agent-tools/context-project.json --to seif --out p.seif",
    "fmt": "seif fmt p.seif --check",
    "trace": "seif trace export --data /var/lib/seif --out decisions.jsonl",
    "replay": "seif replay --build out/build --log decisions.cbor --candidate out/candidate",
    "shadow": "seif shadow report --data /var/lib/seif",
    "register": "seif register --build out/build --registry /srv/seif-registry",
    "promote": "seif promote --registry /srv/seif-registry --candidate blake3:<digest>",
    "registry": "seif registry list --registry /srv/seif-registry",
    "bundle": "seif bundle --build out/build --out /tmp/delivery/bundle",
    "bindings": "seif bindings template --build out/build --out bindings.template.json",
}
"""The example each sub-command's help ends with (validate, test and build set their own)."""


def _with_examples(sub: Any) -> None:
    for name, example in EXAMPLES.items():
        command = sub.choices[name]
        command.epilog = f"example:\n  {example}"
        command.formatter_class = argparse.RawDescriptionHelpFormatter


def _command(sub: Any, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    """A sub-command whose help shows an example."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _project_arguments(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    parser.add_argument("project_file", nargs="?", metavar="FILE", help="the project file")
    parser.add_argument(
        "--project", metavar="FILE", help="the project file (`.json` or `.seif`), as FILE"
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _header_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not a number") from None
    if not 0 < value <= 10:  # the spec's bound, in seconds
        raise argparse.ArgumentTypeError("must be more than 0 and at most 10 seconds")
    return value


def _up_to_300_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text[:32]}` is not a number") from None
    if not 0 < value <= 300:  # `not` also refuses NaN
        raise argparse.ArgumentTypeError("must be more than 0 and at most 300 seconds")
    return value


def _serve(args: argparse.Namespace) -> int:
    from seif.serve import cmd_serve  # noqa: PLC0415  # aiohttp loads only for `seif serve`

    return cmd_serve(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "project_file"):
        if args.project is not None and args.project_file is not None:
            parser.error("give the project once: as FILE or as --project FILE")
        args.project = args.project or args.project_file
        if args.project is None:
            parser.error(f"`seif {args.command}` needs a project file: seif {args.command} FILE")
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

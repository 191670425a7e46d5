"""The `seif` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from seif import __version__
from seif.approval_cmd import add_parser as add_approval_parser
from seif.authoring import cmd_build, cmd_test, cmd_validate
from seif.language_cmd import add_parsers as add_language_parsers
from seif.output import EXIT_USAGE
from seif.prove import add_parser as add_prove_parser
from seif.release_cli import add_release_commands
from seif.replay_cmd import add_parsers as add_replay_parsers


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

    validate = sub.add_parser("validate", help="check a project declaration")
    validate.add_argument("--project", required=True, metavar="FILE")
    validate.add_argument("--json", action="store_true", help="print one JSON document")
    validate.set_defaults(run=cmd_validate)

    test = sub.add_parser("test", help="run the project's tests with the engine alone")
    test.add_argument("--project", required=True, metavar="FILE")
    test.add_argument("--json", action="store_true", help="print one JSON document")
    test.set_defaults(run=cmd_test)

    build = sub.add_parser("build", help="validate, test and write an immutable build")
    build.add_argument("--project", required=True, metavar="FILE")
    build.add_argument("--out", required=True, metavar="DIR")
    build.set_defaults(run=cmd_build)
    serve = sub.add_parser("serve", help="run the runtime server")
    serve.add_argument("--build", required=True, metavar="BUILD_DIR")
    serve.add_argument("--bindings", required=True, metavar="FILE")
    serve.add_argument("--credentials", required=True, metavar="FILE")
    serve.add_argument("--data", required=True, metavar="DATA_DIR")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    serve.add_argument("--require-turn", action="store_true")
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
        type=_write_seconds,
        default=10.0,
        metavar="SECONDS",
        help="time a client may take none of a pending answer before its connection is "
        "aborted, more than 0 and at most 300 (default 10)",
    )
    serve.set_defaults(run=_serve)
    add_approval_parser(sub)  # `seif approval-server`
    add_prove_parser(sub)  # `seif prove`
    add_language_parsers(sub)  # `seif convert`, `seif fmt`
    add_replay_parsers(sub)  # `seif trace export`, `seif replay`
    add_release_commands(sub, _Parser)  # register, promote, registry, bundle, bindings
    return parser


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


def _write_seconds(text: str) -> float:
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
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

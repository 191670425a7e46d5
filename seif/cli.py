"""The `seif` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from seif import __version__
from seif.authoring import cmd_build, cmd_test, cmd_validate
from seif.output import EXIT_USAGE
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
    serve.set_defaults(run=_serve)
    add_replay_parsers(sub)  # `seif trace export`, `seif replay`
    add_release_commands(sub, _Parser)  # register, promote, registry, bundle, bindings
    return parser


def _serve(args: argparse.Namespace) -> int:
    from seif.serve import cmd_serve  # noqa: PLC0415  # aiohttp loads only for `seif serve`

    return cmd_serve(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

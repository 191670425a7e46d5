"""What every command's parser shares: the parser class that exits 2 on a usage error, a
sub-command whose help ends with its example, and a handler imported only when it runs."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

from seif.cli.output import EXIT_USAGE

Command = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit 2 (``EXIT_USAGE``), as every refusal of a
    malformed input does."""

    def error(self, message: str) -> None:  # type: ignore[override]  # argparse's is NoReturn
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def command(
    sub: Any, name: str, summary: str, example: str, *, description: str | None = None
) -> argparse.ArgumentParser:
    """The sub-command ``name`` of ``sub``, its help ending with ``example``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def subcommands(parser: argparse.ArgumentParser, dest: str) -> Any:
    """The required sub-commands of ``parser`` (``seif trace export``...), parsed alike."""
    return parser.add_subparsers(dest=dest, required=True, parser_class=type(parser))


def lazy(module: str, name: str) -> Command:
    """A handler that imports ``module`` when it runs and calls its ``name``: what the command
    alone needs (the server framework, the bundle's wheels) does not load at `seif` start-up."""

    def run(args: argparse.Namespace) -> int:
        handler: Command = getattr(importlib.import_module(module), name)
        return handler(args)

    return run

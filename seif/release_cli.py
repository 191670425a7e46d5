"""The argparse wiring of the release commands: register, promote, registry, bundle, bindings,
release.

Each command's module is imported only when that command runs.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

Command = Callable[[argparse.Namespace], int]


def lazy(module: str, name: str) -> Command:
    """A command that imports ``module`` when it runs and calls its ``name``."""

    def run(args: argparse.Namespace) -> int:
        command: Command = getattr(importlib.import_module(module), name)
        return command(args)

    return run


def add_release_commands(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add the release sub-commands to ``sub`` (the ``seif`` sub-parsers)."""
    _register(sub)
    _promote(sub)
    _registry(sub, parser_class)
    _bundle(sub)
    _bindings(sub, parser_class)
    _release(sub)


def _register(sub: Any) -> None:
    register = sub.add_parser("register", help="verify, test and store a build in a registry")
    register.add_argument("--build", required=True, metavar="DIR", help="the build to register")
    register.add_argument("--registry", required=True, metavar="REG", help="the registry directory")
    register.add_argument("--json", action="store_true", help="print one JSON document")
    register.set_defaults(run=lazy("seif.release", "cmd_register"))


def _promote(sub: Any) -> None:
    promote = sub.add_parser("promote", help="promote a registered build that keeps its baseline")
    promote.add_argument("--registry", required=True, metavar="REG", help="the registry directory")
    promote.add_argument(
        "--candidate", required=True, metavar="DIGEST", help="the registered build to promote"
    )
    promote.add_argument(
        "--baseline", metavar="DIGEST", help="default: the currently promoted build"
    )
    promote.add_argument("--by", metavar="NAME", help="who promotes; default: the OS user")
    promote.add_argument("--json", action="store_true", help="print one JSON document")
    promote.set_defaults(run=lazy("seif.release", "cmd_promote"))


def _registry(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    registry = sub.add_parser("registry", help="list a registry's builds or its promotions")
    inner = registry.add_subparsers(
        dest="registry_command", required=True, parser_class=parser_class
    )
    for name, help_text, function in (
        ("list", "every registered build, verified", "cmd_registry_list"),
        ("history", "the promotion history, oldest first", "cmd_registry_history"),
    ):
        command = inner.add_parser(name, help=help_text)
        command.add_argument("--registry", required=True, metavar="REG", help="the registry")
        command.add_argument("--json", action="store_true", help="print one JSON document")
        command.set_defaults(run=lazy("seif.release", function))


def _bundle(sub: Any) -> None:
    bundle = sub.add_parser("bundle", help="write a self-contained Runtime bundle of a build")
    bundle.add_argument("--build", required=True, metavar="DIR", help="the build to bundle")
    bundle.add_argument(
        "--out", required=True, metavar="DIR", help="the bundle directory (new or empty)"
    )
    bundle.add_argument(
        "--source", metavar="DIR", help="the project source to build seif's wheel from"
    )
    bundle.set_defaults(run=lazy("seif.bundle", "cmd_bundle"))


def _bindings(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    bindings = sub.add_parser("bindings", help="bindings files for a build")
    inner = bindings.add_subparsers(
        dest="bindings_command", required=True, parser_class=parser_class
    )
    template = inner.add_parser("template", help="a bindings file to fill in, one entry per tool")
    template.add_argument("--build", required=True, metavar="DIR", help="the build to bind")
    template.add_argument(
        "--out", metavar="FILE", help="write FILE and contracts.json beside it (default: stdout)"
    )
    template.set_defaults(run=lazy("seif.bindings", "cmd_bindings_template"))


RELEASE_EXAMPLE = (
    "seif release --project context-project.json --registry /srv/seif-registry "
    "--environment staging"
)


def _release(sub: Any) -> None:
    """``seif release`` (guided: docs/authoring.md)."""
    parser = sub.add_parser(
        "release",
        help="validate, build, register and write the environment's next bindings revision",
        description="Validate, test, build and register a project, then write the next revision "
        "of an environment's bindings file with what to fill in. Nothing is promoted or deployed.",
        epilog=f"example:\n  {RELEASE_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--project", required=True, metavar="FILE", help="the project file")
    parser.add_argument("--registry", required=True, metavar="REG", help="the registry directory")
    parser.add_argument(
        "--environment", required=True, metavar="NAME", help="the environment to bind, an id"
    )
    parser.add_argument(
        "--bindings",
        metavar="FILE",
        help="the bindings file (default: bindings.NAME.json beside the project file)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=lazy("seif.release_cmd", "cmd_release"))

"""`seif register`: verify, test and store a build in a registry (docs/release.md)."""

from __future__ import annotations

import argparse
from typing import Any

from compiler.builds.registry import Registry
from compiler.diagnostics import CompileError
from policy.engine.testing import run_tests
from seif.cli.builds import refuse, verified_build
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    emit_json,
    print_report,
    problem,
    report_json,
    say,
)
from seif.cli.parsing import command

EXAMPLE = "seif register --build out/build --registry /srv/seif-registry"


def add_parser(sub: Any) -> None:
    register = command(sub, "register", "verify, test and store a build in a registry", EXAMPLE)
    register.add_argument("--build", required=True, metavar="DIR", help="the build to register")
    register.add_argument("--registry", required=True, metavar="REG", help="the registry directory")
    register.add_argument("--json", action="store_true", help="print one JSON document")
    register.set_defaults(run=cmd_register)


def cmd_register(args: argparse.Namespace) -> int:
    try:
        build = verified_build(args.build)
    except CompileError as exc:
        return refuse(exc, args.build, as_json=args.json)
    report = run_tests(build.project)
    if not report.passed:
        if args.json:
            emit_json({"ok": False, "digest": build.digest, "tests": report_json(report)})
        else:
            print_report(args.build, report, to_stderr=True)
            problem(args.build, "TESTS_FAILED", "the build's tests fail; not registered")
        return EXIT_NOT_ACCEPTABLE
    try:
        registered = Registry(args.registry).register(build)
    except CompileError as exc:
        return refuse(exc, args.registry, as_json=args.json)
    if args.json:
        emit_json(
            {
                "ok": True,
                "digest": build.digest,
                "stored": registered.stored,
                "path": str(registered.path),
                "tests": report_json(report),
            }
        )
    else:
        how = "registered" if registered.stored else "already registered, verified unchanged:"
        say(f"{how} {build.digest}")
    return EXIT_OK

"""`seif bundle`: a self-contained Runtime bundle of a verified build (docs/release.md). The
bundle is assembled by :mod:`seif.bundle.assemble`, which loads only when the command runs."""

from __future__ import annotations

import argparse
from typing import Any

from compiler.diagnostics import CompileError
from policy.engine.testing import run_tests
from seif.cli.builds import refuse, verified_build
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    print_report,
    problem,
    say,
    warn,
)
from seif.cli.parsing import command

EXAMPLE = "seif bundle --build out/build --out /tmp/delivery/bundle"


def add_parser(sub: Any) -> None:
    bundle = command(sub, "bundle", "write a self-contained Runtime bundle of a build", EXAMPLE)
    bundle.add_argument("--build", required=True, metavar="DIR", help="the build to bundle")
    bundle.add_argument(
        "--out", required=True, metavar="DIR", help="the bundle directory (new or empty)"
    )
    bundle.add_argument(
        "--source", metavar="DIR", help="the project source to build seif's wheel from"
    )
    bundle.set_defaults(run=cmd_bundle)


def cmd_bundle(args: argparse.Namespace) -> int:
    from seif.bundle.assemble import make_bundle, out_dir  # noqa: PLC0415  # only when it runs
    from seif.bundle.wheels import BundleError, source_root  # noqa: PLC0415

    try:
        build = verified_build(args.build)
    except CompileError as exc:
        code = refuse(exc, args.build, as_json=False)
        warn(f"{args.build}: the build does not verify; no bundle written")
        return code
    report = run_tests(build.project)
    if not report.passed:
        print_report(args.build, report, to_stderr=True)
        problem(args.build, "TESTS_FAILED", "the build's tests fail; no bundle written")
        return EXIT_NOT_ACCEPTABLE
    try:
        out = out_dir(args.out)
        manifest = make_bundle(build, out, source_root(args.source))
    except BundleError as exc:
        problem(args.out, exc.code, exc.message)
        return EXIT_USAGE if exc.usage else EXIT_NOT_ACCEPTABLE
    except OSError as exc:
        problem(args.out, "BUNDLE_WRITE_FAILED", f"cannot write: {exc.strerror or exc}")
        return EXIT_USAGE
    say(f"bundle of {build.digest} in {out.resolve()}")
    say(f"  {len(manifest['wheels'])} wheels for Python {manifest['python']['version']}")
    say(f"  start it with: {out.resolve() / 'run'} --bindings B --credentials C --data D")
    return EXIT_OK

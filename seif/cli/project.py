"""`seif validate`, `seif test` and `seif build`: one project file compiled, its tests run with
the engine alone, and an immutable build written. The three take the project the same way (as
FILE or as ``--project FILE``) and report it the same way, so they are one module."""

from __future__ import annotations

import argparse
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from compiler.builds.build import write_build
from compiler.driver import CompileResult, compile_file
from policy.engine.testing import TestReport, run_test, run_tests
from policy.ir import Project
from seif.cli.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    print_report,
    print_results,
    problem,
    refused,
    say,
    warn,
)
from seif.cli.parsing import command


def add_parser(sub: Any) -> None:
    """``seif validate``, ``seif test`` and ``seif build``."""
    for name, summary, example, run in (
        ("validate", "check a project declaration (JSON or .seif)",
         "seif validate reference/agent-tools/context-project.json", cmd_validate),
        ("test", "run the project's tests with the engine alone (no executor)",
         "seif test reference/agent-tools/context-project.seif", cmd_test),
    ):  # fmt: skip
        parser = command(sub, name, summary, example, description=summary)
        _project_arguments(parser)
        parser.set_defaults(run=run)
        if name == "test":
            parser.add_argument(
                "-v", "--verbose", action="store_true", help="list every test with its result"
            )
            parser.add_argument(
                "--run", metavar="PATTERN", dest="pattern",
                help="run only the tests whose id matches this glob (`*`, `?`, `[...]`); "
                "a pattern that matches no test is refused (exit 2)",
            )  # fmt: skip
    summary = "validate, test and write an immutable build"
    example = "seif build reference/agent-tools/context-project.json --out out/build"
    build = command(sub, "build", summary, example, description=summary)
    _project_arguments(build, json_output=False)
    build.add_argument(
        "--out", required=True, metavar="DIR",
        help="the build directory: new, empty, or holding a previous build (replaced)",
    )  # fmt: skip
    build.set_defaults(run=cmd_build)


def _project_arguments(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    parser.add_argument("project_file", nargs="?", metavar="FILE", help="the project file")
    parser.add_argument(
        "--project", metavar="FILE", help="the project file (`.json` or `.seif`), as FILE"
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def project_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``args.project`` from FILE or ``--project FILE``, given once (a usage error otherwise)."""
    if args.project is not None and args.project_file is not None:
        parser.error("give the project once: as FILE or as --project FILE")
    args.project = args.project or args.project_file
    if args.project is None:
        parser.error(f"`seif {args.command}` needs a project file: seif {args.command} FILE")


def exit_code_for(result: CompileResult) -> int:
    """0 valid; 2 when the file could not be read at all; 1 for any other diagnostic."""
    if result.ok:
        return EXIT_OK
    if any(d.code == "FILE_UNREADABLE" for d in result.diagnostics):
        return EXIT_USAGE
    return EXIT_NOT_ACCEPTABLE


def tool_rows(project: Project | None) -> list[dict[str, Any]]:
    if project is None:
        return []
    return [
        {"id": t.id, "version": t.version, "contractDigest": t.contract_digest}
        for t in project.tools
    ]


def cmd_validate(args: argparse.Namespace) -> int:
    result = compile_file(args.project)
    if args.json:
        emit_json(
            {
                "ok": result.ok,
                "diagnostics": [d.to_json() for d in result.diagnostics],
                "tools": tool_rows(result.project),
            }
        )
        return exit_code_for(result)
    print_diagnostics(result.diagnostics, args.project, result.source)
    warnings = _counted(sum(d.severity == "warning" for d in result.diagnostics), "warning")
    if result.project is None:
        errors = _counted(sum(d.severity == "error" for d in result.diagnostics), "error")
        say(f"{args.project}: invalid, {errors}" + (f", {warnings}" if warnings else ""))
    else:
        say(
            f"{args.project}: valid, {len(result.project.tools)} tools"
            + (f", {warnings}" if warnings else "")
        )
        for row in tool_rows(result.project):
            say(f"  {row['id']} {row['version']} {row['contractDigest']}")
    return exit_code_for(result)


def _counted(count: int, noun: str) -> str:
    """``1 warning``, ``2 warnings``; ``""`` for none."""
    return f"{count} {noun}{'s' if count != 1 else ''}" if count else ""


BUILD_FILES = frozenset({"build.cbor", "manifest.json"})


def refused_out(out: Path) -> str | None:
    """Why ``--out`` cannot take a build (None: it can): it is a file, or a directory holding
    anything but a previous build, which nothing must overwrite."""
    if out.exists() and not out.is_dir():
        return f"`{out}` is a file: give a directory for the build"
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in BUILD_FILES)
        if others:
            shown = ", ".join(f"`{name}`" for name in others[:3])
            return f"`{out}` holds other files ({shown}): give a new or empty directory"
    return None


def cmd_build(args: argparse.Namespace) -> int:
    refusal = refused_out(Path(args.out))
    if refusal is not None:
        problem(args.out, "OUT_REFUSED", f"{refusal}; nothing was written")
        return EXIT_USAGE
    result = compile_file(args.project)
    if result.project is None:
        print_diagnostics(result.diagnostics, args.project, result.source)
        warn(f"{args.project}: invalid, no build written")
        return exit_code_for(result)
    print_diagnostics(result.diagnostics, args.project, result.source)  # its warnings
    report = run_tests(result.project)
    if not report.passed:
        print_report(args.project, report, to_stderr=True)
        warn(f"{args.project}: tests failed, no build written")
        return EXIT_NOT_ACCEPTABLE
    build = write_build(result.project, args.out)
    say(build.digest)
    return EXIT_OK


def selected_tests(project: Project, pattern: str | None) -> TestReport:
    """The report of the project's tests whose id matches the glob ``pattern`` (all of them
    without one), each at its index in the file so that failures keep their pointers."""
    return TestReport(
        tuple(
            run_test(project, index, test)
            for index, test in enumerate(project.tests)
            if pattern is None or fnmatchcase(test.id, pattern)
        )
    )


def cmd_test(args: argparse.Namespace) -> int:
    result = compile_file(args.project)
    if result.project is None:
        if args.json:
            emit_json({"ok": False, "diagnostics": [d.to_json() for d in result.diagnostics]})
        else:
            print_diagnostics(result.diagnostics, args.project, result.source)
        return exit_code_for(result)
    if not args.json:
        print_diagnostics(result.diagnostics, args.project, result.source)  # its warnings
    report = selected_tests(result.project, args.pattern)
    if args.pattern is not None and not report.results:
        count = len(result.project.tests)
        message = f"no test id matches `{args.pattern}` ({count} test{'s' if count != 1 else ''})"
        return refused(f"{args.project}", "NO_TEST_MATCHES", message, as_json=args.json)
    if args.json:
        emit_json(report.to_json())
    else:
        if args.verbose:
            print_results(report)
        print_report(args.project, report)
        count, passed = len(report.results), sum(r.passed for r in report.results)
        say(f"{count} test{'' if count == 1 else 's'}, {passed} passed")
    return EXIT_OK if report.passed else EXIT_NOT_ACCEPTABLE

"""`seif validate` and `seif build`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compiler.build import write_build
from compiler.project import CompileResult, compile_file
from policy.ir import Project
from policy.strictjson import dumps
from policy.testing import TestReport, run_tests
from seif.output import (
    EXIT_NOT_ACCEPTABLE,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    print_diagnostics,
    problem,
    say,
    warn,
)


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
    if result.project is None:
        count = len(result.diagnostics)
        say(f"{args.project}: invalid, {count} error{'s' if count != 1 else ''}")
    else:
        say(f"{args.project}: valid, {len(result.project.tools)} tools")
        for row in tool_rows(result.project):
            say(f"  {row['id']} {row['version']} {row['contractDigest']}")
    return exit_code_for(result)


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
    report = run_tests(result.project)
    if not report.passed:
        print_report(args.project, report, to_stderr=True)
        warn(f"{args.project}: tests failed, no build written")
        return EXIT_NOT_ACCEPTABLE
    build = write_build(result.project, args.out)
    say(build.digest)
    return EXIT_OK


def print_report(filename: str, report: TestReport, *, to_stderr: bool = False) -> None:
    """Every failing assertion with expected and actual, then the two figures."""
    out = warn if to_stderr else say
    for result, assertion in report.failures():
        out(
            f"{filename}:{assertion.pointer}: FAIL {result.id}: {assertion.subject}: "
            f"expected {_show(assertion.expected)}, actual {_show(assertion.actual)}"
        )
    out(f"context: {report.figure('context')} passed, tools: {report.figure('tools')} passed")


def _show(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value, sort_keys=True)


def cmd_test(args: argparse.Namespace) -> int:
    result = compile_file(args.project)
    if result.project is None:
        if args.json:
            emit_json({"ok": False, "diagnostics": [d.to_json() for d in result.diagnostics]})
        else:
            print_diagnostics(result.diagnostics, args.project, result.source)
        return exit_code_for(result)
    report = run_tests(result.project)
    if args.json:
        emit_json(report.to_json())
    else:
        print_report(args.project, report)
        say(f"{len(report.results)} tests, {sum(r.passed for r in report.results)} passed")
    return EXIT_OK if report.passed else EXIT_NOT_ACCEPTABLE

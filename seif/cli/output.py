"""Rendering for the CLI: one place for text and JSON output and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from policy.diagnostic import Diagnostic, Location, render
from policy.engine.testing import TestReport
from policy.json.strict import dumps

EXIT_OK = 0
EXIT_NOT_ACCEPTABLE = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3


def emit_json(document: Any) -> None:
    """Exactly one JSON document on stdout."""
    sys.stdout.write(dumps(document, indent=2) + "\n")


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def warn(text: str) -> None:
    sys.stderr.write(text + "\n")


def refused(command: str, code: str, message: str, *, as_json: bool) -> int:
    """Report a refused input (``command: message`` on stderr; with ``as_json``, the document
    ``{"ok": false, "error": {code, message}}`` on stdout too) and return :data:`EXIT_USAGE`."""
    warn(f"{command}: {message}")
    if as_json:
        emit_json({"ok": False, "error": {"code": code, "message": message}})
    return EXIT_USAGE


def print_diagnostics(
    diagnostics: Iterable[Diagnostic],
    file: str | None = None,
    source: str | None = None,
    *,
    to_stderr: bool = True,
) -> None:
    """Each diagnostic rendered (:func:`policy.diagnostic.render`: ``file`` names the file of
    those that name none; ``source`` gives a caret under a line and column), one per line."""
    out = warn if to_stderr else say
    for d in diagnostics:
        out(render(d, file, source))


def problem(file: str, code: str, message: str) -> None:
    """One problem of a whole file on stderr: ``FILE: CODE: message``."""
    warn(render(Diagnostic(code=code, message=message, location=Location(file=file))))


def print_report(filename: str, report: TestReport, *, to_stderr: bool = False) -> None:
    """A project's test report: every failing assertion with expected and actual, then the two
    figures."""
    out = warn if to_stderr else say
    for result, assertion in report.failures():
        out(
            f"{filename}:{assertion.pointer}: FAIL {result.id}: {assertion.subject}: "
            f"expected {_show(assertion.expected)}, actual {_show(assertion.actual)}"
        )
    out(f"context: {report.figure('context')} passed, tools: {report.figure('tools')} passed")


def print_results(report: TestReport) -> None:
    """Every test with its result, one per line: ``PASS ID (objective O)``, ``guard`` for a
    guard, and its assertions passed of their total."""
    for result in report.results:
        verdict = "PASS" if result.passed else "FAIL"
        passed = sum(a.passed for a in result.assertions)
        kind = ", guard" if result.guard else ""
        say(
            f"{verdict} {result.id} (objective {result.objective}{kind}: "
            f"{passed}/{len(result.assertions)} assertions)"
        )


def _show(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value, sort_keys=True)


def report_json(report: TestReport) -> dict[str, Any]:
    """A project's test report as JSON: the two figures and every failing assertion."""
    doc = report.to_json()
    failures = [{"test": r.id, **a.to_json()} for r, a in report.failures()]
    return {"ok": doc["ok"], "context": doc["context"], "tools": doc["tools"], "failures": failures}

"""The compiler's side of diagnostics: what a pass reports into, and what the compile and load
APIs raise.

The one diagnostic type, its location and its rendering are :mod:`policy.diagnostic` (every
layer uses them); they are importable from here too, as they were. A compiler diagnostic
carries the name of the pass that produced it.
"""

from __future__ import annotations

from collections.abc import Iterable

from policy.diagnostic import Diagnostic, DiagnosticError, Location, Severity, did_you_mean

__all__ = ["Collector", "CompileError", "Diagnostic", "Location", "did_you_mean"]


class CompileError(DiagnosticError):
    """Raised by the compile and load APIs; ``diagnostics`` lists every problem found."""


class Collector:
    """What a pass appends its diagnostics to."""

    def __init__(self, pass_name: str = "") -> None:
        self.pass_name = pass_name
        self.items: list[Diagnostic] = []

    def error(self, code: str, pointer: str, message: str) -> None:
        self.add(code, message, Location(pointer=pointer))

    def at(self, code: str, line: int, column: int, message: str) -> None:
        self.add(code, message, Location(line=line, column=column, cite="line"))

    def add(
        self, code: str, message: str, location: Location, severity: Severity = "error"
    ) -> None:
        self.items.append(
            Diagnostic(
                code=code,
                message=message,
                location=location,
                severity=severity,
                pass_name=self.pass_name,
            )
        )

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.items.extend(diagnostics)

    def __bool__(self) -> bool:
        return bool(self.items)

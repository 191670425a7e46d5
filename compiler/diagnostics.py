"""Diagnostics: one value type for every compile problem, collected, sorted, rendered here.

A diagnostic carries a stable ``code``, a location (a JSON pointer into the declaration, or a
``line``/``column`` in a ``.seif`` or unparsable file), a one-line ``message`` that says what to
change (lowercase, no final period, user values in backticks) and the name of the pass that
produced it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    code: str
    message: str
    pointer: str | None = None
    line: int | None = None
    column: int | None = None
    pass_name: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code}
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.line is not None:
            out["line"] = self.line
            out["column"] = self.column
        out["message"] = self.message
        return out

    @property
    def location(self) -> str:
        if self.line is not None:
            return f"{self.line}:{self.column}"
        return self.pointer if self.pointer is not None else ""


class CompileError(Exception):
    """Raised by the compile and load APIs; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        summary = f"{first.location}: {first.code}: {first.message}" if first else "failed"
        more = len(self.diagnostics) - 1
        super().__init__(summary + (f" (and {more} more)" if more > 0 else ""))


class Collector:
    """What a pass appends its diagnostics to."""

    def __init__(self, pass_name: str = "") -> None:
        self.pass_name = pass_name
        self.items: list[Diagnostic] = []

    def error(self, code: str, pointer: str, message: str) -> None:
        self.items.append(
            Diagnostic(code=code, pointer=pointer, message=message, pass_name=self.pass_name)
        )

    def at(self, code: str, line: int, column: int, message: str) -> None:
        self.items.append(
            Diagnostic(
                code=code, line=line, column=column, message=message, pass_name=self.pass_name
            )
        )

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.items.extend(diagnostics)

    def __bool__(self) -> bool:
        return bool(self.items)


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """``; did you mean `x`?`` naming the known name closest to ``value`` (itself when it is
    one), or ``""`` when none is close: the one spelling of that hint, for every message."""
    names = sorted(known)
    if value in names:
        return f"; did you mean `{value}`?"
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def render_text(diagnostic: Diagnostic, filename: str, source: str | None = None) -> str:
    """``FILE:POINTER: CODE: message``, or ``FILE:LINE:COLUMN: CODE: message`` with a caret."""
    where = f"{filename}:{diagnostic.location}" if diagnostic.location else filename
    head = f"{where}: {diagnostic.code}: {diagnostic.message}"
    if diagnostic.line is None or source is None:
        return head
    lines = source.splitlines()
    if not 1 <= diagnostic.line <= len(lines):
        return head
    text = lines[diagnostic.line - 1]
    caret = " " * (max(diagnostic.column or 1, 1) - 1) + "^"
    return f"{head}\n    {text}\n    {caret}"

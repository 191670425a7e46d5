"""One located problem for every layer, and its one rendering.

A :class:`Diagnostic` is a stable ``code``, a :class:`Location`, a one-line ``message`` that says
what to change (lowercase, no final period, user values in backticks) and, optionally, a
``hint``: what the operator can do about it. The compiler, the configuration loaders, the data
directory's checks and every command make these and print them through :func:`render` (text) or
:meth:`Diagnostic.to_json` (``--json``), so the three forms are written once:

- ``FILE:WHERE: CODE: message``, ``WHERE`` being a JSON pointer or ``LINE:COLUMN`` (nothing at
  the root of a document, or for a file as a whole);
- the same line, then the source line and a caret under the column, for a location in text;
- ``{"code", "pointer", "line", "column", "message"}`` with the keys the location has.

A location in a JSON file cites its pointer; its line and column (the pointer resolved against
the text, :mod:`policy.json.positions`) ride along for editors and ``--json``. A location in text
written by hand (a `.seif` file, JSON that does not parse) cites its line and column. Pure: no
I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Cite = Literal["pointer", "line"]
Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """Where a problem is: a ``file`` (None: the reader knows which), a JSON ``pointer`` (``""``
    is the whole document), a 1-based ``line`` and ``column`` (columns count characters), an
    optional exclusive ``end_line``/``end_column``, and which of the two the text form cites."""

    file: str | None = None
    pointer: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    cite: Cite = "pointer"

    @property
    def cites_line(self) -> bool:
        """The text form names the line and column (and shows a caret) rather than a pointer."""
        return self.line is not None and (self.cite == "line" or self.pointer is None)

    @property
    def where(self) -> str:
        """The ``WHERE`` of ``FILE:WHERE``: ``LINE:COLUMN``, the pointer, or ``""``."""
        if self.cites_line:
            return f"{self.line}:{self.column}"
        return self.pointer or ""

    def __str__(self) -> str:
        """The location on its own (never empty: the whole document is ``/``)."""
        return self.where or "/"

    def at(self, line: int, column: int, end: tuple[int, int] | None = None) -> Location:
        """This location with a line and column (and an end), still citing what it cited."""
        end_line, end_column = end if end is not None else (None, None)
        return replace(self, line=line, column=column, end_line=end_line, end_column=end_column)


NOWHERE = Location()


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One problem: ``code``, ``message``, where it is, an optional ``hint`` (what to do) and
    the name of the compiler pass that found it (not part of equality)."""

    code: str
    message: str
    location: Location = NOWHERE
    hint: str | None = None
    severity: Severity = "error"
    """``error`` refuses what it names; a ``warning`` is reported and refuses nothing."""
    pass_name: str = field(default="", compare=False)

    @property
    def file(self) -> str | None:
        return self.location.file

    @property
    def pointer(self) -> str | None:
        return self.location.pointer

    @property
    def line(self) -> int | None:
        return self.location.line

    @property
    def column(self) -> int | None:
        return self.location.column

    def moved(self, **location: Any) -> Diagnostic:
        """This diagnostic with its location's fields replaced (``file=``, ``pointer=``...)."""
        return replace(self, location=replace(self.location, **location))

    def to_json(self, file: str | None = None) -> dict[str, Any]:
        """The ``--json`` form: ``file`` first when given, then ``code``, ``severity``, the
        location's ``pointer``, ``line`` and ``column`` (those it has), ``message`` and
        ``hint``."""
        out: dict[str, Any] = {} if file is None else {"file": file}
        out["code"] = self.code
        out["severity"] = self.severity
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.line is not None:
            out["line"] = self.line
            out["column"] = self.column
        out["message"] = self.message
        if self.hint is not None:
            out["hint"] = self.hint
        return out


def refusing(diagnostics: Iterable[Diagnostic]) -> bool:
    """Whether any of ``diagnostics`` is an error (warnings refuse nothing)."""
    return any(d.severity == "error" for d in diagnostics)


def headline(diagnostic: Diagnostic) -> str:
    """``CODE: message``: a diagnostic without its location, as another one quotes it."""
    return f"{diagnostic.code}: {diagnostic.message}"


def render_lines(
    diagnostic: Diagnostic, file: str | None = None, source: str | None = None
) -> list[str]:
    """The text form, a line at a time: ``FILE:WHERE: CODE: message`` (``file``: the file to
    name when the diagnostic names none); with the ``source`` text of a location that cites a
    line, that line and a caret under the column; with a hint, ``FILE: remedy: hint``."""
    name = diagnostic.file if diagnostic.file is not None else file
    where = diagnostic.location.where
    place = ":".join(part for part in (name, where) if part)
    lines = [f"{place}: {headline(diagnostic)}" if place else headline(diagnostic)]
    lines.extend(_caret(diagnostic.location, source))
    if diagnostic.hint:
        lines.append(f"{name}: remedy: {diagnostic.hint}" if name else f"remedy: {diagnostic.hint}")
    return lines


def render(diagnostic: Diagnostic, file: str | None = None, source: str | None = None) -> str:
    """:func:`render_lines` as one text."""
    return "\n".join(render_lines(diagnostic, file, source))


def _caret(location: Location, source: str | None) -> list[str]:
    if source is None or not location.cites_line:
        return []
    lines = source.splitlines()
    line = location.line or 0
    if not 1 <= line <= len(lines):
        return []
    caret = " " * (max(location.column or 1, 1) - 1) + "^"
    return [f"    {lines[line - 1]}", f"    {caret}"]


class DiagnosticError(Exception):
    """A refusal carrying every problem found (``diagnostics``); its text is the first one's
    rendering and how many more there are."""

    empty = "failed"
    """The text of a refusal that carries no diagnostic."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        first = render_lines(self.diagnostics[0])[0] if self.diagnostics else self.empty
        more = len(self.diagnostics) - 1
        super().__init__(first + (f" (and {more} more)" if more > 0 else ""))


def nearest(value: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``value`` (itself when it is one), or None when none is close:
    the one measure of "close" behind every "did you mean"."""
    names = sorted(known)
    if value in names:
        return value
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """``; did you mean `x`?`` naming :func:`nearest`, or ``""``: the one spelling of that
    hint, for every message that ends with it."""
    near = nearest(value, known)
    return f"; did you mean `{near}`?" if near is not None else ""

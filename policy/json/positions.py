"""Where each value of a JSON text is written: JSON pointers resolved to lines and columns.

A diagnostic of a JSON file cites a JSON pointer; an editor jumps to a line and a column. A
:class:`JsonPositions` is made once per text (one pass of a small scanner that records the
start and end offset of every value by its pointer) and answers both for any number of
pointers. It reads strict JSON only, a text :func:`policy.json.strict.loads` accepted; of a key
given twice it keeps the first value, as the loader does. Lines and columns are 1-based, count
characters, and break at ``\\n``, as the JSON decoder's own syntax errors do. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from policy.diagnostic import Diagnostic, Location
from policy.json.pointer import join

Span = tuple[int, int]
"""The offset where a value's text starts and the offset just after it ends."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")
_STRINGS = json.JSONDecoder()  # its own string reader (in C) reads a key or a string: exact


class _NotJson(ValueError):
    pass


def value_spans(text: str) -> dict[str, Span]:
    """The span of every value of ``text`` by its JSON pointer (``""``: the whole document);
    empty when ``text`` is not one strict JSON value."""
    spans: dict[str, Span] = {}
    try:
        end = _value(text, _skip(text, 0), "", spans)
    except (_NotJson, ValueError, IndexError, RecursionError):
        return {}
    return spans if _skip(text, end) == len(text) else {}


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _value(text: str, at: int, pointer: str, spans: dict[str, Span]) -> int:
    """Record the value starting at ``at`` (and those inside it); the offset after it."""
    first = text[at]
    if first == "{":
        end = _members(text, at + 1, pointer, spans)
    elif first == "[":
        end = _items(text, at + 1, pointer, spans)
    elif first == '"':
        end = _STRINGS.raw_decode(text, at)[1]
    else:
        match = _SCALAR.match(text, at)
        if match is None:
            raise _NotJson(at)
        end = match.end()
    spans.setdefault(pointer, (at, end))  # a key given twice: its first value is the one kept
    return end


def _members(text: str, at: int, pointer: str, spans: dict[str, Span]) -> int:
    at = _skip(text, at)
    if text[at] == "}":
        return at + 1
    while True:
        if text[at] != '"':
            raise _NotJson(at)
        key, at = _STRINGS.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] != ":":
            raise _NotJson(at)
        child = join(pointer, key)
        at = _skip(text, _value(text, _skip(text, at + 1), child, spans))
        if text[at] == "}":
            return at + 1
        if text[at] != ",":
            raise _NotJson(at)
        at = _skip(text, at + 1)


def _items(text: str, at: int, pointer: str, spans: dict[str, Span]) -> int:
    at = _skip(text, at)
    if text[at] == "]":
        return at + 1
    index = 0
    while True:
        at = _skip(text, _value(text, at, f"{pointer}/{index}", spans))
        if text[at] == "]":
            return at + 1
        if text[at] != ",":
            raise _NotJson(at)
        at, index = _skip(text, at + 1), index + 1


@dataclass(frozen=True, slots=True)
class JsonPositions:
    """The values of one JSON text by pointer, and the offsets where its lines start."""

    spans: dict[str, Span]
    line_starts: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> JsonPositions:
        starts = [0, *(match.end() for match in re.finditer("\n", text))]
        return cls(value_spans(text), tuple(starts))

    def line_column(self, offset: int) -> tuple[int, int]:
        """The 1-based line and column of ``offset``."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def span(self, pointer: str) -> Span | None:
        """The span of the value at ``pointer``, or of its nearest ancestor that is written
        (a missing key is reported at the object that lacks it, say); None for no JSON."""
        while pointer not in self.spans:
            if not pointer:
                return None
            pointer = pointer.rsplit("/", 1)[0]
        return self.spans[pointer]

    def locate(self, location: Location) -> Location:
        """``location`` with the line and column (and end) of its pointer, when it has a
        pointer and no line yet; else unchanged."""
        if location.pointer is None or location.line is not None:
            return location
        span = self.span(location.pointer)
        if span is None:
            return location
        line, column = self.line_column(span[0])
        return location.at(line, column, self.line_column(span[1]))


def with_positions(diagnostics: Iterable[Diagnostic], text: str | None) -> list[Diagnostic]:
    """``diagnostics`` of the JSON ``text`` with their pointers resolved to lines and columns
    (the text is scanned once, and only when one of them has a pointer to resolve)."""
    found = list(diagnostics)
    if text is None or not any(d.pointer is not None and d.line is None for d in found):
        return found
    positions = JsonPositions.of(text)
    return [replace(d, location=positions.locate(d.location)) for d in found]

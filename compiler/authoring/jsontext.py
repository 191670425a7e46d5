"""Edits of a JSON project's text that leave the rest of the text byte for byte.

:func:`spans` maps every JSON pointer of a (valid) JSON text to where its value is written;
:func:`append`, :func:`add_member` and :func:`replace` splice a new value in, rendered in the
style of its neighbours (indentation taken from the file, a value whose siblings are written on
one line written on one line). The caller checks the result parses to the document it meant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from policy.json.pointer import join

WIDTH = 100
"""A container of scalars is written on one line when it fits in this many columns."""


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int  # one past the last character of the value
    kind: str  # "object", "array" or "scalar"


_WS = " \t\r\n"


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.found: dict[str, Span] = {}
        self.keys: dict[str, int] = {}  # member pointer -> where its key starts

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in _WS:
            self.at += 1

    def value(self, pointer: str) -> None:
        self.skip()
        start, first = self.at, self.text[self.at]
        if first == "{":
            self.members(pointer)
            kind = "object"
        elif first == "[":
            self.items(pointer)
            kind = "array"
        else:
            _, self.at = _DECODER.raw_decode(self.text, self.at)
            kind = "scalar"
        self.found[pointer] = Span(start, self.at, kind)

    def members(self, pointer: str) -> None:
        self.at += 1
        self.skip()
        while self.text[self.at] != "}":
            key_start = self.at
            key, self.at = _DECODER.raw_decode(self.text, self.at)
            self.keys[join(pointer, key)] = key_start
            self.skip()
            self.at += 1  # the colon
            self.value(join(pointer, key))
            self.skip()
            if self.text[self.at] == ",":
                self.at += 1
                self.skip()
        self.at += 1

    def items(self, pointer: str) -> None:
        self.at += 1
        self.skip()
        index = 0
        while self.text[self.at] != "]":
            self.value(f"{pointer}/{index}")
            index += 1
            self.skip()
            if self.text[self.at] == ",":
                self.at += 1
                self.skip()
        self.at += 1


_DECODER = json.JSONDecoder()


def spans(text: str) -> dict[str, Span]:
    """Where each value of ``text`` (a valid JSON text) is written, by JSON pointer."""
    return _scan(text).found


def _scan(text: str) -> _Scanner:
    scanner = _Scanner(text)
    scanner.value("")
    return scanner


def indent_unit(text: str) -> str:
    """The file's indentation step: the leading whitespace of its first indented line (a line
    starting with ``#``, a `.seif` comment, does not count; JSON has none)."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and stripped != line and not stripped.startswith("#"):
            return line[: len(line) - len(stripped)]
    return "  "


def _line_indent(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def render(value: Any, indent: str, unit: str, *, one_line: bool | None = None) -> str:
    """``value`` as JSON starting at a line indented by ``indent``: containers of scalars on one
    line when they fit (or when ``one_line``), others one member per line."""
    flat = _flat(value)
    if one_line or (one_line is None and _leafy(value) and len(indent) + len(flat) <= WIDTH):
        return flat
    if isinstance(value, dict) and value:
        inner = indent + unit
        members = [f"{inner}{_flat(k)}: {render(v, inner, unit)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + f"\n{indent}}}"
    if isinstance(value, list) and value:
        inner = indent + unit
        items = [f"{inner}{render(v, inner, unit)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{indent}]"
    return flat


def _flat(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _leafy(value: Any) -> bool:
    """A scalar, or a container holding scalars and arrays of scalars only."""
    if isinstance(value, dict):
        return all(_scalar_or_list(v) for v in value.values())
    if isinstance(value, list):
        return all(_scalar_or_list(v) for v in value)
    return True


def _scalar_or_list(value: Any) -> bool:
    """A scalar, an empty container, or a list of scalars."""
    if isinstance(value, list):
        return all(not isinstance(v, dict | list) for v in value)
    return not isinstance(value, dict) or not value


def append(text: str, pointer: str, value: Any) -> str:
    """``text`` with ``value`` appended to the array at ``pointer``."""
    found = spans(text)
    array = found[pointer]
    count = sum(1 for p in found if p.rsplit("/", 1)[0] == pointer and p != pointer)
    unit = indent_unit(text)
    if count == 0:
        indent = _line_indent(text, array.start)
        inner = indent + unit
        return _splice(
            text, array.start, array.end, f"[\n{inner}{render(value, inner, unit)}\n{indent}]"
        )
    last = found[f"{pointer}/{count - 1}"]
    one_line = "\n" not in text[array.start : array.end]
    if one_line:
        return _splice(text, last.end, last.end, ", " + _flat(value))
    indent = _line_indent(text, last.start)
    siblings_flat = "\n" not in text[last.start : last.end]
    rendered = render(value, indent, unit, one_line=True if siblings_flat else None)
    return _splice(text, last.end, last.end, f",\n{indent}{rendered}")


def add_member(text: str, pointer: str, key: str, value: Any) -> str:
    """``text`` with the member ``key: value`` added last to the object at ``pointer``."""
    scanned = _scan(text)
    found = scanned.found
    obj = found[pointer]
    members = [p for p in found if p != pointer and p.rsplit("/", 1)[0] == pointer]
    unit = indent_unit(text)
    if not members:
        indent = _line_indent(text, obj.start)
        inner = indent + unit
        body = f"{{\n{inner}{_flat(key)}: {render(value, inner, unit)}\n{indent}}}"
        return _splice(text, obj.start, obj.end, body)
    last_pointer = max(members, key=lambda p: found[p].end)
    last = found[last_pointer]
    indent = _line_indent(text, scanned.keys[last_pointer])
    if "\n" not in text[obj.start : obj.end]:
        return _splice(text, last.end, last.end, f", {_flat(key)}: {_flat(value)}")
    return _splice(
        text, last.end, last.end, f",\n{indent}{_flat(key)}: {render(value, indent, unit)}"
    )


def replace(text: str, pointer: str, value: Any) -> str:
    """``text`` with the value at ``pointer`` replaced by ``value``, in the same layout."""
    span = spans(text)[pointer]
    old = text[span.start : span.end]
    indent = _line_indent(text, span.start)
    rendered = render(value, indent, indent_unit(text), one_line=True if "\n" not in old else None)
    return _splice(text, span.start, span.end, rendered)


def remove(text: str, pointer: str) -> str:
    """``text`` without the array element at ``pointer`` (and the separator before or after)."""
    found = spans(text)
    span = found[pointer]
    parent, index = pointer.rsplit("/", 1)
    if int(index) > 0:
        before = found[f"{parent}/{int(index) - 1}"]
        return _splice(text, before.end, span.end, "")
    following = found.get(f"{parent}/1")
    if following is not None:
        return _splice(text, span.start, following.start, "")
    array = found[parent]
    return _splice(text, array.start, array.end, "[]")


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]

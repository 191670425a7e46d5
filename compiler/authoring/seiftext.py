"""Edits of a `.seif` file's text that leave the rest of it, comments included, as it was.

Elements are found by the line where the parser saw them start (``Parsed.positions``); an
element ends at the end of its last line of code before the next top-level element (blank and
comment-only lines between two elements belong to the next). New elements are printed by
``compiler.seif.printer`` with the file's own indentation step. The caller checks the result
parses to the document it meant.
"""

from __future__ import annotations

import re
from typing import Any

from compiler.authoring.jsontext import indent_unit
from compiler.seif.parse import Parsed, parse_seif
from compiler.seif.printer import Lines, element_lines

_TOP = re.compile(r"/(?:(?:objectives|profiles|tools|tests)/\d+|[^/]+)")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _code(line: str) -> str:
    """``line`` without its comment (strings blanked out where a ``#`` could hide)."""
    plain = _STRING.sub(lambda m: " " * len(m.group()), line)
    at = plain.find("#")
    return line if at < 0 else line[:at]


def render(lines: Lines, unit: str, base: str = "") -> str:
    """``lines`` at the file's indentation, without a final newline."""
    return "\n".join((base + unit * line.depth + line.text).rstrip() for line in lines)


def _starts(parsed: Parsed) -> list[tuple[int, str]]:
    """(line, pointer) of every top-level element, in file order."""
    found = [
        (at[0], pointer)
        for pointer, at in parsed.positions.items()
        if _TOP.fullmatch(pointer) and pointer not in ("/id", "/version")
    ]
    return sorted(found)


def element_end(text: str, parsed: Parsed, pointer: str) -> int:
    """The offset just past the last line of code of the top-level element at ``pointer``."""
    starts = _starts(parsed)
    lines = text.split("\n")
    first = next(line for line, p in starts if p == pointer)
    following = [line for line, _ in starts if line > first]
    last = (following[0] - 1) if following else len(lines)
    while last > first and not _code(lines[last - 1]).strip():
        last -= 1
    return sum(len(line) + 1 for line in lines[: last - 1]) + len(lines[last - 1])


def element_start(text: str, parsed: Parsed, pointer: str) -> int:
    line = parsed.positions[pointer][0]
    return sum(len(s) + 1 for s in text.split("\n")[: line - 1])


def insert_after(text: str, pointer: str, section: str, item: Any) -> str:
    """``text`` with ``item`` (an element of ``section``) printed after the element at
    ``pointer``, a blank line between (objectives: no blank line, as the printer does)."""
    parsed = parse_seif(text)
    end = element_end(text, parsed, pointer)
    gap = "\n" if section == "objectives" else "\n\n"
    return text[:end] + gap + render(element_lines(section, item), indent_unit(text)) + text[end:]


def append_element(text: str, section: str, item: Any) -> str:
    """``text`` with ``item`` printed at the end of the file."""
    body = text.rstrip("\n")
    return body + "\n\n" + render(element_lines(section, item), indent_unit(text)) + "\n"


def replace_element(text: str, pointer: str, section: str, item: Any) -> str:
    """``text`` with the top-level element at ``pointer`` printed anew as ``item``."""
    parsed = parse_seif(text)
    start, end = element_start(text, parsed, pointer), element_end(text, parsed, pointer)
    return text[:start] + render(element_lines(section, item), indent_unit(text)) + text[end:]


def add_rule(text: str, profile_pointer: str, rule: Any) -> str:
    """``text`` with ``rule`` as the last item of the profile block at ``profile_pointer``."""
    parsed = parse_seif(text)
    end = element_end(text, parsed, profile_pointer)
    start = element_start(text, parsed, profile_pointer)
    brace = _closing_brace(text, start, end)
    unit = indent_unit(text)
    line_start = text.rfind("\n", 0, brace) + 1
    before = text[line_start:brace]
    if before.strip():  # `profile p { include a }`: the rule goes in on the same line
        printed = render(element_lines("toolRules", rule), unit).strip()
        return text[:brace].rstrip() + " " + printed + " " + text[brace:]
    item_indent = _item_indent(text, start, line_start) or before + unit
    base = item_indent[: len(item_indent) - len(unit)]
    printed = render(element_lines("toolRules", rule), unit, base)
    return text[:line_start] + printed + "\n" + text[line_start:]


def _closing_brace(text: str, start: int, end: int) -> int:
    """The offset of the last ``}`` in code between ``start`` and ``end``."""
    lines = text[start:end].split("\n")
    offset = end
    for line in reversed(lines):
        offset -= len(line)
        code = _code(line)
        at = code.rfind("}")
        if at >= 0:
            return offset + at
        offset -= 1
    raise ValueError("the element is not a block")


def _item_indent(text: str, start: int, stop: int) -> str | None:
    """The indentation of the first line of code inside the block, if any."""
    inner = text[start:stop].split("\n")[1:]
    for line in inner:
        if _code(line).strip():
            return line[: len(line) - len(line.lstrip(" \t"))]
    return None


def replace_line(text: str, pointer: str, rule: Any) -> str:
    """``text`` with the one-line rule at ``pointer`` written as ``rule`` (its comment kept);
    ``ValueError`` for a rule that spans lines (the caller reprints its profile instead)."""
    parsed = parse_seif(text)
    number = parsed.positions[pointer][0]
    lines = text.split("\n")
    old = lines[number - 1]
    code = _code(old)
    if "{" in code or len(element_lines("toolRules", rule)) != 1:
        raise ValueError("a rule with conditions spans lines")
    indent = old[: len(old) - len(old.lstrip(" \t"))]
    printed = render(element_lines("toolRules", rule), indent_unit(text)).strip()
    comment = old[len(code) :]
    lines[number - 1] = indent + printed + ("  " + comment.strip() if comment.strip() else "")
    return "\n".join(lines)


def remove_element(text: str, pointer: str) -> str:
    """``text`` without the top-level element at ``pointer`` and the blank line before it."""
    parsed = parse_seif(text)
    start, end = element_start(text, parsed, pointer), element_end(text, parsed, pointer)
    before = text[:start].rstrip("\n")
    return before + text[end:] if before else text[end:].lstrip("\n")

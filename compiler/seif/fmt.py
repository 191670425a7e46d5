"""`seif fmt`: a `.seif` file printed as ``compiler.seif.printer.to_seif`` prints its document,
with its comments put back where they were (docs/language.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.seif.parse import parse_seif
from compiler.seif.printer import Line, Lines, document_lines, render


def format_seif(text: str) -> str:
    """``text`` printed as ``to_seif`` prints its document, with its comments (``seif fmt``);
    the parser's ``SeifSyntaxError`` for a text that does not parse."""
    parsed = parse_seif(text)
    lines = document_lines(parsed.document)
    return render(place_comments(lines, list(parsed.comments), parsed.lines, text))


def place_comments(
    lines: Lines, comments: list[tuple[Any, ...]], starts: Mapping[str, int], source: str
) -> Lines:
    """``lines`` with the comments of ``source`` put back; ``comments`` are ``(line, text)`` or
    ``(line, text, trailing)``, ``starts`` maps pointers to the line where each element starts.

    A comment alone on its line goes above the first element that starts below it (the outermost
    one of that line), with the blank line that followed it if any; a trailing comment goes at
    the end of the line of the innermost element starting on its line (or else of the last one
    above it). Comments below the last element end the file.
    """
    printed = {line.pointer: i for i, line in enumerate(lines) if line.pointer is not None}
    text = source.splitlines()
    known = {p: n for p, n in starts.items() if p in printed}
    known[""] = next((n for n, s in enumerate(text, 1) if s.strip() and s.strip()[0] != "#"), 1)
    order = sorted((n, p.count("/"), p) for p, n in known.items())
    above: dict[int | None, Lines] = {}
    after: dict[int, list[str]] = {}
    for number, body, *flag in comments:
        comment = body.strip() if body.strip().startswith("#") else "#" + body.strip()
        alone = not flag[0] if flag else _line(text, number).strip() == comment
        at = None if alone else max((e for e in order if e[0] <= number), default=None)
        if at is not None:
            after.setdefault(printed[at[2]], []).append(comment)
            continue
        below = next((printed[p] for n, _, p in order if n > number), None)
        depth = 0 if below is None else lines[below].depth
        blank = [Line(0, "")] if number < len(text) and not _line(text, number + 1).strip() else []
        above.setdefault(below, []).extend([Line(depth, comment), *blank])
    out: Lines = []
    for index, line in enumerate(lines):
        trailing = "  " + " ".join(after[index]) if index in after else ""
        out += [*above.get(index, []), Line(line.depth, line.text + trailing, line.pointer)]
    return out + [line for line in above.get(None, []) if line.text]


def _line(text: list[str], number: int) -> str:
    return text[number - 1] if 0 < number <= len(text) else ""

"""The `parse` pass: text to a JSON tree through the strict boundary (:mod:`policy.json.strict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.diagnostics import Collector
from compiler.readfile import read_regular, reason
from policy.json.strict import JsonError, loads

PASS = "parse"


_CODES = {
    "JSON_SYNTAX": "JSON_SYNTAX",
    "NUMBER_INVALID": "JSON_NUMBER_INVALID",
    "LONE_SURROGATE": "JSON_STRING_INVALID",
    "TOO_DEEP": "JSON_TOO_DEEP",
}
"""The compiler's code for each :class:`~policy.json.strict.JsonError` code."""


def parse_json_text(text: str, out: Collector) -> Any:
    """The JSON tree of ``text`` (plain dicts and lists) read by the strict boundary, or None
    with a diagnostic; every duplicate key is reported (with its pointer) in one run."""

    def duplicate(pointer: str, key: str) -> None:
        out.error("DUPLICATE_KEY", pointer, f"key `{key[:64]}` appears more than once; keep one")

    try:
        return loads(text, duplicates=duplicate)
    except JsonError as exc:
        code = _CODES.get(exc.code, "JSON_SYNTAX")
        if exc.where.line is not None:
            out.at(code, exc.where.line, exc.where.column or 1, exc.message)
        else:
            out.error(code, exc.where.pointer or "", exc.message)
        return None


def read_text(path: Path, out: Collector) -> str | None:
    """The UTF-8 text of ``path`` (a regular file of at most
    :data:`~compiler.readfile.MAX_FILE_BYTES`), or None with a ``FILE_UNREADABLE`` diagnostic."""
    try:
        return read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        out.error("FILE_UNREADABLE", "", f"cannot read `{path}`: {reason(exc)}")
        return None

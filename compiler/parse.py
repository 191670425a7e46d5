"""The `parse` pass: bytes to a JSON tree, refusing duplicate keys and non-JSON numbers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from compiler.diagnostics import Collector
from compiler.pointer import join

PASS = "parse"


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers the keys it saw more than once."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.duplicates: list[str] = []
        for k, v in pairs:
            if k in self and k not in self.duplicates:
                self.duplicates.append(k)
            if k not in self:
                self[k] = v


def _bad_constant(name: str) -> Any:
    raise ValueError(f"`{name}` is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number `{text[:40]}` is too large for a double")
    return value


def _report_duplicates(node: Any, pointer: str, out: Collector) -> None:
    if isinstance(node, dict):
        for k in getattr(node, "duplicates", ()):
            out.error(
                "DUPLICATE_KEY", join(pointer, k), f"key `{k}` appears more than once; keep one"
            )
        for k, v in node.items():
            _report_duplicates(v, join(pointer, k), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _report_duplicates(v, join(pointer, i), out)


def _strip_markers(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_markers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_strip_markers(v) for v in node]
    return node


_BAD_NUMBER = re.compile(r"-?Infinity|NaN|-?\d{309,}|-?\d+(\.\d+)?[eE][+]?\d{3,}")


def _locate_bad_number(text: str) -> tuple[int, int]:
    """Line and column of the first token that looks like a non-finite number."""
    match = _BAD_NUMBER.search(text)
    if match is None:
        return 1, 1
    before = text[: match.start()]
    return before.count("\n") + 1, match.start() - (before.rfind("\n") + 1) + 1


def parse_json_text(text: str, out: Collector) -> Any:
    """The JSON tree of ``text`` (plain dicts and lists), or None with a diagnostic."""
    try:
        tree = json.loads(
            text, object_pairs_hook=_Object, parse_constant=_bad_constant, parse_float=_parse_float
        )
    except json.JSONDecodeError as exc:
        out.at("JSON_SYNTAX", exc.lineno, exc.colno, f"not valid JSON: {exc.msg.lower()}")
        return None
    except ValueError as exc:
        line, column = _locate_bad_number(text)
        out.at("JSON_NUMBER_INVALID", line, column, str(exc))
        return None
    _report_duplicates(tree, "", out)
    return _strip_markers(tree)


def read_text(path: Path, out: Collector) -> str | None:
    """The UTF-8 text of ``path``, or None with a ``FILE_UNREADABLE`` diagnostic."""
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        out.error("FILE_UNREADABLE", "", f"cannot read `{path}`: {reason}")
        return None

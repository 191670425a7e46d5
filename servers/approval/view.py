"""Arguments as approvers read them (:class:`~servers.wire.approving.ArgumentView`): a tree the
page draws as nested rows, each leaf the JSON text of its value with every character that
renders as nothing or as a blank escaped (:mod:`servers.support.visible`), strings keeping their
own line feeds as real line breaks. ``exact_text`` is the same value as one JSON text."""

from __future__ import annotations

import json
from typing import Any

from servers.support.visible import escape_invisible
from servers.wire.approving import ArgumentView


def exact_text(value: Any) -> str:
    """The arguments as the approver must read them: JSON text, 2-space indent, numbers as
    they will run (no rounding to a double, ``1.0`` stays ``1.0``), and every character that
    renders as nothing or as a blank (:mod:`servers.support.visible`: controls, bidi and
    zero-width format characters, default-ignorable code points, combining marks, spaces other
    than U+0020, private use) as a visible ``\\uXXXX`` escape. The text is JSON that denotes
    exactly the forwarded arguments."""
    return escape_invisible(json.dumps(value, indent=2, ensure_ascii=False))


def string_text(value: str) -> str:
    """A string's JSON text, escaped as :func:`exact_text` escapes it, but for its line feeds:
    real line breaks. A literal backslash stays ``\\\\`` and a quote ``\\"``, so what is shown
    reads one way only."""
    lines = (
        escape_invisible(json.dumps(line, ensure_ascii=False)[1:-1]) for line in value.split("\n")
    )
    return '"' + "\n".join(lines) + '"'


def arguments_view(value: Any) -> ArgumentView:
    """``value`` (strict JSON: dicts, lists, strings, numbers, booleans, null) as a view."""
    if isinstance(value, dict):
        return {
            "kind": "object",
            "entries": [
                {
                    "key": escape_invisible(json.dumps(k, ensure_ascii=False)),
                    "value": arguments_view(v),
                }
                for k, v in value.items()
            ],
        }
    if isinstance(value, list):
        return {"kind": "array", "items": [arguments_view(v) for v in value]}
    if isinstance(value, str):
        return {"kind": "string", "text": string_text(value)}
    if isinstance(value, bool):
        return {"kind": "boolean", "text": json.dumps(value)}
    if value is None:
        return {"kind": "null", "text": "null"}
    return {"kind": "number", "text": escape_invisible(json.dumps(value))}

"""The one boundary for untrusted JSON: strict loads, strict dumps and one pointer walker.

Every reader of JSON from outside (project files, configuration, the registry, trace files, the
runtime's request bodies, executor answers) decodes with :func:`loads`, and every writer encodes
with :func:`dumps` / :func:`dump_bytes`. What :func:`loads` refuses, each as a
:class:`JsonError` with a stable code and a location:

- text that is not UTF-8 JSON (``JSON_SYNTAX``, with line and column);
- a key given twice in one object (``DUPLICATE_KEY``, with the object's pointer);
- ``NaN``, ``Infinity``, a number a double cannot hold, and an integer of more than
  :data:`MAX_INTEGER_DIGITS` digits (``NUMBER_INVALID``): CPython's own limit (4,300 digits)
  would otherwise raise a bare ``ValueError`` deep inside a handler;
- a string (or key) holding a lone surrogate such as ``\\ud800`` (``LONE_SURROGATE``): it can be
  neither stored nor encoded as UTF-8 (RFC 7493 refuses it too);
- nesting deeper than ``max_depth`` (``TOO_DEEP``, default :data:`MAX_DEPTH`).

The checks cost little on the common path: the decoder runs in C, depth is walked only when the
text holds more brackets than the limit, and strings are checked only when the text holds a
``\\u`` escape (only an escape can make a lone surrogate).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from policy.diagnostic import Diagnostic, Location
from policy.json.pointer import join
from policy.json.value import JsonValue, iter_strings

MAX_DEPTH = 64
"""Nesting levels a document may have (an object or array is one level)."""
MAX_INTEGER_DIGITS = 309
"""Digits an integer literal may have: as many as the largest finite double (about 1.8e308)."""

CODES = ("JSON_SYNTAX", "DUPLICATE_KEY", "NUMBER_INVALID", "LONE_SURROGATE", "TOO_DEEP")


class JsonError(ValueError):
    """Untrusted text refused: ``code`` (one of :data:`CODES`), ``message`` and ``where``."""

    def __init__(self, code: str, message: str, where: Location | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.where = where or Location()

    def __str__(self) -> str:
        if self.where.pointer is None and self.where.line is None:
            return self.message
        return f"{self.message} (at {self.where})"

    @property
    def diagnostic(self) -> Diagnostic:
        """This refusal as a diagnostic (its code, message and location)."""
        return Diagnostic(code=self.code, message=self.message, location=self.where)


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; only an object with a duplicate is walked in Python
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


class _Marked(dict[str, Any]):
    """An object that remembers the keys given more than once (``collect`` mode)."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.duplicates: list[str] = []
        for k, v in pairs:
            if k in self:
                if k not in self.duplicates:
                    self.duplicates.append(k)
            else:
                self[k] = v


class _Number(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _Number(f"`{name}` is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # an infinity: the literal is beyond a double
        raise _Number(f"number `{text[:40]}` is too large for a double")
    return value


def _int(text: str) -> int:
    if len(text) > MAX_INTEGER_DIGITS and len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _Number(f"integer `{text[:20]}...` has more than {MAX_INTEGER_DIGITS} digits")
    return int(text)


_STRICT = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int
)
_COLLECT = json.JSONDecoder(
    object_pairs_hook=_Marked, parse_constant=_constant, parse_float=_float, parse_int=_int
)


def loads(
    data: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    duplicates: Callable[[str, str], None] | None = None,
) -> JsonValue:
    """The JSON value of ``data`` (plain dicts and lists), or :class:`JsonError`.

    With ``duplicates``, a key given twice is not refused: ``duplicates(pointer, key)`` is
    called for each (``pointer`` is the key's own pointer, in document order) and the first
    value is kept; the compiler reports them all as diagnostics that way."""
    text = _text(data)
    decoder = _STRICT if duplicates is None else _COLLECT
    try:
        value = decoder.decode(text)
    except _Duplicate as exc:
        raise JsonError("DUPLICATE_KEY", f"key `{exc.key[:64]}` appears more than once") from None
    except _Number as exc:
        raise JsonError("NUMBER_INVALID", str(exc), _number_location(text)) from None
    except json.JSONDecodeError as exc:
        where = Location(line=exc.lineno, column=exc.colno)
        raise JsonError("JSON_SYNTAX", _syntax_message(exc), where) from None
    except RecursionError:
        raise _too_deep(max_depth, None) from None
    except ValueError as exc:  # the interpreter's own integer limit, should it be lower
        raise JsonError("NUMBER_INVALID", f"a number cannot be read ({exc})") from None
    if text.count("[") + text.count("{") > max_depth:
        deep = find_pointer(value, lambda _key, _node, depth: depth > max_depth)
        if deep is not None:
            raise _too_deep(max_depth, deep)
    if duplicates is not None:
        value = _unmark(value, duplicates)
    if "\\u" in text:
        _refuse_lone_surrogates(value)
    return value


def _syntax_message(exc: json.JSONDecodeError) -> str:
    """What the decoder said, named as an author would name it: an empty text, a trailing
    comma, a missing colon or a missing comma."""
    text, at = exc.doc, exc.pos
    if not text.strip():
        return "the text is empty: a JSON document is needed"
    before = text[:at].rstrip()
    if before.endswith(",") and text[at : at + 1] in ("}", "]"):
        return f"a trailing comma before `{text[at]}`: remove the `,`"
    if exc.msg.startswith("Expecting ',' delimiter"):
        return "a `,` is missing between two values"
    return f"not valid JSON: {exc.msg.lower()}"


def _text(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        where = Location(line=line, column=column)
        raise JsonError("JSON_SYNTAX", "not UTF-8 text", where) from None


def _too_deep(limit: int, pointer: str | None) -> JsonError:
    shown = None if pointer is None else pointer[:200]
    return JsonError("TOO_DEEP", f"nested deeper than {limit} levels", Location(pointer=shown))


def _number_location(text: str) -> Location:
    """Line and column of the first token that looks like a number seif refuses."""
    bad = rf"-?Infinity|NaN|-?\d{{{MAX_INTEGER_DIGITS + 1},}}|-?\d+(\.\d+)?([eE][+]?\d{{3,}})"
    match = re.search(bad, text)
    if match is None:
        return Location()
    before = text[: match.start()]
    return Location(line=before.count("\n") + 1, column=match.start() - before.rfind("\n"))


def _unmark(value: Any, report: Callable[[str, str], None]) -> Any:
    """Plain dicts again, reporting each marked duplicate by pointer, in document order."""
    for pointer, _key, node, _depth in walk(value):
        if isinstance(node, _Marked):
            for dup in node.duplicates:
                report(join(pointer, dup), dup)
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _refuse_lone_surrogates(value: JsonValue) -> None:
    if any(not s.isascii() and not encodable(s) for s in iter_strings(value)):
        pointer = find_pointer(value, _holds_lone)  # a string, or the object with such a key
        raise JsonError(
            "LONE_SURROGATE",
            "a string is not Unicode text (it holds a lone surrogate)",
            Location(pointer=None if pointer is None else pointer[:200]),
        )


def _holds_lone(_key: object, node: object, _depth: int) -> bool:
    return _lone(node) or (isinstance(node, dict) and any(_lone(k) for k in node))


def _lone(item: object) -> bool:
    return isinstance(item, str) and not item.isascii() and not encodable(item)


def encodable(text: str) -> bool:
    """Whether ``text`` is UTF-8 text (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---------------------------------------------------------------- the pointer walker


def walk(value: JsonValue) -> Iterator[tuple[str, str | int | None, JsonValue, int]]:
    """Every node of ``value`` in document order as ``(pointer, key, node, depth)``: ``key``
    is the node's key or index in its parent (None for the root), ``depth`` counts the objects
    and arrays from the root down to and including the node (a scalar at the root is 0).
    Iterative: any depth."""
    stack: list[tuple[str, str | int | None, Any, int]] = [("", None, value, 0)]
    while stack:
        pointer, key, node, above = stack.pop()
        container = isinstance(node, (dict, list, tuple))
        depth = above + 1 if container else above
        yield pointer, key, node, depth
        if isinstance(node, dict):
            children: list[tuple[str | int, Any]] = list(node.items())
        elif isinstance(node, (list, tuple)):
            children = list(enumerate(node))
        else:
            continue
        for k, v in reversed(children):
            stack.append((join(pointer, k), k, v, depth))


def find_pointer(
    value: JsonValue, test: Callable[[str | int | None, JsonValue, int], bool]
) -> str | None:
    """The pointer of the first node (document order) for which ``test(key, node, depth)``
    holds, or None."""
    for pointer, key, node, depth in walk(value):
        if test(key, node, depth):
            return pointer
    return None


# ---------------------------------------------------------------- strict dumps

_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SORTED = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


def dumps(value: JsonValue, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as JSON text: compact (or indented), never ``NaN`` or ``Infinity``
    (:class:`JsonError` ``NUMBER_INVALID``), non-ASCII written as itself."""
    try:
        if indent is None:
            return (_SORTED if sort_keys else _COMPACT).encode(value)
        return json.dumps(
            value, ensure_ascii=False, allow_nan=False, indent=indent, sort_keys=sort_keys
        )
    except ValueError as exc:
        raise JsonError("NUMBER_INVALID", f"not JSON: {exc}") from None


def dump_bytes(value: JsonValue, *, indent: int | None = None, sort_keys: bool = False) -> bytes:
    """:func:`dumps` as UTF-8 bytes (a lone surrogate is refused: ``LONE_SURROGATE``)."""
    try:
        return dumps(value, indent=indent, sort_keys=sort_keys).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonError("LONE_SURROGATE", "a string is not Unicode text") from None

"""JSON values as immutable Python values, and JSON (not Python) equality.

The IR carries JSON documents (schemas, test arguments, fixtures). They are frozen on the way
in: objects become :class:`FrozenMap` (a read-only, hashable ``dict``) and arrays become tuples,
so an IR value can never be changed after it was built.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn, TypeAlias

JsonValue: TypeAlias = Any
"""A JSON value: None, bool, int, float, str, list/tuple of values, str-keyed mapping."""


class FrozenMap(dict[str, Any]):
    """A read-only ``dict``: equal to the plain dict with the same items, and hashable."""

    __slots__ = ()

    def _readonly(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise TypeError("FrozenMap is immutable")

    __setitem__ = __delitem__ = _readonly
    clear = pop = popitem = setdefault = update = __ior__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]  # dict is unhashable; a frozen map is not
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[type[FrozenMap], tuple[dict[str, Any]]]:
        return (FrozenMap, (dict(self),))


EMPTY_MAP = FrozenMap()


_SCALARS = (str, int, float, bool, type(None))


def freeze(value: JsonValue) -> JsonValue:
    """Return ``value`` with every object frozen and every array a tuple."""
    if type(value) in _SCALARS:  # the common leaves, before any ABC check
        return value
    if isinstance(value, Mapping):
        return FrozenMap((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: JsonValue) -> JsonValue:
    """Return plain ``dict``/``list`` copies of a (possibly frozen) JSON value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def is_number(value: object) -> bool:
    """A JSON number: an int or a finite float, never a bool."""
    t = type(value)
    return t is int or (t is float and math.isfinite(value))  # type: ignore[arg-type]  # t is float


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """JSON equality: numbers by value (``1 == 1.0``), booleans never equal to numbers."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a is b
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    if isinstance(a, Mapping):
        return (
            isinstance(b, Mapping)
            and a.keys() == b.keys()
            and all(json_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)):
        return (
            isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return ta is tb and bool(a == b)


def is_finite_json(value: JsonValue) -> bool:
    """True when ``value`` is a JSON value with no NaN or infinity anywhere inside it."""
    t = type(value)
    if t is float:
        return math.isfinite(value)
    if t in (str, int, bool) or value is None:
        return True
    if isinstance(value, Mapping):
        return all(type(k) is str and is_finite_json(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(is_finite_json(v) for v in value)
    return False


def iter_strings(value: JsonValue) -> Iterator[str]:
    """Every string inside a JSON value, keys included, without recursion (any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


class DuplicateKey(ValueError):
    """A JSON object with a key given twice (``key`` is the first repeated one)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key `{key[:64]}` appears more than once")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An ``object_pairs_hook`` for ``json`` that refuses duplicate keys (:class:`DuplicateKey`).
    The dict is built in C; only an object with a duplicate is walked in Python."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out

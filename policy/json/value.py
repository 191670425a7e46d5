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
_NUMBERS = (int, float)


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
    """JSON equality at any depth, without recursion: numbers by value (``1 == 1.0``),
    booleans never equal to numbers, objects by keys and values, arrays (lists or tuples) item
    by item."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        tx, ty = type(x), type(y)
        if tx is bool or ty is bool:
            if x is not y:
                return False
        elif tx in _NUMBERS and ty in _NUMBERS:
            if x != y:
                return False
        elif isinstance(x, (dict, Mapping)):  # dict (and FrozenMap) first: no ABC check
            if not isinstance(y, Mapping) or x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif tx is list or tx is tuple:
            if not (ty is list or ty is tuple) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif tx is not ty or x != y:
            return False
    return True


def is_finite_json(value: JsonValue) -> bool:
    """True when ``value`` is a JSON value (string keys only) with no NaN or infinity anywhere
    inside it; any depth, without recursion."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is float:
        return bool(value - value == 0.0)  # NaN and infinities give NaN
    stack = [value]
    while stack:
        item = stack.pop()
        t = type(item)
        if t is float:
            if item - item != 0.0:  # NaN or an infinity
                return False
        elif t is str or t is int or t is bool or item is None:
            continue
        elif t is list or t is tuple:
            stack.extend(item)
        elif isinstance(item, (dict, Mapping)):  # dict first: no ABC check
            if not all(type(k) is str for k in item):
                return False
            stack.extend(item.values())
        else:
            return False
    return True


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

"""CEL's values and operators over plain JSON values, as the CEL specification defines them.

Values are the ones a condition receives, unconverted: ``None`` (null), ``bool``, ``int``
(int64), ``float`` (double), ``str``, ``list``/``tuple``, ``dict`` (``FrozenMap`` too); plus
:class:`Uint` and ``bytes`` from literals and conversions, and :class:`CelType` for ``type(x)``.
A ``bool`` is never a number here (``true == 1`` is false), numbers compare across int, uint and
double by value, and every misuse raises :class:`CelEvalError`, which an evaluation turns into a
value (``CONDITION_ERROR``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
UINT_MAX = (1 << 64) - 1


class CelEvalError(Exception):
    """An evaluation error (no such key, no matching overload, overflow, division by zero).
    ``code`` names its kind and nothing of the data; the message may name a field."""

    def __init__(self, message: str, code: str = "EVALUATION_ERROR") -> None:
        super().__init__(message)
        self.code = code


class Uint(int):
    """A CEL ``uint``: an int that is not an ``int`` to CEL."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A CEL type as a value (``type(1) == int``); equal by name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("CelType", self.name))

    def __repr__(self) -> str:
        return f"CelType({self.name!r})"


TYPE_NAMES = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type")
TYPES = {name: CelType(name) for name in (*TYPE_NAMES, "type")}
_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    Uint: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    list: "list",
    tuple: "list",
    dict: "map",
    type(None): "null_type",
    CelType: "type",
}
NUMBERS = frozenset({"int", "uint", "double"})


def kind(value: Any) -> str:
    """The CEL type name of ``value``."""
    found = _KINDS.get(type(value))
    if found is not None:
        return found
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, (list, tuple)):
        return "list"
    raise CelEvalError(f"unsupported value of type {type(value).__name__}", "UNSUPPORTED_VALUE")


def fail(message: str, code: str = "EVALUATION_ERROR") -> CelEvalError:
    return CelEvalError(message, code)


def overload(op: str, *values: Any) -> CelEvalError:
    kinds = ", ".join(kind(v) for v in values)
    return CelEvalError(f"no matching overload for {op}({kinds})", "NO_MATCHING_OVERLOAD")


def checked_int(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise fail("int overflow", "OVERFLOW")
    return value


def checked_uint(value: int) -> Uint:
    if not 0 <= value <= UINT_MAX:
        raise fail("uint overflow", "OVERFLOW")
    return Uint(value)


# --- equality and ordering ----------------------------------------------------------------------


def equal(a: Any, b: Any) -> bool:
    """CEL ``==``: numbers by value across kinds (NaN equals nothing), lists and maps element by
    element, values of different kinds unequal."""
    ka, kb = kind(a), kind(b)
    if ka in NUMBERS and kb in NUMBERS:
        return _number_equal(a, b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if ka == "map":
        return len(a) == len(b) and all(_has_equal(b, k, v) for k, v in a.items())
    return bool(a == b)


def _number_equal(a: Any, b: Any) -> bool:
    if type(a) is float or type(b) is float:  # as cel-go: an int meets a double as a double
        return float(a) == float(b)  # NaN equals nothing
    return bool(a == b)


def _has_equal(m: Mapping[Any, Any], key: Any, value: Any) -> bool:
    for k, v in m.items():
        if equal(k, key):
            return equal(v, value)
    return False


def compare(a: Any, b: Any, op: str) -> int | None:
    """-1, 0 or 1 for ``a`` against ``b``; None when either is NaN (every ordering is false)."""
    ka, kb = kind(a), kind(b)
    if ka in NUMBERS and kb in NUMBERS:
        if (type(a) is float and math.isnan(a)) or (type(b) is float and math.isnan(b)):
            return None
        if type(a) is float or type(b) is float:  # as cel-go: compared as doubles
            a, b = float(a), float(b)
        return int(a > b) - int(a < b)
    if ka == kb and ka in ("string", "bytes", "bool"):
        return int(a > b) - int(a < b)
    raise overload(op, a, b)


def contains(container: Any, item: Any) -> bool:
    """CEL ``in``: an element of a list, a key of a map."""
    k = kind(container)
    if k == "list":
        return any(equal(x, item) for x in container)
    if k == "map":
        if type(item) is str:
            return item in container
        return any(equal(key, item) for key in container)
    raise overload("in", item, container)


# --- arithmetic -----------------------------------------------------------------------------


def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return checked_int(a + b)
    if ta is float and tb is float:
        return a + b
    ka, kb = kind(a), kind(b)
    if ka != kb:
        raise overload("_+_", a, b)
    if ka == "uint":
        return checked_uint(a + b)
    if ka in ("string", "bytes"):
        return a + b
    if ka == "list":
        return [*a, *b]
    raise overload("_+_", a, b)


def subtract(a: Any, b: Any) -> Any:
    return _numeric("_-_", a, b, lambda x, y: x - y)


def multiply(a: Any, b: Any) -> Any:
    return _numeric("_*_", a, b, lambda x, y: x * y)


def _numeric(op: str, a: Any, b: Any, f: Callable[[Any, Any], Any]) -> Any:
    ka, kb = kind(a), kind(b)
    if ka != kb or ka not in NUMBERS:
        raise overload(op, a, b)
    if ka == "int":
        return checked_int(f(a, b))
    if ka == "uint":
        return checked_uint(f(int(a), int(b)))
    return f(a, b)


def divide(a: Any, b: Any) -> Any:
    ka, kb = kind(a), kind(b)
    if ka != kb or ka not in NUMBERS:
        raise overload("_/_", a, b)
    if ka == "double":
        if b == 0:
            return math.copysign(math.inf, a) * math.copysign(1.0, b) if a != 0 else math.nan
        return a / b
    if b == 0:
        raise fail("division by zero", "DIVISION_BY_ZERO")
    quotient = abs(int(a)) // abs(int(b))
    negative = (a < 0) != (b < 0)
    value = -quotient if negative else quotient
    return checked_int(value) if ka == "int" else checked_uint(value)


def modulo(a: Any, b: Any) -> Any:
    ka, kb = kind(a), kind(b)
    if ka != kb or ka not in ("int", "uint"):
        raise overload("_%_", a, b)
    if b == 0:
        raise fail("modulus by zero", "DIVISION_BY_ZERO")
    rest = abs(int(a)) % abs(int(b))
    value = -rest if a < 0 else rest  # the sign of the dividend, as in C
    return value if ka == "int" else Uint(value)


def negate(a: Any) -> Any:
    t = type(a)
    if t is int:
        return checked_int(-a)
    if t is float:
        return -a
    raise overload("-_", a)


def logical_not(a: Any) -> bool:
    if type(a) is bool:
        return not a
    raise overload("!_", a)


# --- fields and indexes -----------------------------------------------------------------------


def field(value: Any, name: str) -> Any:
    """``value.name`` of a map."""
    if kind(value) != "map":
        raise fail(f"no field `{name}` on a {kind(value)}", "NO_MATCHING_OVERLOAD")
    try:
        return value[name]
    except KeyError:
        raise fail(f"no such key: {name}", "NO_SUCH_KEY") from None


def has_field(value: Any, name: str) -> bool:
    if kind(value) != "map":
        raise fail(f"has() of a field of a {kind(value)}", "NO_MATCHING_OVERLOAD")
    return name in value


def index(container: Any, key: Any) -> Any:
    k = kind(container)
    if k == "list":
        position = _list_position(key)
        if not 0 <= position < len(container):
            raise fail(f"index out of range: {position}", "INDEX_OUT_OF_RANGE")
        return container[position]
    if k == "map":
        if type(key) is str:
            try:
                return container[key]
            except KeyError:
                raise fail("no such key", "NO_SUCH_KEY") from None
        if kind(key) not in (*NUMBERS, "bool"):
            raise overload("_[_]", container, key)
        for found, value in container.items():
            if equal(found, key):
                return value
        raise fail("no such key", "NO_SUCH_KEY")
    raise overload("_[_]", container, key)


def _list_position(key: Any) -> int:
    k = kind(key)
    if k in ("int", "uint"):
        return int(key)
    if k == "double" and key.is_integer():
        return int(key)
    raise overload("_[_]", [], key)

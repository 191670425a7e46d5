"""CEL's standard functions over plain values: ``size``, the conversions (``int``, ``uint``,
``double``, ``string``, ``bytes``, ``bool``, ``type``, ``dyn``) and the string functions
(``contains``, ``startsWith``, ``endsWith``, ``matches``). Conversions follow the CEL
specification and cel-go's formatting (``string(-4.5e-3) == "-0.0045"``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from policy.cel.values import (
    INT_MIN,
    TYPES,
    UINT_MAX,
    CelEvalError,
    Uint,
    checked_int,
    checked_uint,
    fail,
    kind,
    overload,
)

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
    r"|inf|infinity|nan)",
    re.IGNORECASE,
)
_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def _refused(k: str, target: str, value: Any) -> CelEvalError:
    """A string that does not read as ``target``, or a value no conversion takes."""
    if k == "string":
        return fail(f"cannot convert string to {target}", "CONVERSION")
    return overload(target, value)


def size(value: Any) -> int:
    if kind(value) in ("string", "bytes", "list", "map"):
        return len(value)
    raise overload("size", value)


def to_int(value: Any) -> int:
    k = kind(value)
    if k in ("int", "uint"):
        return checked_int(int(value))
    if k == "double":
        if math.isnan(value) or not (INT_MIN < value < -float(INT_MIN)):  # ends excluded
            raise fail("double out of int range", "OVERFLOW")
        return checked_int(int(value))
    if k == "string" and _INT_TEXT.fullmatch(value):
        return checked_int(int(value))
    raise (
        fail(f"cannot convert {k} to int", "CONVERSION")
        if k == "string"
        else overload("int", value)
    )


def to_uint(value: Any) -> Uint:
    k = kind(value)
    if k in ("int", "uint"):
        return checked_uint(int(value))
    if k == "double":
        if math.isnan(value) or not (0 <= value < float(UINT_MAX) + 1):
            raise fail("double out of uint range", "OVERFLOW")
        return checked_uint(int(value))
    if k == "string" and _INT_TEXT.fullmatch(value) and not value.startswith("-"):
        return checked_uint(int(value))
    raise (
        fail(f"cannot convert {k} to uint", "CONVERSION")
        if k == "string"
        else overload("uint", value)
    )


def to_double(value: Any) -> float:
    k = kind(value)
    if k in ("int", "uint", "double"):
        return float(value)
    if k == "string" and _DOUBLE_TEXT.fullmatch(value):
        return float(value)
    raise (
        fail("cannot convert string to double", "CONVERSION")
        if k == "string"
        else overload("double", value)
    )


def to_string(value: Any) -> str:
    k = kind(value)
    if k == "string":
        return str(value)
    if k in ("int", "uint"):
        return str(int(value))
    if k == "double":
        return format_double(value)
    if k == "bool":
        return "true" if value else "false"
    if k == "bytes":
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise fail("bytes are not UTF-8", "CONVERSION") from None
    raise overload("string", value)


def format_double(value: float) -> str:
    """Go's ``fmt.Sprintf("%g", v)``, as cel-go formats ``string(double)``: the shortest digits
    that read back as ``v``, in exponent form below 1e-4 and from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)  # digits before the decimal point
    minus = "-" if sign else ""
    scientific = point - 1
    if scientific < -4 or scientific >= 6:  # %g: shortest digits, exponent form past 1e6
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'+' if scientific >= 0 else '-'}{abs(scientific):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"


def to_bytes(value: Any) -> bytes:
    k = kind(value)
    if k == "bytes":
        return bytes(value)
    if k == "string":
        return str(value).encode("utf-8")
    raise overload("bytes", value)


def to_bool(value: Any) -> bool:
    k = kind(value)
    if k == "bool":
        return bool(value)
    if k == "string" and value in _BOOLS:
        return _BOOLS[value]
    raise (
        fail("cannot convert string to bool", "CONVERSION")
        if k == "string"
        else overload("bool", value)
    )


def type_of(value: Any) -> Any:
    return TYPES[kind(value)]


def dyn(value: Any) -> Any:
    return value


def _strings(name: str, a: Any, b: Any) -> None:
    if type(a) is not str or type(b) is not str:
        raise overload(name, a, b)


def contains_text(a: Any, b: Any) -> bool:
    _strings("contains", a, b)
    return b in a


def starts_with(a: Any, b: Any) -> bool:
    _strings("startsWith", a, b)
    return bool(a.startswith(b))


def ends_with(a: Any, b: Any) -> bool:
    _strings("endsWith", a, b)
    return bool(a.endswith(b))


@lru_cache(maxsize=256)
def pattern(text: str) -> re.Pattern[str]:
    """A regular expression (RE2 syntax, read by Python's ``re``: the subset both share)."""
    try:
        return re.compile(text)
    except re.error:
        raise CelEvalError("invalid regular expression", "INVALID_ARGUMENT") from None


def matches(a: Any, b: Any) -> bool:
    _strings("matches", a, b)
    return pattern(b).search(a) is not None


FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "size": (1, size),
    "int": (1, to_int),
    "uint": (1, to_uint),
    "double": (1, to_double),
    "string": (1, to_string),
    "bytes": (1, to_bytes),
    "bool": (1, to_bool),
    "type": (1, type_of),
    "dyn": (1, dyn),
    "matches": (2, matches),
}
"""Global functions: name -> (arity, implementation)."""

METHODS: dict[str, tuple[int, Callable[..., Any]]] = {
    "size": (0, size),
    "contains": (1, contains_text),
    "startsWith": (1, starts_with),
    "endsWith": (1, ends_with),
    "matches": (1, matches),
}
"""Receiver-style functions: name -> (arity without the receiver, implementation)."""

"""Deterministic encodings: canonical CBOR (RFC 8949 §4.2.1) and canonical JSON (RFC 8785).

Both refuse what has no single encoding: NaN, infinities, non-string map keys and values that
are not JSON. cbor2's ``canonical=True`` sorts string keys length-first, which for string keys is
RFC 8949's core deterministic order (bytewise order of the encoded keys).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import cbor2

from policy.json.pointer import join
from policy.json.value import FrozenMap, JsonValue, freeze


class EncodingError(ValueError):
    """A value that has no canonical encoding; ``pointer`` says where inside it."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer or '/'}: {message}")
        self.pointer = pointer
        self.message = message


def _check(value: object, pointer: str) -> None:
    t = type(value)
    if t is float and not math.isfinite(value):  # type: ignore[arg-type]  # t is float
        raise EncodingError(pointer, "NaN and infinities have no canonical encoding")
    if t in (str, int, float, bool) or value is None:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if type(k) is not str:
                raise EncodingError(pointer, f"map key `{k!r}` is not a string")
            _check(v, join(pointer, k))
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{pointer}/{i}")
        return
    raise EncodingError(pointer, f"`{t.__name__}` is not a JSON value")


def check_json(value: object) -> None:
    """Raise :class:`EncodingError`, with a pointer, when ``value`` has no canonical encoding
    (NaN, an infinity, a non-string key, a value that is not JSON)."""
    _check(value, "")


def canonical_cbor(value: JsonValue) -> bytes:
    """The core deterministic CBOR encoding of a JSON value (checked first)."""
    _check(value, "")
    return bytes(cbor2.dumps(value, canonical=True))


def decode_canonical_cbor(data: bytes) -> JsonValue:
    """Decode CBOR that must be in canonical form; returns a frozen JSON value.

    Duplicate keys are refused, and the bytes must equal the re-encoding of what they decode to.
    """
    try:
        value = cbor2.loads(data, allow_duplicate_keys=False)
    except (cbor2.CBORDecodeError, ValueError, TypeError, EOFError) as exc:
        raise EncodingError("", f"not valid CBOR: {exc}") from None
    if canonical_cbor(value) != data:
        raise EncodingError("", "CBOR is not in core deterministic (canonical) form")
    return freeze(value)


class _NotCanonical(Exception):
    pass


def _identity(value: JsonValue) -> JsonValue:
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if t is float:
        if value - value != 0.0:
            raise _NotCanonical
        return int(value) if value.is_integer() else value
    if t is dict or t is FrozenMap:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotCanonical
            tv = type(v)
            out[k] = v if tv is str or tv is int or tv is bool or v is None else _identity(v)
        return out
    if t is list or t is tuple:
        return [_identity(v) for v in value]
    try:  # other mappings and sequences: the general path
        _check(value, "")
    except EncodingError:
        raise _NotCanonical from None
    return integral(value)


def identity_value(value: JsonValue) -> JsonValue:
    """``integral(value)`` once ``_check(value)`` passed, in one walk without ABC checks on the
    common types; the pointer of a failure is computed only when there is one."""
    try:
        return _identity(value)
    except _NotCanonical:
        _check(value, "")
        raise AssertionError("unreachable") from None


def integral(value: JsonValue) -> JsonValue:
    """Write integer-valued floats as integers, everywhere inside ``value``.

    This is argument identity: ``{"a": 1.0}`` and ``{"a": 1}`` are the same call.
    """
    t = type(value)
    if t in _SCALARS:
        return value
    if t is float:
        return int(value) if value.is_integer() else value
    if t is dict or isinstance(value, Mapping):  # `type` first: ABC checks cost a microsecond
        return {k: v if type(v) in _SCALARS else integral(v) for k, v in value.items()}
    if t is list or isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else integral(v) for v in value]
    return value


_SCALARS = frozenset({str, int, bool, type(None)})
"""What :func:`integral` returns as it is (a float may be integral; containers hold floats)."""


def _jcs_number(value: int | float) -> str:
    """ECMAScript Number::toString, as RFC 8785 §3.2.2.3 requires."""
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)  # shortest round-trip digits
    mantissa, _, exp_text = text.partition("e")
    digits = mantissa.lstrip("-").replace(".", "")
    point = mantissa.lstrip("-").find(".")
    exponent = (point if point >= 0 else len(mantissa.lstrip("-"))) + int(exp_text or 0)
    stripped = digits.lstrip("0")
    exponent -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    return ("-" if value < 0 else "") + _es_layout(digits, exponent)


def _es_layout(digits: str, n: int) -> str:
    """Lay out significant ``digits`` with decimal exponent ``n`` (value = 0.digits * 10**n)."""
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return f"0.{'0' * -n}{digits}"
    exp = n - 1
    sign = "+" if exp >= 0 else "-"
    head = digits[0] + (f".{digits[1:]}" if k > 1 else "")
    return f"{head}e{sign}{abs(exp)}"


def _jcs(value: Any, out: list[str]) -> None:
    t = type(value)
    if value is None:
        out.append("null")
    elif t is bool:
        out.append("true" if value else "false")
    elif t is int or t is float:
        out.append(_jcs_number(value))
    elif t is str:
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be"))):
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _jcs(value[key], out)
        out.append("}")
    else:
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _jcs(item, out)
        out.append("]")


def canonical_json(value: JsonValue) -> str:
    """RFC 8785 (JCS) text of a JSON value: sorted keys, no whitespace, ES number format."""
    _check(value, "")
    out: list[str] = []
    _jcs(value, out)
    return "".join(out)


def canonical_json_bytes(value: JsonValue) -> bytes:
    """The UTF-8 bytes of :func:`canonical_json`; lone surrogates are refused."""
    try:
        return canonical_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise EncodingError("", "a string holds a lone surrogate, which is not Unicode") from None

"""Argument identity: the deterministic CBOR of a call's arguments, fast.

``argument_identity(v)`` equals ``cbor2.dumps(integral(v), canonical=True)`` byte for byte (a
property test holds it to that) and refuses what has no canonical form with an
:class:`~policy.json.canonical.EncodingError` naming where: NaN, infinities, non-string keys,
strings that are not Unicode (a lone surrogate) and values that are not JSON.

It is written out because it runs once per decision: cbor2's canonical mode encodes every map
key separately to sort it, which costs more than the rest of a decision. Here the common JSON
types are encoded in one walk, integer-valued floats written as integers on the way, and the
sorted order of a map's keys (with their encodings) is remembered per key tuple, so a tool's
usual argument shapes sort once. Rare values (big integers, non-integral floats, other
mappings and sequences) are encoded by cbor2 itself; CBOR is compositional, so the bytes are the
same as one cbor2 call over the whole value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cbor2

from policy.json.canonical import EncodingError, check_json, integral
from policy.json.pointer import join
from policy.json.value import FrozenMap, JsonValue

_BYTE = tuple(bytes((i,)) for i in range(256))
_TRUE, _FALSE, _NULL = b"\xf5", b"\xf4", b"\xf6"
_MAX_CACHED_KEYS = 32
"""Maps with more keys than this are sorted per call, not remembered."""
_MAX_SHAPES = 4096
"""At most this many key tuples are remembered (the first ones seen; no eviction)."""

_Order = tuple[bytes, tuple[tuple[str, bytes], ...]]
_shapes: dict[tuple[str, ...], _Order] = {}


class _Refused(Exception):
    """Not canonical-encodable; the caller finds where with the slow checks."""


def _head(major: int, n: int) -> bytes:
    """The initial byte(s) of a data item of major type ``major`` (shifted) and argument ``n``."""
    if n < 24:
        return _BYTE[major | n]
    if n < 0x100:
        return bytes((major | 24, n))
    if n < 0x10000:
        return _BYTE[major | 25] + n.to_bytes(2, "big")
    if n < 0x100000000:
        return _BYTE[major | 26] + n.to_bytes(4, "big")
    return _BYTE[major | 27] + n.to_bytes(8, "big")


def _text(s: str) -> bytes:
    b = s.encode()
    n = len(b)
    return (_BYTE[0x60 | n] if n < 24 else _head(0x60, n)) + b


def _order(keys: tuple[Any, ...]) -> _Order:
    """The map header and the keys in core deterministic order (bytewise on their encodings)."""
    for k in keys:
        if type(k) is not str:
            raise _Refused
    pairs = sorted(((k, _text(k)) for k in keys), key=_encoded)
    n = len(keys)
    order = (_BYTE[0xA0 | n] if n < 24 else _head(0xA0, n), tuple(pairs))
    if n <= _MAX_CACHED_KEYS and len(_shapes) < _MAX_SHAPES:
        _shapes[keys] = order
    return order


def _encoded(pair: tuple[str, bytes]) -> bytes:
    return pair[1]


def _scalar(v: Any, t: type) -> bytes:
    if t is int:
        if 0 <= v < 0x10000000000000000:
            return _BYTE[v] if v < 24 else _head(0x00, v)
        if -0x10000000000000000 <= v < 0:
            return _head(0x20, -1 - v)
        return bytes(cbor2.dumps(v, canonical=True))  # a bignum (tag 2 or 3)
    if v is True:
        return _TRUE
    if v is False:
        return _FALSE
    if v is None:
        return _NULL
    if t is float:
        if v - v != 0.0:  # NaN or an infinity
            raise _Refused
        if v.is_integer():
            return _scalar(int(v), int)
        return bytes(cbor2.dumps(v, canonical=True))  # the shortest exact float
    return _other(v)


def _other(v: Any) -> bytes:
    """Any other mapping or sequence: checked, made integral and encoded by cbor2."""
    try:
        check_json(v)
    except EncodingError:
        raise _Refused from None
    return bytes(cbor2.dumps(integral(v), canonical=True))


def _encode(v: Any, out: list[bytes]) -> None:
    t = type(v)
    if t is dict or t is FrozenMap:
        keys = tuple(v)
        header, pairs = _shapes.get(keys) or _order(keys)
        out.append(header)
        for k, kb in pairs:
            out.append(kb)
            x = v[k]
            if type(x) is str:
                b = x.encode()
                n = len(b)
                out.append(_BYTE[0x60 | n] if n < 24 else _head(0x60, n))
                out.append(b)
            else:
                _encode(x, out)
    elif t is list or t is tuple:
        n = len(v)
        out.append(_BYTE[0x80 | n] if n < 24 else _head(0x80, n))
        for x in v:
            _encode(x, out)
    elif t is str:
        out.append(_text(v))
    else:
        out.append(_scalar(v, t))


def argument_identity(arguments: JsonValue) -> bytes:
    """The canonical form of a call's arguments: deterministic CBOR after integer-valued
    numbers are written as integers (``{"a": 1.0}`` and ``{"a": 1}`` are one call)."""
    out: list[bytes] = []
    try:
        _encode(arguments, out)
    except (_Refused, UnicodeEncodeError, RecursionError):
        raise _why(arguments) from None
    return b"".join(out)


def _why(value: JsonValue) -> EncodingError:
    """The error, with its pointer, for a value the fast walk refused."""
    try:
        check_json(value)
    except EncodingError as exc:
        return exc
    except RecursionError:
        return EncodingError("", "nested too deeply to encode")
    pointer = _lone_surrogate(value, "")
    if pointer is not None:
        return EncodingError(pointer, "a string holds a lone surrogate, which is not Unicode")
    return EncodingError("", "nested too deeply to encode")


def _lone_surrogate(value: Any, pointer: str) -> str | None:
    """The pointer of the first key or string that is not encodable as UTF-8, if any."""
    if isinstance(value, str):
        return None if value.isascii() or _utf8(value) else pointer
    if isinstance(value, Mapping):
        for k, v in value.items():
            here = join(pointer, _printable(k))
            if not _utf8(k):
                return here
            found = _lone_surrogate(v, here)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _lone_surrogate(v, f"{pointer}/{i}")
            if found is not None:
                return found
    return None


def _printable(s: str) -> str:
    """``s`` with lone surrogates written as ``\\udXXX`` escapes, so an error can be printed."""
    return s.encode("utf-8", "backslashreplace").decode()


def _utf8(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True

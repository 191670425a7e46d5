"""The `structure` pass: the closed format, field by field, from the IR's own field tables.

Unknown keys, missing keys, wrong JSON types and values outside their constraint are reported
at their JSON pointers. Later passes read only what this pass found well-formed enough to read,
and are written defensively so that one pass reports everything it can.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.diagnostics import Collector
from policy.codec import FieldSpec, Kind, field_table
from policy.constraints import Exactly, JsonAny, JsonObject, Length, OneOf, Pattern, Range
from policy.diagnostic import did_you_mean
from policy.json.pointer import join

PASS = "structure"

_JSON_TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object"}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def check_node(cls: type, value: Any, pointer: str, out: Collector) -> None:
    """Check ``value`` as the declaration of one ``cls`` (an IR dataclass)."""
    if not isinstance(value, Mapping):
        out.error("WRONG_TYPE", pointer, f"expected an object, found {json_type(value)}")
        return
    table = field_table(cls)
    by_key = {spec.key: spec for spec in table}
    for k, item in value.items():
        spec = by_key.get(k)
        if spec is None:
            out.error("UNKNOWN_KEY", join(pointer, k), _unknown_key_message(k, by_key))
            continue
        _check_field(spec, item, join(pointer, k), out)
    for spec in table:
        if spec.key not in value and (spec.must_declare or not spec.may_omit):
            out.error("MISSING_KEY", pointer, f"missing key `{spec.key}`")


def _unknown_key_message(k: str, by_key: Mapping[str, FieldSpec]) -> str:
    hint = did_you_mean(k, by_key)
    allowed = ", ".join(f"`{x}`" for x in by_key)
    return f"unknown key `{k}`{hint} (allowed here: {allowed})"


def _check_field(spec: FieldSpec, value: Any, pointer: str, out: Collector) -> None:
    if value is None and spec.kind.nullable and spec.kind.tag != "json":
        out.error("WRONG_TYPE", pointer, f"`{spec.key}` may be omitted but not null")
        return
    check_value(spec.kind, spec.check, value, pointer, out)


def check_value(kind: Kind, check: Any, value: Any, pointer: str, out: Collector) -> None:
    """Check one value against its kind and constraint."""
    tag = kind.tag
    if tag == "node":
        assert kind.py is not None
        check_node(kind.py, value, pointer, out)
    elif tag == "scalar":
        _check_scalar(kind, check, value, pointer, out)
    elif tag == "tuple":
        _check_sequence(kind, check, value, pointer, out)
    elif tag == "mapping":
        _check_mapping(kind, value, pointer, out)
    elif tag == "union":
        _check_union(kind, check, value, pointer, out)
    else:
        _check_json(check, value, pointer, out)


def _check_scalar(kind: Kind, check: Any, value: Any, pointer: str, out: Collector) -> None:
    want = kind.py
    ok = (
        isinstance(value, bool)
        if want is bool
        else isinstance(value, int) and not isinstance(value, bool)
        if want is int
        else isinstance(value, str)
    )
    if want is int and isinstance(value, float) and value.is_integer():
        ok = True
    if not ok:
        expected = _JSON_TYPE_NAMES.get(want or str, "a value")
        out.error("WRONG_TYPE", pointer, f"expected {expected}, found {json_type(value)}")
        return
    if check is not None:
        check_constraint(check, value, pointer, out)


def _check_sequence(kind: Kind, check: Any, value: Any, pointer: str, out: Collector) -> None:
    if not isinstance(value, list):
        out.error("WRONG_TYPE", pointer, f"expected an array, found {json_type(value)}")
        return
    assert kind.item is not None
    for i, item in enumerate(value):
        check_value(
            kind.item, check if kind.item.tag == "scalar" else None, item, join(pointer, i), out
        )


def _check_mapping(kind: Kind, value: Any, pointer: str, out: Collector) -> None:
    if not isinstance(value, Mapping):
        out.error("WRONG_TYPE", pointer, f"expected an object, found {json_type(value)}")
        return
    assert kind.item is not None
    for k, item in value.items():
        check_value(kind.item, None, item, join(pointer, k), out)


def _check_union(kind: Kind, check: Any, value: Any, pointer: str, out: Collector) -> None:
    for option in kind.options:
        if option.tag == "scalar" and isinstance(value, str) and option.py is str:
            check_value(option, check, value, pointer, out)
            return
        if option.tag == "mapping" and isinstance(value, Mapping):
            check_value(option, None, value, pointer, out)
            return
    out.error("WRONG_TYPE", pointer, f"expected a string or an object, found {json_type(value)}")


def _check_json(check: Any, value: Any, pointer: str, out: Collector) -> None:
    if isinstance(check, JsonObject) and not isinstance(value, Mapping):
        out.error("WRONG_TYPE", pointer, f"expected an object, found {json_type(value)}")
    elif check is not None and not isinstance(check, (JsonObject, JsonAny)):
        check_constraint(check, value, pointer, out)


def check_constraint(check: Any, value: Any, pointer: str, out: Collector) -> None:
    """Apply one :mod:`policy.constraints` rule to a value of the right JSON type."""
    if isinstance(check, Pattern):
        if not check.regex.fullmatch(value):
            out.error(check.code, pointer, f"`{_clip(value)}` is not {check.what}")
    elif isinstance(check, Range):
        if not check.low <= value <= check.high:
            out.error(
                "OUT_OF_RANGE", pointer, f"`{value}` is out of range; use {check.low}..{check.high}"
            )
    elif isinstance(check, Length):
        if not check.low <= len(value) <= check.high:
            out.error(
                "OUT_OF_RANGE",
                pointer,
                f"length {len(value)} is out of range; use {check.low}..{check.high} characters",
            )
    elif isinstance(check, OneOf):
        if value not in check.values:
            allowed = ", ".join(f"`{v}`" for v in check.values)
            out.error("INVALID_VALUE", pointer, f"`{_clip(value)}` is not one of {allowed}")
    elif isinstance(check, Exactly) and value != check.value:
        out.error(check.code, pointer, f"`{_clip(value)}` is not supported; use `{check.value}`")


def _clip(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."

"""The schema error oracle: what ``Validator.errors`` must report, walked over the parsed schema.

The generated collector (``policy.schema.codegen``) is checked against this walk
(tests/policy/schema/test_schema_errors_codegen.py). It lives in tests: nothing in the product calls
it.
"""

from __future__ import annotations

from typing import Any

from policy.json.pointer import join as _join
from policy.json.value import json_equal
from policy.schema.parsed import BOUNDS as _BOUNDS
from policy.schema.parsed import COUNTED as _COUNTED
from policy.schema.parsed import TYPE_TESTS as _TYPE_TESTS
from policy.schema.parsed import Node as _Node
from policy.schema.parsed import SchemaError
from policy.schema.parsed import any_equal as _any_equal
from policy.schema.validator import _describe, _free_errors, _show


def reference_errors(node: _Node, value: object) -> tuple[SchemaError, ...]:
    """What ``errors`` reports, walked over the parsed schema: the generated collector's spec."""
    out: list[SchemaError] = []
    _reference_walk(node, value, "", out)
    return tuple(out)


def _reference_walk(node: _Node, value: Any, pointer: str, out: list[SchemaError]) -> None:
    if not _TYPE_TESTS[node.type](value):
        out.append(SchemaError(pointer, "type", f"expected `{node.type}`, got {_describe(value)}"))
        return
    _bound_errors(node, value, pointer, out)
    if node.enum is not None and not (
        value in node.enum_set if node.enum_set is not None else _any_equal(value, node.enum)
    ):
        out.append(SchemaError(pointer, "enum", "value is not one of the `enum` values"))
    if node.const and not json_equal(value, node.const[0]):
        out.append(SchemaError(pointer, "const", "value does not equal the `const` value"))
    if node.type == "object":
        _object_errors(node, value, pointer, out)
    elif node.type == "array":
        if node.items is None:
            _free_errors(value, pointer, out)
        else:
            for index, item in enumerate(value):
                _reference_walk(node.items, item, f"{pointer}/{index}", out)


def _bound_errors(node: _Node, value: Any, pointer: str, out: list[SchemaError]) -> None:
    if node.type not in _BOUNDS:
        return
    low_key, high_key = _BOUNDS[node.type]
    unit = _COUNTED.get(node.type)
    measured = len(value) if unit else value
    shown = f"{measured} {unit}" if unit else _show(value)
    if node.low is not None and measured < node.low:
        message = (
            f"{shown} is fewer than the minimum {node.low}"
            if unit
            else (f"{shown} is less than the minimum `{node.low!r}`")
        )
        out.append(SchemaError(pointer, low_key, message))
    if node.high is not None and measured > node.high:
        message = (
            f"{shown} is more than the maximum {node.high}"
            if unit
            else (f"{shown} is greater than the maximum `{node.high!r}`")
        )
        out.append(SchemaError(pointer, high_key, message))


def _object_errors(
    node: _Node, value: dict[Any, Any], pointer: str, out: list[SchemaError]
) -> None:
    for name, token, child in node.props:
        if name in value:
            _reference_walk(child, value[name], f"{pointer}/{token}", out)
        elif name in node.required:
            out.append(SchemaError(pointer, "required", f"missing required property `{name}`"))
    for name in node.required:
        if name not in node.declared and name not in value:
            out.append(SchemaError(pointer, "required", f"missing required property `{name}`"))
    for key, item in sorted(value.items(), key=lambda kv: str(kv[0])):  # key order is not identity
        if key in node.declared:
            continue
        if not node.additional:
            message = f"property `{key}` is not allowed"
            out.append(SchemaError(_join(pointer, key), "additionalProperties", message))
        elif type(key) is not str:
            out.append(SchemaError(_join(pointer, key), "type", f"key `{key!r}` is not a string"))
        else:
            _free_errors(item, _join(pointer, key), out)

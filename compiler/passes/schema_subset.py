"""The declaration checker of the bounded JSON Schema subset (``project-format.md``).

:func:`check_schema` appends every problem of one schema to a :class:`Collector`, each with its
own code from :mod:`compiler.codes` and a JSON pointer at the offending keyword (or at the node
when the problem is the node itself). It never raises, whatever JSON it is given, and it never
recurses past the depth limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from compiler.codes import UNSUPPORTED_SCHEMA_KEYWORDS
from compiler.diagnostics import Collector
from policy.json.pointer import join
from policy.json.value import is_finite_json, is_number, json_equal
from policy.schema.parsed import MAX_DEPTH, TYPES

MAX_PROPERTIES = 32

_ANNOTATIONS = ("description", "title")
_FAMILY = {
    "properties": "object",
    "required": "object",
    "additionalProperties": "object",
    "items": "array",
    "minItems": "array",
    "maxItems": "array",
    "minLength": "string",
    "maxLength": "string",
    "minimum": "number",
    "maximum": "number",
}
"""Each type-specific keyword and the type family it belongs to (integer is a number)."""

_PAIRS = (("minLength", "maxLength"), ("minItems", "maxItems"), ("minimum", "maximum"))
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})

_Check = Callable[[Mapping[str, Any], Any, str, Collector, int], None]


def check_schema(
    schema: Any,
    pointer: str,
    out: Collector,
    *,
    depth: int = 1,
    root_must_be_object: bool = False,
) -> None:
    """Append every problem of ``schema`` (found at ``pointer``, at nesting level ``depth``)."""
    if depth > MAX_DEPTH:
        out.error("SCHEMA_TOO_DEEP", pointer, f"schema nested deeper than {MAX_DEPTH} levels")
        return
    if not isinstance(schema, Mapping):
        out.error("SCHEMA_NOT_OBJECT", pointer, "a schema must be a json object")
        return
    node_type = _check_type(schema, pointer, out, root_must_be_object)
    for key, value in schema.items():
        _check_keyword(schema, key, value, node_type, join(pointer, key), out=out, depth=depth)
    _check_pairs(schema, node_type, pointer, out)


def schema_depth(schema: Any) -> int:
    """Nesting levels of a schema (a leaf node is 1), counted without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, Mapping):
            continue
        deepest = max(deepest, level)
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            stack.extend((child, level + 1) for child in properties.values())
        if "items" in node:
            stack.append((node["items"], level + 1))
    return deepest


def _check_type(
    schema: Mapping[str, Any], pointer: str, out: Collector, must_be_object: bool
) -> str | None:
    """The node's type when it is valid, after reporting what is wrong with it."""
    if "type" not in schema:
        out.error("SCHEMA_TYPE_MISSING", pointer, "schema node has no `type`")
        return None
    node_type = schema["type"]
    where = join(pointer, "type")
    if isinstance(node_type, (list, tuple)):
        out.error("SCHEMA_TYPE_UNION", where, "`type` must be one string; unions are not supported")
        return None
    if not isinstance(node_type, str) or node_type not in TYPES:
        out.error("SCHEMA_TYPE_INVALID", where, f"{_show(node_type)} is not one of {_TYPE_LIST}")
        return None
    if must_be_object and node_type != "object":
        out.error(
            "SCHEMA_PARAMETERS_NOT_OBJECT",
            where,
            f"`parameters` must be `object`, not `{node_type}`",
        )
    return node_type


def _check_keyword(
    schema: Mapping[str, Any],
    key: str,
    value: Any,
    node_type: str | None,
    pointer: str,
    *,
    out: Collector,
    depth: int,
) -> None:
    if key in UNSUPPORTED_SCHEMA_KEYWORDS:
        code = UNSUPPORTED_SCHEMA_KEYWORDS[key]
        out.error(code, pointer, f"`{key}` is not supported by the schema subset")
    elif key == "additionalProperties" and isinstance(value, Mapping):
        out.error(
            "SCHEMA_UNSUPPORTED_ADDITIONALPROPERTIES_SCHEMA",
            pointer,
            "`additionalProperties` must be `true` or `false`; a schema is not supported",
        )
    elif key in _FAMILY and node_type is not None and _family(node_type) != _FAMILY[key]:
        out.error(
            "SCHEMA_KEYWORD_NOT_APPLICABLE", pointer, f"`{key}` does not apply to `{node_type}`"
        )
    elif key in _CHECKS:
        _CHECKS[key](schema, value, pointer, out, depth)
    elif key in ("enum", "const"):
        _check_values(key, node_type, value, pointer, out)
    elif key != "type":
        out.error("SCHEMA_UNKNOWN_KEYWORD", pointer, f"unknown keyword `{key}`")


def _family(node_type: str) -> str:
    return "number" if node_type == "integer" else node_type


def _check_properties(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    if not isinstance(value, Mapping):
        out.error("SCHEMA_KEYWORD_INVALID", pointer, "`properties` must be an object of schemas")
        return
    if len(value) > MAX_PROPERTIES:
        out.error(
            "SCHEMA_TOO_MANY_PROPERTIES",
            pointer,
            f"{len(value)} properties are declared; at most {MAX_PROPERTIES} are allowed",
        )
    for name, child in value.items():
        check_schema(child, join(pointer, name), out, depth=depth + 1)


def _check_required(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    if not isinstance(value, (list, tuple)):
        out.error("SCHEMA_KEYWORD_INVALID", pointer, "`required` must be an array of names")
        return
    declared = schema.get("properties")
    if not isinstance(declared, Mapping):
        declared = {}
    seen: set[str] = set()
    for index, name in enumerate(value):
        where = join(pointer, index)
        if not isinstance(name, str):
            out.error("SCHEMA_KEYWORD_INVALID", where, "`required` names must be strings")
        elif name in seen:
            out.error("SCHEMA_KEYWORD_INVALID", where, f"`{name}` is listed twice")
        elif name not in declared:
            out.error(
                "SCHEMA_REQUIRED_UNDECLARED",
                where,
                f"`{name}` is required but not declared in `properties`",
            )
        if isinstance(name, str):
            seen.add(name)


def _check_additional(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    if type(value) is not bool:  # a schema was reported as unsupported before we get here
        out.error(
            "SCHEMA_KEYWORD_INVALID", pointer, "`additionalProperties` must be `true` or `false`"
        )


def _check_items(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    check_schema(value, pointer, out, depth=depth + 1)


def _check_bound(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    key = pointer.rsplit("/", 1)[-1]
    if key in _COUNTS and not _is_count(value):
        out.error("SCHEMA_BOUND_INVALID", pointer, f"`{key}` must be a non-negative integer")
    elif key not in _COUNTS and not is_number(value):
        out.error("SCHEMA_BOUND_INVALID", pointer, f"`{key}` must be a finite number")


def _check_annotation(
    schema: Mapping[str, Any], value: Any, pointer: str, out: Collector, depth: int
) -> None:
    if not isinstance(value, str):
        key = pointer.rsplit("/", 1)[-1]
        out.error("SCHEMA_KEYWORD_INVALID", pointer, f"`{key}` must be a string")


_CHECKS: dict[str, _Check] = {
    "properties": _check_properties,
    "required": _check_required,
    "additionalProperties": _check_additional,
    "items": _check_items,
    **{key: _check_bound for key in ("minimum", "maximum", *_COUNTS)},
    **{key: _check_annotation for key in _ANNOTATIONS},
}


def _check_values(
    key: str, node_type: str | None, value: Any, pointer: str, out: Collector
) -> None:
    if key == "const":
        if not _fits(node_type, value):
            out.error("SCHEMA_VALUE_TYPE", pointer, f"`const` is not {_a(node_type)}")
        return
    if not isinstance(value, (list, tuple)):
        out.error("SCHEMA_KEYWORD_INVALID", pointer, "`enum` must be an array of values")
        return
    if not value:
        out.error("SCHEMA_ENUM_EMPTY", pointer, "`enum` must list at least one value")
    for index, item in enumerate(value):
        where = join(pointer, index)
        if not _fits(node_type, item):
            out.error("SCHEMA_VALUE_TYPE", where, f"`enum` value is not {_a(node_type)}")
        elif any(json_equal(item, earlier) for earlier in value[:index]):
            out.error("SCHEMA_ENUM_DUPLICATE", where, "`enum` value repeats an earlier one")


def _check_pairs(
    schema: Mapping[str, Any], node_type: str | None, pointer: str, out: Collector
) -> None:
    for low_key, high_key in _PAIRS:
        if node_type is not None and _family(node_type) != _FAMILY[low_key]:
            continue  # both were reported as not applicable
        low, high = schema.get(low_key), schema.get(high_key)
        valid = _is_count if low_key in _COUNTS else is_number
        if valid(low) and valid(high) and low > high:  # type: ignore[operator]  # both numbers
            out.error(
                "SCHEMA_BOUNDS_INVERTED",
                join(pointer, low_key),
                f"`{low_key}` {_show(low)} is greater than `{high_key}` {_show(high)}",
            )


def _is_count(value: Any) -> bool:
    t = type(value)
    return (t is int or (t is float and is_number(value) and value.is_integer())) and value >= 0


_FITS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, (list, tuple)),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int or (is_number(v) and v.is_integer()),
    "number": is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def _fits(node_type: str | None, value: Any) -> bool:
    """A finite JSON value of ``node_type`` (any type when the node's type is not known)."""
    if not is_finite_json(value):
        return False
    return node_type is None or _FITS[node_type](value)


def _a(node_type: str | None) -> str:
    return "a finite json value" if node_type is None else f"a valid `{node_type}`"


def _show(value: Any) -> str:
    """A short rendering of a user value; containers are named, never printed."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if type(value) is int and value.bit_length() > 256:
        return "a very large integer"
    text = repr(value)
    return f"`{text if len(text) <= 40 else text[:37] + '...'}`"


_TYPE_LIST = ", ".join(f"`{t}`" for t in TYPES)

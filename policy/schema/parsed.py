"""A schema of the bounded subset, parsed: the node tree the validator generates its code from,
and the one failing keyword it reports (:class:`SchemaError`).

:func:`parse_schema` reads only what the validator needs (types, bounds, ``enum``, ``const``,
properties, ``required``, ``additionalProperties``, ``items``); the compiler's checker
(``compiler.passes.schema_subset``) has already refused anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from policy.json.pointer import escape_pointer_token
from policy.json.value import json_equal

MAX_DEPTH = 8
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
ARRAYS = (list, tuple)
BOUNDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "integer": ("minimum", "maximum"),
    "number": ("minimum", "maximum"),
}
COUNTED = {"string": "characters", "array": "items"}


class SchemaError(NamedTuple):
    """One failing keyword: where in the value (RFC 6901 pointer, ``""`` = root), and why.

    Immutable; a named tuple because an argument refusal builds one per failing keyword.
    """

    pointer: str
    keyword: str
    message: str


def any_equal(value: object, options: tuple[Any, ...]) -> bool:
    return any(json_equal(value, option) for option in options)


def _is_integer(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v.is_integer())


def _is_number(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v - v == 0.0)


TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, ARRAYS),
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: v is True or v is False,
    "null": lambda v: v is None,
}
"""The type tests of the parsed schema, as values (the validator's generated code inlines the
same tests: ``policy.schema.validator._TYPE_CODE``; keep the two in step)."""


@dataclass(frozen=True, slots=True)
class Node:
    type: str
    props: tuple[tuple[str, str, Node], ...] = ()  # (name, pointer token, schema)
    declared: frozenset[str] = frozenset()
    required: tuple[str, ...] = ()
    additional: bool = False
    items: Node | None = None
    low: int | float | None = None  # minLength, minItems or minimum
    high: int | float | None = None  # maxLength, maxItems or maximum
    enum: tuple[Any, ...] | None = None
    enum_set: frozenset[Any] | None = None  # when every enum value is a scalar of the node's type
    const: tuple[Any, ...] = ()  # (value,) when the node has `const`


def _bound(schema: Mapping[str, Any], key: str, counted: bool) -> int | float | None:
    value = schema.get(key)
    if value is None or type(value) is bool:
        return None
    if counted and type(value) is float and value.is_integer():
        return int(value)
    return value if type(value) in (int, float) else None


def _scalar_set(node_type: str, values: tuple[Any, ...]) -> frozenset[Any] | None:
    """A frozenset usable for membership once the value passed the type test, else None."""
    if node_type in ("object", "array"):
        return None
    test = TYPE_TESTS[node_type]
    if all(test(v) for v in values):
        return frozenset(values)
    return None


def parse_schema(schema: object, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise ValueError(f"schema nested deeper than {MAX_DEPTH} levels")
    if not isinstance(schema, Mapping):
        raise ValueError("a schema node must be an object")
    node_type = schema.get("type")
    if node_type not in TYPES:
        raise ValueError(f"schema node without a supported `type`: `{node_type!r}`")
    low_key, high_key = BOUNDS.get(node_type, ("", ""))
    counted = node_type in COUNTED
    props: tuple[tuple[str, str, Node], ...] = ()
    items = None
    if node_type == "object":
        raw = schema.get("properties") or {}
        props = tuple(
            (k, escape_pointer_token(k), parse_schema(v, depth + 1)) for k, v in raw.items()
        )
    if node_type == "array" and "items" in schema:
        items = parse_schema(schema["items"], depth + 1)
    enum = tuple(schema["enum"]) if "enum" in schema else None
    return Node(
        type=node_type,
        props=props,
        declared=frozenset(name for name, _, _ in props),
        required=tuple(schema.get("required") or ()) if node_type == "object" else (),
        additional=schema.get("additionalProperties", False) is True,
        items=items,
        low=_bound(schema, low_key, counted),
        high=_bound(schema, high_key, counted),
        enum=enum,
        enum_set=None if enum is None else _scalar_set(node_type, enum),
        const=(schema["const"],) if "const" in schema else (),
    )

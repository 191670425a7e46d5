"""Generated schemas of the subset and values: our validator agrees with jsonschema.

The subset closes objects by default while JSON Schema leaves them open, so jsonschema gets the
schema with ``additionalProperties: false`` written out. NaN and infinities are not JSON (and
jsonschema accepts them as numbers), so they are kept out of that comparison and checked apart:
a value holding one anywhere is never valid.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; the reference implementation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.diagnostics import Collector
from compiler.passes.schema_subset import check_schema
from policy.json.value import freeze, is_finite_json, json_equal
from policy.schema.validator import compile_validator

MAX_LEVELS = 4
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = st.sampled_from(["a", "b", "id", "x y", 'q"t', "n\nl", "\u00e9", "~/", "", "__proto__"])
TEXT = st.text(st.sampled_from("ab\u00e9\U0001f600\x00'\""), max_size=6)
SPECIAL = st.sampled_from([0, 1, 1.0, -1, -1.0, 2, 2.0, 0.5, -0.0, 10**20, 1e20, True, False])
NUMBERS = st.one_of(SPECIAL.filter(lambda v: type(v) is not bool), st.integers(-50, 50),
                    st.floats(-60, 60, allow_nan=False))  # fmt: skip
SCALARS = st.one_of(st.none(), st.booleans(), SPECIAL, st.integers(), TEXT,
                    st.floats(allow_nan=False, allow_infinity=False))  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


def distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not any(json_equal(value, seen) for seen in out):
            out.append(value)
    return out


@st.composite
def bounds(
    draw: st.DrawFn, low_key: str, high_key: str, values: st.SearchStrategy[Any]
) -> dict[str, Any]:
    low, high = draw(st.none() | values), draw(st.none() | values)
    if low is not None and high is not None and low > high:
        low, high = high, low
    out = {low_key: low, high_key: high}
    return {k: v for k, v in out.items() if v is not None}


COUNTS = st.integers(0, 4) | st.sampled_from([0.0, 1.0, 2.0])


@st.composite
def values_keywords(draw: st.DrawFn, options: st.SearchStrategy[Any]) -> dict[str, Any]:
    choice = draw(st.sampled_from(["", "", "enum", "const"]))
    if choice == "enum":
        return {"enum": distinct(draw(st.lists(options, min_size=1, max_size=4)))}
    return {"const": draw(options)} if choice == "const" else {}


@st.composite
def scalar_schema(draw: st.DrawFn) -> dict[str, Any]:
    node_type = draw(st.sampled_from(["string", "integer", "number", "boolean", "null"]))
    schema: dict[str, Any] = {"type": node_type}
    if node_type == "string":
        schema |= draw(bounds("minLength", "maxLength", COUNTS))
        schema |= draw(values_keywords(TEXT))
    elif node_type in ("integer", "number"):
        schema |= draw(bounds("minimum", "maximum", NUMBERS))
        ints = st.integers(-3, 3) | st.sampled_from([1.0, -2.0, 10**20])
        schema |= draw(values_keywords(ints if node_type == "integer" else NUMBERS))
    elif node_type == "boolean":
        schema |= draw(values_keywords(st.booleans()))
    else:
        schema |= draw(values_keywords(st.none()))
    if draw(st.booleans()):
        schema["description"] = draw(TEXT)
    return schema


@st.composite
def schemas(draw: st.DrawFn, level: int = 1) -> dict[str, Any]:
    kinds = ["scalar"] if level >= MAX_LEVELS else ["scalar", "object", "array"]
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        return draw(scalar_schema())
    if kind == "array":
        schema: dict[str, Any] = {"type": "array"}
        if draw(st.integers(0, 4)):
            schema["items"] = draw(schemas(level + 1))
        schema |= draw(bounds("minItems", "maxItems", COUNTS))
        if draw(st.integers(0, 5)) == 0:
            schema |= draw(values_keywords(st.lists(JSON, max_size=2)))
        return schema
    names = draw(st.lists(NAMES, max_size=4, unique=True))
    schema = {"type": "object", "properties": {n: draw(schemas(level + 1)) for n in names}}
    schema["required"] = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    additional = draw(st.sampled_from([None, True, False]))
    if additional is not None:
        schema["additionalProperties"] = additional
    if draw(st.integers(0, 5)) == 0:
        schema |= draw(values_keywords(st.dictionaries(NAMES, JSON, max_size=2)))
    return schema


@st.composite
def value_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """Mostly values near the schema: valid ones, off by one bound, a type or a key."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON)
    if "const" in schema and draw(st.booleans()):
        return schema["const"]
    if "enum" in schema and draw(st.booleans()):
        return draw(st.sampled_from(schema["enum"]))
    node_type = schema["type"]
    if node_type in ("object", "array"):
        return draw(structure_for(schema))
    return draw(
        {
            "string": st.text(st.sampled_from("ab\u00e9\U0001f600"), max_size=6),
            "integer": st.integers(-6, 6) | SPECIAL,
            "number": NUMBERS | SPECIAL,
            "boolean": st.booleans() | SPECIAL,
            "null": st.none() | SPECIAL,
        }[node_type]
    )


@st.composite
def structure_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    if schema["type"] == "array":
        items = schema.get("items")
        element = value_for(items) if items is not None else JSON
        return draw(st.lists(element, max_size=5))
    out = {}
    for name, child in schema["properties"].items():
        if draw(st.integers(0, 5 if name in schema["required"] else 1)):
            out[name] = draw(value_for(child))
    if draw(st.integers(0, 3)) == 0:
        out[draw(NAMES)] = draw(JSON)
    return out


def for_jsonschema(schema: Any) -> Any:
    """The same schema in JSON Schema's terms: objects closed unless they say otherwise."""
    if not isinstance(schema, dict) or "type" not in schema:
        return schema
    out = dict(schema)
    if schema["type"] == "object":
        out.setdefault("additionalProperties", False)
        out["properties"] = {k: for_jsonschema(v) for k, v in schema["properties"].items()}
    if "items" in schema:
        out["items"] = for_jsonschema(schema["items"])
    return out


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    schema = draw(schemas())
    return schema, draw(value_for(schema))


@SETTINGS
@given(schema_and_value())
def test_agrees_with_jsonschema(case: tuple[dict[str, Any], Any]) -> None:
    schema, value = case
    out = Collector("check")
    check_schema(schema, "", out)
    assert out.items == [], [d.to_json() for d in out.items]
    validator = compile_validator(schema)
    expected = jsonschema.Draft202012Validator(for_jsonschema(schema)).is_valid(value)
    assert validator.is_valid(value) is expected
    errors = validator.errors(value)
    assert (errors == ()) is expected, errors
    frozen = freeze(value)
    assert validator.is_valid(frozen) is expected
    assert (validator.errors(frozen) == ()) is expected


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = replaced(value[head], rest, new)
    return copy


@SETTINGS
@given(schema_and_value(), st.data(), st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_numbers_are_never_valid(
    case: tuple[dict[str, Any], Any], data: st.DataObject, bad: float
) -> None:
    schema, value = case
    path = data.draw(st.sampled_from(paths(value)))
    value = replaced(value, path, bad)
    assert not is_finite_json(value)
    validator = compile_validator(schema)
    assert not validator.is_valid(value)
    assert validator.errors(value) != ()


@SETTINGS
@given(st.data(), st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_inside_open_values(data: st.DataObject, bad: float) -> None:
    schema = {"type": "object", "additionalProperties": True, "properties": {}}
    array = {"type": "array"}
    value = data.draw(st.dictionaries(NAMES, JSON, min_size=1, max_size=3))
    path = data.draw(st.sampled_from(paths(value)[1:]))
    for target, item in (
        (schema, replaced(value, path, bad)),
        (array, [replaced(value, path, bad)]),
    ):
        validator = compile_validator(target)
        assert not validator.is_valid(item)
        errors = validator.errors(item)
        assert errors and all(e.keyword == "type" for e in errors)

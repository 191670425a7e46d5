"""The generated error collector reports exactly what the reference walk reports.

``Validator.errors`` runs Python source generated per schema (:mod:`policy.schema.codegen`);
``schema_oracle.reference_errors`` (tests/support/schema_oracle.py) walks the parsed schema. For
generated schemas of the subset and values near them, then bent (non-string keys, NaN and
infinities, booleans for numbers, values that are not JSON, tuples, frozen maps), both give the
same tuple of ``SchemaError``: same pointers, keywords, messages, in the same order.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.diagnostics import Collector
from compiler.passes.schema_subset import check_schema
from policy.json.value import freeze
from policy.schema.parsed import SchemaError
from policy.schema.validator import Validator, compile_validator
from tests.policy.schema.test_schema_properties import (
    JSON,
    NAMES,
    paths,
    replaced,
    schema_and_value,
    schemas,
)
from tests.support.schema_oracle import reference_errors

MANY = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

ODD = st.sampled_from(
    [math.nan, math.inf, -math.inf, True, False, 1.0, -2.0, 0.5, 10**80, 2**300, None, "",
     (), b"x", {1, 2}, object, 1j, [math.nan], {"a": math.inf}, {1: 2}, {(1, 2): "t"},
     {None: 1, "b": 2}, {1.0: 1, "1.0": 2, "1": 3, 2: 4, "2": 5}]
)  # fmt: skip
"""Replacements for a part of a value: not JSON, not finite, or JSON of a surprising type."""

ODD_KEYS = st.sampled_from([1, 1.0, True, None, (1,), "a", "~/", "zz", math.nan])


def check(validator: Validator, value: Any) -> tuple[SchemaError, ...]:
    got = validator.errors(value)
    assert got == reference_errors(validator._root, value), (validator.source, value)
    assert (got == ()) is validator.is_valid(value)
    assert all(type(e) is SchemaError for e in got)
    return got


def compiled(schema: dict[str, Any]) -> Validator:
    out = Collector("check")
    check_schema(schema, "", out)
    assert out.items == [], [d.to_json() for d in out.items]
    return compile_validator(schema)


@MANY
@given(schema_and_value())
def test_agrees_with_the_reference_walk(case: tuple[dict[str, Any], Any]) -> None:
    schema, value = case
    validator = compiled(schema)
    check(validator, value)
    check(validator, freeze(value))


@MANY
@given(schema_and_value(), st.data())
def test_agrees_on_bent_values(case: tuple[dict[str, Any], Any], data: st.DataObject) -> None:
    schema, value = case
    validator = compiled(schema)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths(value)))
        value = replaced(value, where, data.draw(ODD | JSON))
        check(validator, value)
    where = data.draw(st.sampled_from(paths(value)))
    bent = replaced(value, where, {})  # an object to receive keys of any type
    target = bent
    for step in where:
        target = target[step]
    for key in data.draw(st.lists(ODD_KEYS, max_size=4)):
        target[key] = data.draw(ODD | JSON)
    check(validator, bent)


def as_tuples(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: as_tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(as_tuples(v) for v in value)
    return value


@MANY
@given(schema_and_value())
def test_agrees_on_tuples(case: tuple[dict[str, Any], Any]) -> None:
    schema, value = case
    check(compiled(schema), as_tuples(value))


@settings(max_examples=300, deadline=None)
@given(schemas(), st.lists(st.tuples(ODD_KEYS | NAMES, ODD | JSON), max_size=6))
def test_agrees_on_any_keys(schema: dict[str, Any], pairs: list[tuple[Any, Any]]) -> None:
    validator = compiled(schema)
    for open_ in (schema, {"type": "object", "additionalProperties": True, "properties": {}}):
        check(compile_validator(open_), dict(pairs))
    check(validator, dict(pairs))
    check(validator, [dict(pairs), dict(pairs)])


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value, 1] if index % 2 else {"k": value, "n": None}
    return value


def test_any_depth_inside_unconstrained_values() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {},
                                                        "additionalProperties": True}}},
        "additionalProperties": True,
    }  # fmt: skip
    validator = compiled(schema)
    for leaf in (math.nan, -math.inf, object(), "ok", {2: 3}):
        value = {"z": nested(20_000, leaf), "a": [{"x": nested(5_000, leaf)}], "b": [leaf]}
        errors = check(validator, value)
        assert (errors == ()) is (leaf == "ok")
        check(compile_validator({"type": "array"}), [nested(20_000, leaf)])


def test_any_string_in_a_schema_is_safe() -> None:
    names = ["'", '"', "\\", "\n", "'''", '"""', "{v}", "{0}", "')); import os; (('", "~0/~1",
             "\x00", "\ud800", "x" * 300, "\u2028", "# comment"]  # fmt: skip
    schema = {
        "type": "object",
        "properties": {n: {"type": "string", "enum": [n, n * 2], "maxLength": 1} for n in names},
        "required": names,
    }
    validator = compile_validator(schema)
    errors = check(validator, {})
    assert [e.message for e in errors] == [f"missing required property `{n}`" for n in names]
    value = {n: n * 2 for n in names} | {n + "!": 1 for n in names}
    errors = check(validator, value)
    assert {e.keyword for e in errors} == {"maxLength", "additionalProperties"}
    nested_schema = {"type": "array", "items": schema}
    check(compile_validator(nested_schema), [value, {}, 3])
    check(compile_validator({"type": "string", "const": "x" * 300}), "y")


NOT_FINITE = "NaN or an infinity, which JSON does not have"


def test_examples() -> None:
    validator = compile_validator(
        {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "minLength": 1},
                "depth": {"type": "integer", "maximum": 3},
                "n": {"type": "array", "items": {"type": "number"}, "maxItems": 2},
            },
            "required": ["ref", "gone"],
        }
    )
    value = {"depth": 9.0, "n": [1, True, math.nan], 2: 1, "extra": 1, "a/b": {}}
    assert check(validator, value) == (
        SchemaError("", "required", "missing required property `ref`"),
        SchemaError("/depth", "maximum", "`9.0` is greater than the maximum `3`"),
        SchemaError("/n", "maxItems", "3 items is more than the maximum 2"),
        SchemaError("/n/1", "type", "expected `number`, got a boolean"),
        SchemaError("/n/2", "type", f"expected `number`, got {NOT_FINITE}"),
        SchemaError("", "required", "missing required property `gone`"),
        SchemaError("/2", "additionalProperties", "property `2` is not allowed"),
        SchemaError("/a~1b", "additionalProperties", "property `a/b` is not allowed"),
        SchemaError("/extra", "additionalProperties", "property `extra` is not allowed"),
    )  # fmt: skip

"""The value validator of the schema subset: JSON semantics, error pointers and keywords."""

from __future__ import annotations

import math
from typing import Any

import pytest

from policy.json.value import FrozenMap, freeze, is_finite_json, json_equal
from policy.schema.parsed import SchemaError
from policy.schema.validator import Validator, compile_validator

NAN, INF = math.nan, math.inf


def check(schema: dict[str, Any], value: Any) -> tuple[bool, tuple[SchemaError, ...]]:
    validator = compile_validator(schema)
    valid, errors = validator.is_valid(value), validator.errors(value)
    assert valid == (errors == ()), (valid, errors)
    return valid, errors


def keywords(errors: tuple[SchemaError, ...]) -> list[tuple[str, str]]:
    return [(e.pointer, e.keyword) for e in errors]


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("node_type", "valid", "invalid"),
    [
        (
            "integer",
            [0, -3, 1.0, -2.0, 10**30, 1e20],
            [True, False, 1.5, "1", None, NAN, INF, -INF],
        ),
        ("number", [0, 1.5, -2, 1e308, 10**30], [True, "1", None, NAN, INF, -INF, [1]]),
        ("string", ["", "x", "\u00e9"], [1, None, b"x", ["x"]]),
        ("boolean", [True, False], [0, 1, "true", None]),
        ("null", [None], [0, False, "", [], {}]),
        ("array", [[], [1, "a"], (1, 2)], [{}, "ab", None, {1, 2}]),
        ("object", [{}, FrozenMap()], [[], "x", None, 1]),
    ],
)
def test_types_follow_json(node_type: str, valid: list[Any], invalid: list[Any]) -> None:
    for value in valid:
        assert check({"type": node_type}, value)[0], value
    for value in invalid:
        ok, errors = check({"type": node_type}, value)
        assert not ok, value
        assert keywords(errors) == [("", "type")]


def test_integer_valued_floats_satisfy_integer_bounds() -> None:
    schema = {"type": "integer", "minimum": 2.0, "maximum": 3}
    assert check(schema, 2.0)[0]
    assert check(schema, 3.0)[0]
    assert keywords(check(schema, 4.0)[1]) == [("", "maximum")]
    assert keywords(check(schema, 1)[1]) == [("", "minimum")]


def test_number_bounds_are_inclusive_and_exact() -> None:
    schema = {"type": "number", "minimum": 1.1, "maximum": 2**53}
    assert check(schema, 1.1)[0]
    assert not check(schema, 1)[0]
    assert check(schema, 2**53)[0]
    assert keywords(check(schema, 2**53 + 1)[1]) == [("", "maximum")]


def test_enum_compares_numbers_by_value_but_never_booleans() -> None:
    assert check({"type": "integer", "enum": [1, 2]}, 1.0)[0]
    assert check({"type": "number", "enum": [1.0]}, 1)[0]
    assert not check({"type": "integer", "enum": [1]}, True)[0]
    assert not check({"type": "boolean", "enum": [True]}, 1)[0]
    assert check({"type": "boolean", "enum": [False]}, False)[0]
    assert keywords(check({"type": "boolean", "enum": [False]}, True)[1]) == [("", "enum")]


def test_enum_and_const_of_structures() -> None:
    schema = {"type": "array", "enum": [[1, {"a": True}], [2]]}
    assert check(schema, [1.0, {"a": True}])[0]
    assert check(schema, (2,))[0]
    assert not check(schema, [1, {"a": 1}])[0]
    const = {"type": "object", "additionalProperties": True, "const": {"a": [0]}}
    assert check(const, {"a": [0.0]})[0]
    assert keywords(check(const, {"a": [False]})[1]) == [("", "const")]


def test_const_scalars() -> None:
    assert check({"type": "number", "const": 2}, 2.0)[0]
    assert not check({"type": "number", "const": 2}, 2.5)[0]
    assert check({"type": "string", "const": "a\nb"}, "a\nb")[0]
    assert keywords(check({"type": "string", "const": "a"}, "b")[1]) == [("", "const")]
    assert not check({"type": "boolean", "const": False}, 0)[0]
    assert check({"type": "null", "const": None}, None)[0]


def test_strings_count_code_points() -> None:
    schema = {"type": "string", "minLength": 2, "maxLength": 2}
    assert check(schema, "\U0001f600\u00e9")[0]  # two code points, four UTF-16 units
    assert keywords(check(schema, "\U0001f600")[1]) == [("", "minLength")]
    assert keywords(check(schema, "abc")[1]) == [("", "maxLength")]


def test_objects_are_closed_by_default() -> None:
    schema = obj(a={"type": "string"})
    assert check(schema, {"a": "x"})[0]
    assert keywords(check(schema, {"a": "x", "b": 1})[1]) == [("/b", "additionalProperties")]
    assert keywords(check({"type": "object"}, {"x": 1})[1]) == [("/x", "additionalProperties")]
    assert not check(schema, {1: "x"})[0]


def test_open_objects_still_refuse_nan_anywhere() -> None:
    schema = {**obj(a={"type": "string"}), "additionalProperties": True}
    assert check(schema, {"a": "x", "b": [1, {"c": None}]})[0]
    _, errors = check(schema, {"b": [1, {"c": NAN}], "d": INF, "e": {1: 2}})
    assert keywords(errors) == [("/b/1/c", "type"), ("/d", "type"), ("/e/1", "type")]
    _, errors = check({"type": "object", "additionalProperties": True}, {"x": {"y": [-INF]}})
    assert keywords(errors) == [("/x/y/0", "type")]
    assert not check({"type": "object", "additionalProperties": True}, {"x": object()})[0]


def test_arrays_without_items_refuse_nan() -> None:
    assert check({"type": "array"}, [[{"a": 1}], "b"])[0]
    _, errors = check({"type": "array"}, [1, [NAN]])
    assert keywords(errors) == [("/1/0", "type")]


def test_required_and_all_errors_in_order() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "items": {
                "type": "array",
                "maxItems": 2,
                "items": {
                    **obj(id={"type": "integer"}, tag={"type": "string"}),
                    "required": ["id"],
                },
            },
            "mode": {"type": "string", "enum": ["a", "b"]},
        },
        "required": ["mode", "name"],
    }
    value = {"zz": 1, "items": [{"tag": 1}, {"id": 1.5, "x": 0}, {"id": 3}], "aa": 2}
    valid, errors = check(schema, value)
    assert not valid
    assert keywords(errors) == [
        ("", "required"),
        ("/items", "maxItems"),
        ("/items/0", "required"),
        ("/items/0/tag", "type"),
        ("/items/1/id", "type"),
        ("/items/1/x", "additionalProperties"),
        ("", "required"),
        ("/aa", "additionalProperties"),  # extra keys in sorted order: key order is not identity
        ("/zz", "additionalProperties"),
    ]
    assert errors[0].message == "missing required property `name`"
    assert errors[6].message == "missing required property `mode`"


def test_messages_are_short_and_lowercase() -> None:
    schema = {**obj(n={"type": "integer", "minimum": 1}), "required": ["n"]}
    values: list[Any] = [{"n": 0}, {"n": "x"}, {}, {"n": 1, "m": 2}, []]
    for value in values:
        for error in check(schema, value)[1]:
            assert error.message[0].islower() or error.message[0] == "`", error
            assert not error.message.endswith(".")


def test_property_names_of_any_shape_are_safe() -> None:
    names = ["a'b", 'a"b', "a\nb", "a\\b", "\u2028", "}:return True#", "~/x", "", "\x00"]
    schema = {**obj(**{n: {"type": "integer", "const": i} for i, n in enumerate(names)})}
    schema["required"] = names
    value = {n: i for i, n in enumerate(names)}
    assert check(schema, value)[0]
    value["~/x"] = 99
    assert keywords(check(schema, value)[1]) == [("/~0~1x", "const")]
    enum = {"type": "string", "enum": names, "const": "a'b"}
    assert check(enum, "a'b")[0]
    assert not check(enum, "a\nb")[0]


def test_frozen_values_and_schemas() -> None:
    schema = freeze({**obj(a={"type": "array", "items": {"type": "number"}}), "required": ["a"]})
    validator = compile_validator(schema)
    assert validator.is_valid(freeze({"a": [1, 2.5]}))
    assert validator.is_valid({"a": (1, 2.5)})
    assert not validator.is_valid({"a": [True]})


def test_deeply_nested_values_do_not_recurse() -> None:
    value: Any = 1
    for _ in range(50_000):
        value = [value]
    assert check({"type": "array"}, value)[0]
    assert check({"type": "object", "additionalProperties": True}, {"x": value})[0]
    schema = {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
    assert keywords(check(schema, value)[1]) == [("/0/0", "type")]
    assert json_equal(value, value)
    assert is_finite_json(value)


def test_eight_levels_compile_and_validate() -> None:
    schema: dict[str, Any] = {"type": "integer", "maximum": 3}
    value: Any = 3
    for level in range(7):
        schema = {"type": "array", "items": schema} if level % 2 else obj(x=schema)
        value = [value] if level % 2 else {"x": value}
    validator = compile_validator(schema)
    assert validator.is_valid(value)
    assert not validator.is_valid([value])


def test_big_numbers_and_large_constants() -> None:
    huge = 10**400
    assert check({"type": "integer", "minimum": huge}, huge)[0]
    _, errors = check({"type": "integer", "maximum": huge}, huge * 10)
    assert keywords(errors) == [("", "maximum")]
    assert "bits" in errors[0].message
    long_text = "x" * 10_000
    assert check({"type": "string", "const": long_text}, long_text)[0]
    assert not check({"type": "number", "maximum": 1e308}, INF)[0]


def test_refuses_what_is_not_a_schema_of_the_subset() -> None:
    for schema in ({}, {"type": ["string"]}, {"type": "object", "properties": {"a": 1}}):
        with pytest.raises(ValueError):
            compile_validator(schema)
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(8):
        deep = {"type": "array", "items": deep}
    with pytest.raises(ValueError, match="deeper than 8"):
        compile_validator(deep)


def test_validator_api() -> None:
    validator = compile_validator({"type": "string"})
    assert isinstance(validator, Validator)
    assert validator.errors("ok") == ()
    assert "def is_valid" in validator.source
    error = validator.errors(3)[0]
    assert error == SchemaError(pointer="", keyword="type", message=error.message)
    with pytest.raises(AttributeError):
        error.keyword = "x"  # type: ignore[misc]  # checking that the dataclass is frozen


def test_the_errors_follow_each_schemas_property_order_whichever_was_compiled_first() -> None:
    """Two schemas that differ only in the order of their properties share no validator: the
    errors of each come in its own order (a shared cache once gave the second schema the first
    one's order, so a decision's `errors` depended on what the process had compiled before)."""
    bounds = {"a": {"type": "integer", "maximum": 1}, "b": {"type": "string", "maxLength": 1}}
    first = {"type": "object", "properties": {"a": bounds["a"], "b": bounds["b"]}}
    second = {"type": "object", "properties": {"b": bounds["b"], "a": bounds["a"]}}
    value = {"a": 2, "b": "xx"}
    assert [e.pointer for e in compile_validator(first).errors(value)] == ["/a", "/b"]
    assert [e.pointer for e in compile_validator(second).errors(value)] == ["/b", "/a"]
    assert [e.pointer for e in compile_validator(first).errors(value)] == ["/a", "/b"]

"""The declaration checker of the schema subset: every rule, its code and its pointer."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from compiler.codes import CODES, UNSUPPORTED_SCHEMA_KEYWORDS
from compiler.diagnostics import Collector
from compiler.passes.schema_subset import check_schema, schema_depth
from policy.json.value import freeze


def problems(schema: Any, **options: Any) -> list[tuple[str, str | None]]:
    out = Collector("check")
    check_schema(schema, "/tools/0/parameters", out, **options)
    for item in out.items:
        assert item.code in CODES, item
        assert item.message and not item.message.endswith("."), item
        assert item.message[0].islower() or item.message[0] in "`0123456789", item
    return [(item.code, item.pointer) for item in out.items]


P = "/tools/0/parameters"


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


GOOD = {
    "type": "object",
    "title": "search",
    "description": "search the knowledge base",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50.0},
        "ratio": {"type": "number", "minimum": -1.5, "maximum": 1.5},
        "mode": {"type": "string", "enum": ["fast", "full"]},
        "tags": {"type": "array", "minItems": 0, "maxItems": 2.0, "items": {"type": "string"}},
        "flag": {"type": "boolean", "const": True},
        "nothing": {"type": "null"},
        "meta": {"type": "object", "additionalProperties": True},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def test_a_good_schema_has_no_problems() -> None:
    assert problems(GOOD, root_must_be_object=True) == []
    assert problems(freeze(GOOD), root_must_be_object=True) == []


@pytest.mark.parametrize(("keyword", "code"), sorted(UNSUPPORTED_SCHEMA_KEYWORDS.items()))
def test_each_refused_keyword_has_its_own_code(keyword: str, code: str) -> None:
    nested = obj(inner={"type": "string", keyword: "x"})
    assert problems(nested) == [(code, f"{P}/properties/inner/{keyword}")]


def test_refused_keywords_are_all_reported() -> None:
    schema = {"type": "string", "pattern": "^a", "format": "email", "$id": "x", "default": ""}
    assert problems(schema) == [
        ("SCHEMA_UNSUPPORTED_PATTERN", f"{P}/pattern"),
        ("SCHEMA_UNSUPPORTED_FORMAT", f"{P}/format"),
        ("SCHEMA_UNSUPPORTED_ID", f"{P}/$id"),
        ("SCHEMA_UNSUPPORTED_DEFAULT", f"{P}/default"),
    ]


def test_additional_properties_forms() -> None:
    assert problems({"type": "object", "additionalProperties": {"type": "string"}}) == [
        ("SCHEMA_UNSUPPORTED_ADDITIONALPROPERTIES_SCHEMA", f"{P}/additionalProperties")
    ]
    assert problems({"type": "object", "additionalProperties": 0}) == [
        ("SCHEMA_KEYWORD_INVALID", f"{P}/additionalProperties")
    ]
    assert problems({"type": "object", "additionalProperties": True}) == []


def test_unknown_keywords_and_escaped_pointers() -> None:
    assert problems({"type": "string", "prefixItems": [], "a/b~": 1}) == [
        ("SCHEMA_UNKNOWN_KEYWORD", f"{P}/prefixItems"),
        ("SCHEMA_UNKNOWN_KEYWORD", f"{P}/a~1b~0"),
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, [("SCHEMA_TYPE_MISSING", P)]),
        ({"type": ["string", "null"]}, [("SCHEMA_TYPE_UNION", f"{P}/type")]),
        ({"type": ["string"]}, [("SCHEMA_TYPE_UNION", f"{P}/type")]),
        ({"type": "float"}, [("SCHEMA_TYPE_INVALID", f"{P}/type")]),
        ({"type": 3}, [("SCHEMA_TYPE_INVALID", f"{P}/type")]),
        ({"type": None}, [("SCHEMA_TYPE_INVALID", f"{P}/type")]),
        ([], [("SCHEMA_NOT_OBJECT", P)]),
        (True, [("SCHEMA_NOT_OBJECT", P)]),
    ],
)
def test_type_rules(schema: Any, expected: list[tuple[str, str]]) -> None:
    assert problems(schema) == expected


def test_parameters_must_be_objects() -> None:
    assert problems({"type": "string"}, root_must_be_object=True) == [
        ("SCHEMA_PARAMETERS_NOT_OBJECT", f"{P}/type")
    ]
    assert problems({"type": "string"}) == []


@pytest.mark.parametrize(
    ("node_type", "keyword", "value"),
    [
        ("integer", "minLength", 1),
        ("string", "minimum", 1),
        ("string", "items", {"type": "string"}),
        ("number", "properties", {}),
        ("array", "required", []),
        ("boolean", "maxItems", 1),
        ("null", "additionalProperties", False),
        ("object", "maxLength", 3),
    ],
)
def test_keywords_of_another_type(node_type: str, keyword: str, value: Any) -> None:
    assert problems({"type": node_type, keyword: value}) == [
        ("SCHEMA_KEYWORD_NOT_APPLICABLE", f"{P}/{keyword}")
    ]


@pytest.mark.parametrize("keyword", ["minLength", "maxLength"])
@pytest.mark.parametrize("value", [-1, 1.5, "2", True, None, math.inf, math.nan, -0.5])
def test_counts_must_be_non_negative_integers(keyword: str, value: Any) -> None:
    assert problems({"type": "string", keyword: value}) == [
        ("SCHEMA_BOUND_INVALID", f"{P}/{keyword}")
    ]


@pytest.mark.parametrize("value", [0, 2.0, 10**20])
def test_integer_valued_counts_are_accepted(value: Any) -> None:
    assert problems({"type": "array", "minItems": value, "maxItems": 10**21}) == []


@pytest.mark.parametrize("value", ["1", True, False, None, math.inf, -math.inf, math.nan, [1]])
def test_numeric_bounds_must_be_finite_numbers(value: Any) -> None:
    assert problems({"type": "number", "maximum": value}) == [
        ("SCHEMA_BOUND_INVALID", f"{P}/maximum")
    ]


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "string", "minLength": 3, "maxLength": 2}, "minLength"),
        ({"type": "array", "minItems": 3.0, "maxItems": 2}, "minItems"),
        ({"type": "integer", "minimum": 1.5, "maximum": 1}, "minimum"),
        ({"type": "number", "minimum": 0, "maximum": -(10**30)}, "minimum"),
    ],
)
def test_inverted_bounds(schema: dict[str, Any], pointer: str) -> None:
    assert problems(schema) == [("SCHEMA_BOUNDS_INVERTED", f"{P}/{pointer}")]


def test_equal_bounds_are_fine() -> None:
    assert problems({"type": "string", "minLength": 2, "maxLength": 2.0}) == []
    assert problems({"type": "integer", "minimum": 2, "maximum": 2}) == []


def test_required_rules() -> None:
    schema = {**obj(a={"type": "string"}), "required": ["a", "b", "a", 3]}
    assert problems(schema) == [
        ("SCHEMA_REQUIRED_UNDECLARED", f"{P}/required/1"),
        ("SCHEMA_KEYWORD_INVALID", f"{P}/required/2"),
        ("SCHEMA_KEYWORD_INVALID", f"{P}/required/3"),
    ]
    assert problems({"type": "object", "required": ["x"]}) == [
        ("SCHEMA_REQUIRED_UNDECLARED", f"{P}/required/0")
    ]
    assert problems({"type": "object", "required": "x"}) == [
        ("SCHEMA_KEYWORD_INVALID", f"{P}/required")
    ]


def test_enum_rules() -> None:
    assert problems({"type": "string", "enum": []}) == [("SCHEMA_ENUM_EMPTY", f"{P}/enum")]
    assert problems({"type": "string", "enum": "a"}) == [("SCHEMA_KEYWORD_INVALID", f"{P}/enum")]
    assert problems({"type": "integer", "enum": [1, 1.0, True, 2.5, "1"]}) == [
        ("SCHEMA_ENUM_DUPLICATE", f"{P}/enum/1"),
        ("SCHEMA_VALUE_TYPE", f"{P}/enum/2"),
        ("SCHEMA_VALUE_TYPE", f"{P}/enum/3"),
        ("SCHEMA_VALUE_TYPE", f"{P}/enum/4"),
    ]
    assert problems({"type": "boolean", "enum": [True, 1]}) == [
        ("SCHEMA_VALUE_TYPE", f"{P}/enum/1")
    ]
    assert problems({"type": "array", "enum": [[1], [1.0], [True]]}) == [
        ("SCHEMA_ENUM_DUPLICATE", f"{P}/enum/1")
    ]
    assert problems({"type": "number", "enum": [math.nan]}) == [
        ("SCHEMA_VALUE_TYPE", f"{P}/enum/0")
    ]


@pytest.mark.parametrize(
    ("node_type", "good", "bad"),
    [
        ("string", "x", 1),
        ("integer", 2.0, 2.5),
        ("integer", 10**400, True),
        ("number", 1.5, "1.5"),
        ("boolean", False, 0),
        ("null", None, False),
        ("object", {"a": [1]}, [1]),
        ("array", [{"a": 1}], {"a": 1}),
        ("array", [1], [math.inf]),
    ],
)
def test_const_must_fit_the_type(node_type: str, good: Any, bad: Any) -> None:
    extra = {"additionalProperties": True} if node_type == "object" else {}
    assert problems({"type": node_type, "const": good, **extra}) == []
    assert problems({"type": node_type, "const": bad, **extra}) == [
        ("SCHEMA_VALUE_TYPE", f"{P}/const")
    ]


def test_annotations_must_be_strings() -> None:
    assert problems({"type": "null", "description": 1, "title": None}) == [
        ("SCHEMA_KEYWORD_INVALID", f"{P}/description"),
        ("SCHEMA_KEYWORD_INVALID", f"{P}/title"),
    ]


def test_properties_form_and_limit() -> None:
    assert problems({"type": "object", "properties": []}) == [
        ("SCHEMA_KEYWORD_INVALID", f"{P}/properties")
    ]
    many = obj(**{f"p{i}": {"type": "null"} for i in range(33)})
    assert problems(many) == [("SCHEMA_TOO_MANY_PROPERTIES", f"{P}/properties")]
    assert problems(obj(**{f"p{i}": {"type": "null"} for i in range(32)})) == []


def nest(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for level in range(levels - 1):
        schema = {"type": "array", "items": schema} if level % 2 else obj(x=schema)
    return schema


def test_depth_limit() -> None:
    assert schema_depth(nest(8)) == 8
    assert problems(nest(8)) == []
    for levels in (9, 10, 30):  # reported once, at the ninth level, not descended further
        ((code, pointer),) = problems(nest(levels))
        assert code == "SCHEMA_TOO_DEEP"
        assert pointer is not None
        assert pointer.count("/items") + pointer.count("/properties/x") == 8
    assert problems({"type": "string"}, depth=9) == [("SCHEMA_TOO_DEEP", P)]


def test_problems_in_children_are_all_reported() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "minLength": -1, "pattern": "x"},
            "b": {"type": "array", "items": {"type": "integer", "maxLength": 1}},
            "c": {"enum": [1]},
            "d": 5,
        },
        "required": ["a", "z"],
    }
    assert problems(schema) == [
        ("SCHEMA_BOUND_INVALID", f"{P}/properties/a/minLength"),
        ("SCHEMA_UNSUPPORTED_PATTERN", f"{P}/properties/a/pattern"),
        ("SCHEMA_KEYWORD_NOT_APPLICABLE", f"{P}/properties/b/items/maxLength"),
        ("SCHEMA_TYPE_MISSING", f"{P}/properties/c"),
        ("SCHEMA_NOT_OBJECT", f"{P}/properties/d"),
        ("SCHEMA_REQUIRED_UNDECLARED", f"{P}/required/1"),
    ]


def test_untyped_nodes_still_check_keyword_forms() -> None:
    assert problems({"minLength": -1, "enum": []}) == [
        ("SCHEMA_TYPE_MISSING", P),
        ("SCHEMA_BOUND_INVALID", f"{P}/minLength"),
        ("SCHEMA_ENUM_EMPTY", f"{P}/enum"),
    ]


def test_deep_json_never_raises() -> None:
    value: Any = 1
    for _ in range(20_000):
        value = [value]
    assert problems({"type": "array", "const": value, "enum": [value, value]}) == [
        ("SCHEMA_ENUM_DUPLICATE", f"{P}/enum/1")
    ]
    deep: Any = {}
    for _ in range(5_000):
        deep = {"type": "object", "properties": {"x": deep}}
    assert problems(deep) == [("SCHEMA_TOO_DEEP", P + "/properties/x" * 8)]
    assert schema_depth(deep) == 5_001


@pytest.mark.parametrize(
    "text",
    [
        '"x"',
        "null",
        "[]",
        "{}",
        '{"type": {}}',
        '{"properties": {"a": []}}',
        '{"enum": {}}',
        '{"required": [[]]}',
        '{"type": "object", "properties": {"": {"type": "null"}}}',
        '{"items": {"items": 3}}',
        '{"type": "string", "minLength": 1e400}',
    ],
)
def test_any_json_is_checked_without_raising(text: str) -> None:
    # the lax reader on purpose: the checker must also survive what strict loads refuses (1e400)
    problems(json.loads(text))

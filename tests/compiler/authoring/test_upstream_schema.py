"""An upstream tool's schema in seif's subset, never looser (docs/upstream-mcp.md): examples of
what is dropped, narrowed and refused at which pointer, and a property: with ``jsonschema`` as
the oracle of the upstream schema and seif's validator for the imported one, no value the
imported schema accepts is refused by the upstream schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.authoring.upstream_schema import narrow
from policy.schema.validator import compile_validator

IN = "/inputSchema"


def obj(properties: dict[str, Any], required: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, **kw}
    if required is not None:
        out["required"] = required
    return out


def test_annotations_are_dropped_title_and_description_stay() -> None:
    schema = obj(
        {"a": {"type": "string", "default": "x", "examples": ["y"], "title": "A"}},
        additionalProperties=False,
        **{"$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": "c"},
    )
    found = narrow(schema, IN, parameters=True)
    assert found.schema == obj({"a": {"type": "string", "title": "A"}}, additionalProperties=False)
    assert found.dropped == [
        f"{IN}/properties/a/default",
        f"{IN}/properties/a/examples",
        f"{IN}/$schema",
        f"{IN}/$comment",
    ]
    assert found.narrowed == [] and found.refused == []


@pytest.mark.parametrize(
    ("nullable", "where"),
    [
        ({"anyOf": [{"type": "integer", "maximum": 3}, {"type": "null"}]}, "anyOf"),
        ({"oneOf": [{"type": "null"}, {"type": "integer", "maximum": 3}]}, "oneOf"),
        ({"type": ["integer", "null"], "maximum": 3}, "type"),
    ],
)
def test_a_nullable_optional_property_becomes_its_schema(
    nullable: dict[str, Any], where: str
) -> None:
    found = narrow(obj({"n": nullable}, additionalProperties=False), IN, parameters=True)
    assert found.schema == obj({"n": {"type": "integer", "maximum": 3}}, additionalProperties=False)
    assert found.narrowed == [f"{IN}/properties/n/{where}"]


@pytest.mark.parametrize("where", ["anyOf", "type"])
def test_a_nullable_required_property_is_refused(where: str) -> None:
    nullable = (
        {"anyOf": [{"type": "string"}, {"type": "null"}]}
        if where == "anyOf"
        else {"type": ["string", "null"]}
    )
    found = narrow(obj({"s": nullable}, ["s"]), IN, parameters=True)
    assert found.schema is None
    assert [p for p, _ in found.refused] == [f"{IN}/properties/s/{where}"]


def test_open_objects_are_closed() -> None:
    found = narrow(
        obj({"inner": obj({"x": {"type": "boolean"}}, additionalProperties=True)}),
        IN,
        parameters=True,
    )
    assert found.schema == obj({"inner": obj({"x": {"type": "boolean"}})})
    assert found.narrowed == [f"{IN}/properties/inner", IN]


P = f"{IN}/properties/p"


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (obj({"p": {"type": "string", "pattern": "^a"}}), f"{P}/pattern"),
        (obj({"p": {"type": "string", "format": "uri"}}), f"{P}/format"),
        (obj({"p": {"$ref": "#/$defs/P"}}, **{"$defs": {"P": {"type": "string"}}}), f"{P}/$ref"),
        (obj({"p": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}), f"{P}/anyOf"),
        (obj({"p": {"type": ["string", "integer"]}}), f"{P}/type"),
        (obj({"p": {"type": "array", "items": {"multipleOf": 2}}}), f"{P}/items/multipleOf"),
        (obj({"p": {"type": "object", "additionalProperties": {}}}), f"{P}/additionalProperties"),
        (obj({"p": {"description": "no type"}}), P),
        (obj({"p": True}), P),
        (obj({"p": {"type": "string", "minLength": -1}}), f"{P}/minLength"),
        ({"type": "string"}, f"{IN}/type"),
        (obj({f"p{i}": {"type": "string"} for i in range(33)}), f"{IN}/properties"),
    ],
)
def test_anything_else_refuses_the_tool_at_its_pointer(
    schema: dict[str, Any], pointer: str
) -> None:
    found = narrow(schema, IN, parameters=True)
    assert found.schema is None
    assert pointer in [p for p, _ in found.refused], found.refused


def test_a_nullable_union_inside_an_optional_property_keeps_its_siblings() -> None:
    prop = {"anyOf": [{"type": "string"}, {"type": "null"}], "maxLength": 4, "default": None}
    found = narrow(obj({"s": prop}, additionalProperties=False), IN, parameters=True)
    assert found.schema == obj(
        {"s": {"type": "string", "maxLength": 4}}, additionalProperties=False
    )
    clash = {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}], "maxLength": 4}
    refused = narrow(obj({"s": clash}), IN, parameters=True)
    assert [p for p, _ in refused.refused] == [f"{IN}/properties/s/maxLength"]


# --- never looser: the property ---------------------------------------------------------------

_LEAVES = st.sampled_from(["string", "integer", "number", "boolean", "null"])


@st.composite
def leaf(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(_LEAVES)
    node: dict[str, Any] = {"type": kind}
    if kind == "string" and draw(st.booleans()):
        node["maxLength"] = draw(st.integers(0, 4))
        node["minLength"] = draw(st.integers(0, node["maxLength"]))
    if kind in ("integer", "number") and draw(st.booleans()):
        node["minimum"] = draw(st.integers(-3, 3))
    if kind in ("integer", "number") and draw(st.booleans()):
        node["maximum"] = draw(st.integers(node.get("minimum", -3), 5))
    if kind == "string" and draw(st.integers(0, 4)) == 0:
        node["enum"] = draw(st.lists(st.sampled_from(["a", "b", "cc"]), min_size=1, unique=True))
    if draw(st.integers(0, 5)) == 0:
        node[draw(st.sampled_from(["default", "examples", "$comment", "title"]))] = "x"
    if draw(st.integers(0, 9)) == 0:
        node[draw(st.sampled_from(["pattern", "format", "exclusiveMinimum"]))] = "a"
    return node


def nodes(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda items: {"type": "array", "items": items, "maxItems": 3}, children),
        objects(children),
    )


@st.composite
def objects(draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3))
    required = [n for n in names if draw(st.booleans())]
    properties = {}
    for name in names:
        child = draw(children)
        if draw(st.integers(0, 3)) == 0 and child.get("type") != "null":
            style = draw(st.sampled_from(["anyOf", "oneOf", "type"]))
            if style == "type":
                child = {**child, "type": [child["type"], "null"]}
            else:
                child = {style: [child, {"type": "null"}], "default": None}
        properties[name] = child
    node: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    closed = draw(st.sampled_from(["absent", True, False]))
    if closed != "absent":
        node["additionalProperties"] = closed
    return node


SCHEMAS = st.recursive(leaf(), nodes, max_leaves=6)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 6) | st.floats(-5, 6, allow_nan=False)
    | st.sampled_from(["", "a", "b", "cc", "dddd", "eeeee"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), inner, max_size=4),
    max_leaves=8,
)  # fmt: skip


def instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values built to fit a subset schema (often accepted, so the property is exercised)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return st.text(
            "abc", min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 4)
        )
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", -4), schema.get("maximum", 6)
        ints = st.integers(low, high) if low <= high else st.nothing()
        return ints if kind == "integer" else ints | st.floats(low, high, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(instances(schema["items"]), max_size=schema.get("maxItems", 3))
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: instances(v) for k, v in properties.items() if k in required},
        optional={k: instances(v) for k, v in properties.items() if k not in required},
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(upstream=objects(SCHEMAS), data=st.data())
def test_the_imported_schema_is_never_looser_than_the_upstream(
    upstream: dict[str, Any], data: st.DataObject
) -> None:
    found = narrow(upstream, IN, parameters=True)
    if found.schema is None:
        assert found.refused
        return
    oracle = jsonschema.Draft202012Validator(upstream)
    imported = compile_validator(found.schema)
    for value in [data.draw(instances(found.schema)) for _ in range(4)] + [
        data.draw(JSON) for _ in range(4)
    ]:
        if imported.is_valid(value):
            assert oracle.is_valid(value), (found.schema, value)

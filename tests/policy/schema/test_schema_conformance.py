"""The official JSON Schema Test Suite (draft 2020-12), run through the schema subset.

The suite lives outside the repository (``SEIF_JSON_SCHEMA_SUITE``, by default
``../shared/conformance/json-schema-test-suite``); nothing of it is copied here.

Each case's schema is rewritten into the subset by equivalences that hold for that case:

- a node without ``type`` gets one: the type of its ``const``; else the type of the instances
  that reach it (JSON Schema applies to an instance only the keywords of the instance's own
  type, so the node restricted to that type's keywords judges it alike); with an ``enum``, the
  instances' type when an enum value has it, else the type of the first value (the instance
  then fails either way), the enum keeping the values of the chosen type;
- open objects become explicit (``additionalProperties: true``); names that ``required`` lists
  without declaring them are declared with the empty schema; ``items: true`` and ``items`` that
  constrain nothing are dropped; ``items: false`` becomes ``maxItems: 0``;
- ``$schema`` and ``$comment`` (annotations of the suite's files) are removed.

Groups using anything else (other keywords, schemas for ``additionalProperties``, type unions,
``false`` schemas for properties, an empty ``enum``) are skipped with the reason, and so are the
cases where instances of several types meet one untyped node. Every rewritten schema must pass
the subset's checker, and jsonschema must judge the rewritten schema as the suite expects: the
rewriting is checked, not trusted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; the reference implementation
import pytest

from compiler.diagnostics import Collector
from compiler.passes.schema_subset import check_schema
from policy.json.strict import loads
from policy.schema.validator import compile_validator
from tests.support.paths import ROOT as REPO

SUITE = Path(
    os.environ.get(
        "SEIF_JSON_SCHEMA_SUITE", REPO.parent / "shared/conformance/json-schema-test-suite"
    )
)
DRAFT = SUITE / "draft2020-12"
MIN_CASES = 200  # 254 of the 326 cases are expressible today; far fewer means a regression

if not DRAFT.is_dir():
    pytest.skip(
        f"JSON Schema Test Suite not found at {DRAFT}; set SEIF_JSON_SCHEMA_SUITE",
        allow_module_level=True,
    )

SUBSET = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "minLength", "maxLength", "minimum", "maximum", "enum", "const", "description", "title",
}  # fmt: skip
DROPPED = {"$schema", "$comment"}
ANNOTATIONS = {"description", "title"} | DROPPED


class Inexpressible(Exception):
    """The subset cannot state this schema (for this case); the message says why."""


def group_problem(schema: Any, where: str = "items") -> str | None:
    """Why a group's schema is outside what the rewriting handles, or None."""
    if schema is True:
        return None
    if schema is False:
        return None if where == "items" else "a `false` schema outside `items`"
    for key, value in schema.items():
        if key not in SUBSET | DROPPED:
            return f"uses `{key}`"
        if key == "additionalProperties" and not isinstance(value, bool):
            return "`additionalProperties` as a schema"
        if key == "type" and isinstance(value, list) and len(value) != 1:
            return "a union of types"
        if key == "enum" and not value:
            return "an empty `enum` (the subset refuses it)"
    children = [(c, "properties") for c in schema.get("properties", {}).values()]
    children += [(schema["items"], "items")] if "items" in schema else []
    return next((p for c, w in children if (p := group_problem(c, w)) is not None), None)


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names[type(value)]


def fits(node_type: str, value: Any) -> bool:
    if node_type == "integer":
        return json_type(value) == "number" and float(value).is_integer()
    return json_type(value) == node_type


def pick_type(node: dict[str, Any], instances: list[Any]) -> str:
    declared = node.get("type")
    if declared is not None:
        return str(declared[0] if isinstance(declared, list) else declared)
    if "const" in node:
        return json_type(node["const"])
    seen = {json_type(i) for i in instances}
    if len(seen) > 1:
        raise Inexpressible("instances of several types meet one untyped node")
    if "enum" in node:
        enum_types = [json_type(v) for v in node["enum"]]
        return seen.pop() if seen and seen <= set(enum_types) else enum_types[0]
    return seen.pop() if seen else "null"


def constrains(schema: Any) -> bool:
    return isinstance(schema, dict) and bool(set(schema) - ANNOTATIONS)


def to_subset(node: Any, instances: list[Any]) -> dict[str, Any]:
    node = {} if node is True else {k: v for k, v in node.items() if k not in DROPPED}
    node_type = pick_type(node, instances)
    out: dict[str, Any] = {"type": node_type}
    out.update((k, node[k]) for k in ("description", "title", "const") if k in node)
    if "enum" in node:
        out["enum"] = [v for v in node["enum"] if fits(node_type, v)]
    copied = {
        "integer": ("minimum", "maximum"),
        "number": ("minimum", "maximum"),
        "string": ("minLength", "maxLength"),
        "array": ("minItems", "maxItems"),
    }.get(node_type, ())
    out.update((k, node[k]) for k in copied if k in node)
    if node_type == "array":
        array_parts(node, instances, out)
    if node_type == "object":
        object_parts(node, instances, out)
    return out


def array_parts(node: dict[str, Any], instances: list[Any], out: dict[str, Any]) -> None:
    items = node.get("items")
    if items is False:
        out["maxItems"] = 0
    elif constrains(items):
        elements = [x for i in instances if isinstance(i, list) for x in i]
        out["items"] = to_subset(items, elements)


def object_parts(node: dict[str, Any], instances: list[Any], out: dict[str, Any]) -> None:
    objects = [i for i in instances if isinstance(i, dict)]
    required = list(node.get("required", []))
    declared = dict(node.get("properties", {}))
    declared.update((name, {}) for name in required if name not in declared)
    properties = {
        name: to_subset(child, [o[name] for o in objects if name in o])
        for name, child in declared.items()
        if constrains(child) or name in required
    }
    if properties:
        out["properties"] = properties
    if required:
        out["required"] = required
    out["additionalProperties"] = node.get("additionalProperties", True)


def cases() -> Iterator[Any]:
    for path in sorted(DRAFT.glob("*.json")):
        for index, group in enumerate(loads(path.read_text(encoding="utf-8"))):
            problem = group_problem(group["schema"])
            for case in group["tests"]:
                case_id = f"{path.stem}/{index}/{case['description']}"
                reason = problem
                schema = None
                if reason is None:
                    try:
                        schema = to_subset(group["schema"], [case["data"]])
                    except Inexpressible as exc:
                        reason = str(exc)
                marks = [pytest.mark.skip(reason=f"not in the subset: {reason}")] if reason else []
                yield pytest.param(schema, case["data"], case["valid"], id=case_id, marks=marks)


CASES = list(cases())
RUNNABLE = sum(1 for c in CASES if not c.marks)


@pytest.mark.parametrize(("schema", "data", "valid"), CASES or [pytest.param(None, None, None)])
def test_suite_case(schema: dict[str, Any], data: Any, valid: bool) -> None:
    assert RUNNABLE >= MIN_CASES, f"only {RUNNABLE} suite cases are runnable in {DRAFT}"
    out = Collector("check")
    check_schema(schema, "", out)
    assert out.items == [], f"the rewritten schema is outside the subset: {schema}"
    assert jsonschema.Draft202012Validator(schema).is_valid(data) is valid, "rewriting is wrong"
    validator = compile_validator(schema)
    assert validator.is_valid(data) is valid
    assert (validator.errors(data) == ()) is valid

"""A small valid value of a schema of the subset: the arguments a compatibility guard calls
with. Required properties only, the first ``enum`` value or the ``const``, the smallest lengths
and counts the bounds allow, numbers at their minimum (or 0, clamped into range)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.schema.validator import compile_validator


def example_value(schema: Mapping[str, Any]) -> Any:
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example_value(properties[name]) for name in schema.get("required", [])}
    if kind == "array":
        count = schema.get("minItems", 0)
        return [example_value(schema["items"]) for _ in range(count)] if count else []
    if kind == "string":
        return "x" * max(schema.get("minLength", 1), 1) if schema.get("maxLength", 1) else ""
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        value = low if low is not None else 0
        value = min(value, high) if high is not None else value
        return int(value) if kind == "integer" and float(value).is_integer() else value
    if kind == "boolean":
        return False
    return None


def example_arguments(parameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """Valid arguments for ``parameters``, or None when the simple choice is not valid."""
    value = example_value(parameters)
    if not isinstance(value, dict) or not compile_validator(parameters).is_valid(value):
        return None
    return value

"""The JSON Schema (2020-12) of a project file, for editors (`seif schema project`).

It is generated from the IR's own field tables (:func:`policy.codec.field_table`), the tables
the compiler's ``structure`` pass checks a declaration against, so the two cannot drift: every
key, JSON type, requirement and constraint the structure pass enforces is here, and nothing
else. What later passes check (references between ids, the tool schema subset, CEL, catalogue
limits) is not expressible in a schema and stays the compiler's: a file the schema accepts may
still be refused by ``seif validate``, never the reverse.
"""

from __future__ import annotations

from typing import Any

from compiler.passes import SCHEMA_KEY
from compiler.passes.resolve import READY_FIXTURE_KEYS
from policy.codec import Kind, field_table
from policy.constraints import Exactly, JsonAny, JsonObject, Length, OneOf, Pattern, Range
from policy.ir import PROJECT_FORMAT, Fixture, Project

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:seif:schema:context-project.v1"
"""The schema's ``$id``: a name, not a download location (the file is ``seif schema project``'s
output, kept beside the project)."""

_SCALARS = {str: "string", int: "integer", bool: "boolean"}


def project_schema() -> dict[str, Any]:
    """The JSON Schema of a project file: the root object, then one ``$defs`` entry per IR
    class, each a closed object of its declared keys."""
    defs: dict[str, Any] = {}
    root = _node(Project, defs)
    root["properties"] = {
        SCHEMA_KEY: {
            "type": "string",
            "description": "the JSON Schema of this file, for editors; not part of the project",
        },
        **root["properties"],
    }
    defs[Fixture.__name__]["if"] = {"properties": {"state": {"const": "READY"}}}
    defs[Fixture.__name__]["then"] = {"required": list(READY_FIXTURE_KEYS)}  # the resolve pass's
    return {
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": f"seif project ({PROJECT_FORMAT})",
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _node(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for spec in field_table(cls):
        properties[spec.key] = _value(spec.kind, spec.check, defs)
        if spec.must_declare or not spec.may_omit:
            required.append(spec.key)
    node: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        node["required"] = required
    node["additionalProperties"] = False
    return node


def _value(kind: Kind, check: Any, defs: dict[str, Any]) -> dict[str, Any]:
    tag = kind.tag
    if tag == "node":
        assert kind.py is not None
        name = kind.py.__name__
        if name not in defs:
            defs[name] = {}  # a placeholder while its fields are generated (recursion)
            defs[name] = _node(kind.py, defs)
        return {"$ref": f"#/$defs/{name}"}
    if tag == "scalar":
        assert kind.py is not None
        return {"type": _SCALARS[kind.py], **_constraint(check)}
    if tag == "tuple":
        assert kind.item is not None
        item_check = check if kind.item.tag == "scalar" else None
        return {"type": "array", "items": _value(kind.item, item_check, defs)}
    if tag == "mapping":
        assert kind.item is not None
        return {"type": "object", "additionalProperties": _value(kind.item, None, defs)}
    if tag == "union":
        return {"anyOf": [_union_option(option, check, defs) for option in kind.options]}
    if isinstance(check, JsonObject):
        return {"type": "object"}
    if check is None or isinstance(check, JsonAny):
        return {}
    return _constraint(check)


def _union_option(option: Kind, check: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """An option of a union as the structure pass reads it: a string with the union's check,
    or an object of its items."""
    if option.tag == "scalar" and option.py is str:
        return _value(option, check, defs)
    if option.tag == "mapping":
        return _value(option, None, defs)
    raise AssertionError(f"a union option the structure pass does not read: {option}")


def _constraint(check: Any) -> dict[str, Any]:
    if isinstance(check, Pattern):
        # anchored at both ends in ECMA-262 (editors) and in Python alike: `$` would also match
        # before a final newline in Python, `(?![\s\S])` is the end of the text in both
        return {"pattern": f"^(?:{check.regex.pattern})(?![\\s\\S])"}
    if isinstance(check, Range):
        return {"minimum": check.low, "maximum": check.high}
    if isinstance(check, Length):
        return {"minLength": check.low, "maxLength": check.high}
    if isinstance(check, OneOf):
        return {"enum": list(check.values)}
    if isinstance(check, Exactly):
        return {"const": check.value}
    return {}

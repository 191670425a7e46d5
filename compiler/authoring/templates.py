"""The tool templates of ``seif tool new`` and the ``--field name:type[:required]`` syntax.

A template is a complete, valid tool declaration (ids and names filled in from ``--id``) in the
key order the reference project uses. Writes are approval-required: ``ticket-creation`` is a
write and declares ``approval: required``; no template or option can switch that off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from compiler.authoring.source import AuthoringError, refusal
from policy.diagnostic import Diagnostic, Location

TEMPLATES: Mapping[str, str] = MappingProxyType(
    {
        "record-lookup": "read one record by its id",
        "knowledge-search": "search a knowledge base: a query and a result limit",
        "ticket-creation": "create a ticket (a write: approval required): title, description, "
        "priority",
        "custom": "your own arguments, from --field or --schema (a read unless --effect write)",
    }
)
FIELD_TYPES: tuple[str, ...] = ("string", "integer", "number", "boolean")
FIELD_SYNTAX = "name:type[:required]"
_PROPERTY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _text(low: int, high: int, description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": low, "maxLength": high, "description": description}


def _record_lookup() -> dict[str, Any]:
    return {
        "description": "Look up one record by its id and return the fields the backend lets "
        "this caller see.",
        "parameters": _obj({"id": _text(1, 128, "The record's id.")}, ["id"]),
        "result": _obj(
            {
                "id": {"type": "string", "maxLength": 128},
                "record": {"type": "object", "additionalProperties": True},
            },
            ["id", "record"],
        ),
        "effect": "read",
        "approval": "none",
        "maxCalls": 3,
        "timeoutMs": 5000,
    }


def _knowledge_search() -> dict[str, Any]:
    limit = {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "description": "Maximum number of hits to return.",
    }
    hit = _obj(
        {
            "id": {"type": "string", "maxLength": 128},
            "title": {"type": "string", "maxLength": 200},
            "snippet": {"type": "string", "maxLength": 1000},
        },
        ["id", "title", "snippet"],
    )
    return {
        "description": "Search the knowledge base and return the best matching entries with "
        "short snippets.",
        "parameters": _obj(
            {"query": _text(1, 200, "Plain-language search text."), "limit": limit}, ["query"]
        ),
        "result": _obj({"hits": {"type": "array", "maxItems": 20, "items": hit}}, ["hits"]),
        "effect": "read",
        "approval": "none",
        "maxCalls": 3,
        "timeoutMs": 5000,
    }


def _ticket_creation() -> dict[str, Any]:
    priority = {
        "type": "string",
        "enum": ["low", "normal", "high", "urgent"],
        "description": "How soon the ticket needs attention.",
    }
    return {
        "description": "Create one ticket in the ticketing system. A person approves the exact "
        "call before it is sent.",
        "parameters": _obj(
            {
                "title": _text(1, 120, "A one-line summary."),
                "description": _text(1, 4000, "What happened and what is needed."),
                "priority": priority,
            },
            ["title", "description", "priority"],
        ),
        "result": _obj(
            {"ticketId": {"type": "string", "minLength": 1, "maxLength": 128}}, ["ticketId"]
        ),
        "effect": "write",
        "approval": "required",
        "maxCalls": 1,
        "timeoutMs": 10000,
    }


def _custom() -> dict[str, Any]:
    return {
        "description": "Describe what this tool does, for the model that calls it.",
        "parameters": _obj({}, []),
        "effect": "read",
        "approval": "none",
        "maxCalls": 3,
        "timeoutMs": 10000,
    }


_BUILDERS = {
    "record-lookup": _record_lookup,
    "knowledge-search": _knowledge_search,
    "ticket-creation": _ticket_creation,
    "custom": _custom,
}


def function_name(tool_id: str) -> str:
    """The function name a model sees for ``tool_id``: its hyphens as underscores."""
    return tool_id.replace("-", "_")


def tool_from_template(
    template: str,
    tool_id: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    version: str | None = None,
    effect: str | None = None,
) -> dict[str, Any]:
    """The declaration of a new tool; ``AuthoringError`` for an unknown template or id."""
    if template not in _BUILDERS:
        known = ", ".join(TEMPLATES)
        raise refusal("TEMPLATE_UNKNOWN", f"`{template}` is not a template: write one of {known}")
    if not _ID.fullmatch(tool_id):
        raise refusal(
            "INVALID_ID",
            f"`{tool_id}` is not a tool id: lowercase letters, digits and `-`, starting with a "
            "letter, at most 64 (e.g. `order-lookup`)",
        )
    body = _BUILDERS[template]()
    if parameters is not None:
        body["parameters"] = dict(parameters)
    if description is not None:
        body["description"] = description
    if effect is not None:
        body["effect"] = effect
        body["approval"] = "required" if effect == "write" else body["approval"]
        body["maxCalls"] = 1 if effect == "write" else body["maxCalls"]
    head = {"id": tool_id, "name": name or function_name(tool_id), "version": version or "1.0.0"}
    return {**head, **body}


def parameters_from_fields(fields: Sequence[str]) -> dict[str, Any]:
    """The ``parameters`` schema of ``--field name:type[:required]`` options (every problem
    reported at once as ``FIELD_INVALID`` / ``FIELD_TYPE_UNKNOWN``, pointer ``/fields/N``)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    problems: list[Diagnostic] = []
    for index, spec in enumerate(fields):
        parsed = _field(spec, f"/fields/{index}", problems)
        if parsed is None:
            continue
        name, schema, needed = parsed
        if name in properties:
            problems.append(
                _problem("FIELD_INVALID", f"/fields/{index}", f"`{name}` is given twice")
            )
            continue
        properties[name] = schema
        if needed:
            required.append(name)
    if problems:
        raise AuthoringError(problems)
    return _obj(properties, required)


def _field(spec: str, pointer: str, problems: list[Diagnostic]) -> tuple[str, Any, bool] | None:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("required", "optional")):
        message = f"`{spec}` is not `{FIELD_SYNTAX}`: write e.g. `title:string:required`"
        problems.append(_problem("FIELD_INVALID", pointer, message))
        return None
    name, kind = parts[0], parts[1]
    if not _PROPERTY.fullmatch(name):
        message = f"`{name}` is not an argument name: letters, digits and `_` (e.g. `order_id`)"
        problems.append(_problem("FIELD_INVALID", pointer, message))
        return None
    schema = _field_schema(kind)
    if schema is None:
        types = ", ".join(FIELD_TYPES)
        message = (
            f"`{kind}` is not a type of the schema subset: write one of {types}, or a list of "
            f"one as `{FIELD_TYPES[0]}[]` (e.g. `{name}:string:required`)"
        )
        problems.append(_problem("FIELD_TYPE_UNKNOWN", pointer, message))
        return None
    return name, schema, len(parts) == 3 and parts[2] == "required"


def _field_schema(kind: str) -> dict[str, Any] | None:
    if kind.endswith("[]"):
        item = _field_schema(kind[:-2])
        return None if item is None or kind.count("[]") > 1 else {"type": "array", "items": item}
    return {"type": kind} if kind in FIELD_TYPES else None


def _problem(code: str, pointer: str, message: str) -> Diagnostic:
    return Diagnostic(code=code, message=message, location=Location(pointer=pointer))

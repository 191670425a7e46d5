"""An upstream MCP tool's JSON Schema turned into seif's bounded subset, never looser.

:func:`narrow` reads one upstream schema (``inputSchema`` or ``outputSchema``) and returns the
schema seif declares for it, with what it changed, each at its JSON pointer inside the upstream
tool object (docs/upstream-mcp.md, "Schemas: never looser than the upstream"):

- ``dropped``: annotation keywords left out (:data:`DROPPED`); they constrain nothing.
- ``narrowed``: a nullable union on a property that is not required, turned into its non-null
  schema (the property may be omitted instead of null), and open objects closed to their
  declared properties. Each accepts a subset of what the upstream accepts.
- ``refused``: anything else outside the subset (``pattern``, ``format``, ``$ref``, other
  unions, a nullable required property, ...), and whatever the subset's own checker
  (:func:`compiler.passes.schema_subset.check_schema`) refuses in the result (too deep, too
  many properties, a bound of the wrong type). A refused schema is not imported at all.

Pure: no I/O. Every kept keyword means in the subset what it means in JSON Schema 2020-12, so
the imported schema accepts only values the upstream schema accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compiler.diagnostics import Collector
from compiler.passes.schema_subset import check_schema
from policy.json.pointer import join, split

DROPPED = (
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
)
"""Annotation keywords: dropped from an imported schema and listed in ``dropped``."""

KEPT = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems"}
    | {"minLength", "maxLength", "minimum", "maximum", "enum", "const", "description", "title"}
)
"""The subset's keywords (docs/project-format.md), kept as the upstream wrote them."""

_UNIONS = ("anyOf", "oneOf")
MAX_NESTING = 16
"""Deeper upstream schemas are refused outright (the subset allows 8 levels)."""


@dataclass
class Narrowed:
    """The subset schema of one upstream schema (None when refused) and what changed."""

    schema: dict[str, Any] | None
    dropped: list[str] = field(default_factory=list)
    narrowed: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    """``(pointer, message)`` of each keyword or node the subset cannot take."""


@dataclass
class _Walk:
    dropped: list[str] = field(default_factory=list)
    narrowed: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)
    """output pointer -> upstream pointer, for every node and keyword written."""


def narrow(schema: Any, at: str, *, parameters: bool) -> Narrowed:
    """``schema`` (found at ``at`` in the upstream tool object, such as ``/inputSchema``) in
    the subset; ``parameters``: the root must be an object (the tool's arguments)."""
    walk = _Walk()
    out = _node(schema, at, "", walk, depth=1, optional_property=False)
    if out is not None and not walk.refused:
        checks = Collector()
        check_schema(out, "", checks, root_must_be_object=parameters)
        for problem in checks.items:
            pointer = _upstream_pointer(problem.location.pointer or "", walk.origin, at)
            walk.refused.append((pointer, f"{problem.message} ({problem.code})"))
    final = None if walk.refused or not isinstance(out, dict) else out
    return Narrowed(final, walk.dropped, walk.narrowed, walk.refused)


def _upstream_pointer(pointer: str, origin: Mapping[str, str], at: str) -> str:
    """The upstream pointer of an output pointer: its longest recorded prefix, plus the rest."""
    tokens = split(pointer)
    for cut in range(len(tokens), -1, -1):
        prefix = join("", *tokens[:cut])
        if prefix in origin:
            return join(origin[prefix], *tokens[cut:])
    return at


def _node(
    schema: Any, up: str, here: str, walk: _Walk, *, depth: int, optional_property: bool
) -> Any:
    """One schema node: the subset's node, or None (its problems in ``walk.refused``)."""
    walk.origin[here] = up
    if depth > MAX_NESTING:
        walk.refused.append((up, f"a schema nested deeper than {MAX_NESTING} levels"))
        return None
    if not isinstance(schema, Mapping):
        what = "a boolean schema" if isinstance(schema, bool) else "not a schema object"
        walk.refused.append((up, f"{what}: the subset needs an object with a `type`"))
        return None
    items = [(str(key), value, join(up, key)) for key, value in schema.items()]
    kept = _without_null(schema, items, up, walk, optional_property)
    if kept is None:
        return None
    return _keywords(kept, up, here, walk, depth)


def _without_null(
    schema: Mapping[str, Any],
    items: list[tuple[str, Any, str]],
    up: str,
    walk: _Walk,
    optional_property: bool,
) -> list[tuple[str, Any, str]] | None:
    """The node's keywords with a nullable union replaced by its non-null schema (an optional
    property's), or unchanged when it has none; None when it has one that must be refused."""
    for union in _UNIONS:
        options = schema.get(union)
        if not isinstance(options, list):
            continue
        other = _nullable_option(options)
        where = join(up, union)
        if other is None:
            return items  # another union: refused as a keyword outside the subset
        if not optional_property:
            walk.refused.append((where, _NULLABLE_REQUIRED.format(f"`{union}` with `null`")))
            return None
        index, inner = other
        if not isinstance(inner, Mapping):
            return items
        clash = sorted(set(inner) & (set(schema) - {union} - _ANNOTATIONS))
        if clash:
            message = f"`{clash[0]}` both beside `{union}` and inside it"
            walk.refused.append((join(up, clash[0]), message))
            return None
        walk.narrowed.append(where)
        siblings = [item for item in items if item[0] != union and item[0] not in inner]
        inside = [(k, v, join(where, index, k)) for k, v in inner.items()]
        return inside + siblings
    kind = schema.get("type")
    if isinstance(kind, list) and len(kind) == 2 and "null" in kind and len(set(kind)) == 2:
        where = join(up, "type")
        if not optional_property:
            walk.refused.append((where, _NULLABLE_REQUIRED.format("`type` with `null`")))
            return None
        walk.narrowed.append(where)
        single = next(t for t in kind if t != "null")
        return [(k, single if k == "type" else v, p) for k, v, p in items]
    return items


_ANNOTATIONS = frozenset({"title", "description", *DROPPED})
_NULLABLE_REQUIRED = (
    "a nullable union ({}) on a property that is required or not a property: seif cannot say "
    "`null` without a union"
)


def _nullable_option(options: list[Any]) -> tuple[int, Any] | None:
    """``(index, schema)`` of the non-null option of a two-option union with ``{"type":
    "null"}`` (annotations allowed beside it), else None."""
    if len(options) != 2:
        return None
    nulls = [
        i
        for i, option in enumerate(options)
        if isinstance(option, Mapping)
        and option.get("type") == "null"
        and set(option) - _ANNOTATIONS == {"type"}
    ]
    if len(nulls) != 1:
        return None
    index = 1 - nulls[0]
    return index, options[index]


def _keywords(
    items: list[tuple[str, Any, str]], up: str, here: str, walk: _Walk, depth: int
) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    ok = True
    required = next((v for k, v, _ in items if k == "required"), None)
    required_names = set(required) if isinstance(required, list) else set()
    for key, value, where in items:
        target = join(here, key)
        if key in DROPPED:
            walk.dropped.append(where)
            continue
        if key not in KEPT:
            walk.refused.append((where, f"`{key}` is outside seif's schema subset"))
            ok = False
            continue
        walk.origin[target] = where
        if key == "properties" and isinstance(value, Mapping):
            props: dict[str, Any] = {}
            for name, sub in value.items():
                optional = name not in required_names
                child = _node(
                    sub, join(where, name), join(target, name), walk,
                    depth=depth + 1, optional_property=optional,
                )  # fmt: skip
                ok = ok and child is not None
                props[name] = child
            out[key] = props
        elif key == "items" and isinstance(value, Mapping):
            child = _node(value, where, target, walk, depth=depth + 1, optional_property=False)
            ok = ok and child is not None
            out[key] = child
        elif key == "additionalProperties" and value is True:
            continue  # an open object: closed below
        elif key == "additionalProperties" and isinstance(value, Mapping):
            walk.refused.append((where, "`additionalProperties` as a schema is outside the subset"))
            ok = False
        else:
            out[key] = value
    if out.get("type") == "object" and "additionalProperties" not in out:
        walk.narrowed.append(up)  # open (no `additionalProperties`, or `true`): closed
    return out if ok else None

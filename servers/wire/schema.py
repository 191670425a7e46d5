"""JSON Schema of the wire's types: request dataclasses (:mod:`servers.wire.fields`) and answer
``TypedDict``\\ s (:mod:`servers.wire.answers`), as the OpenAPI document declares them.

- ``str``, ``int``, ``bool``, ``Any`` (``{}``), ``Literal`` (``const`` or ``enum``), ``list[T]``,
  ``dict[str, T]`` (``additionalProperties`` unless ``T`` is ``Any``), ``T | None``;
- ``Annotated[T, Schema(...)]`` adds keywords (a format, a pattern, bounds);
- a ``TypedDict`` is an object of its keys (``required``: those not ``NotRequired``), closed
  (``additionalProperties: false``) when it is listed as such, and a ``$ref`` when it is one of
  the named components.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, is_typeddict

from servers.wire.fields import BodyField, body_fields


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: it holds a schema
class Schema:
    """Keywords added to a type's schema: ``Annotated[str, Schema({"format": "date-time"})]``."""

    keywords: Mapping[str, Any]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


@dataclass(frozen=True, slots=True)
class Schemas:
    """How types become schemas: which ``TypedDict``\\ s are named components, and which
    objects are closed."""

    components: Collection[type]
    closed: Collection[type]
    objectives: tuple[str, ...] = ()
    """The build's objectives, enumerated in an ``objective`` field (none: any identifier)."""

    def of(self, hint: Any) -> dict[str, Any]:
        """The schema of an annotation (a component by reference)."""
        if hint in self.components:
            return ref(hint.__name__)
        return self.inline(hint)

    def inline(self, hint: Any) -> dict[str, Any]:
        """The schema of an annotation, a component spelled out."""
        if is_typeddict(hint):
            return self._object(hint)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Annotated:
            extra = [m.keywords for m in hint.__metadata__ if isinstance(m, Schema)]
            return {**self.of(args[0]), **{k: v for m in extra for k, v in m.items()}}
        if origin in (typing.Union, types.UnionType):
            return self._nullable(hint)
        maker = _GENERIC.get(origin)
        if maker is not None:
            return maker(self, args)
        if hint in _PLAIN:
            return dict(_PLAIN[hint])
        raise TypeError(f"no schema for {hint!r}")

    def _object(self, cls: Any) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        required = [k for k in hints if k in cls.__required_keys__]
        props = {k: self.of(_bare(v)) for k, v in hints.items()}
        out: dict[str, Any] = {"type": "object", "required": required, "properties": props}
        if cls in self.closed:
            out["additionalProperties"] = False
        return out

    def _nullable(self, hint: Any) -> dict[str, Any]:
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        schema = self.of(inner)
        if isinstance(schema.get("type"), str):
            return {**schema, "type": [schema["type"], "null"]}
        return {"anyOf": [schema, {"type": "null"}]}

    def body(self, cls: type) -> dict[str, Any]:
        """A request dataclass's body: a closed object of its fields."""
        declared = body_fields(cls)
        return {
            "type": "object",
            "required": [f.name for f in declared if f.required],
            "properties": {f.name: self._field(f) for f in declared},
            "additionalProperties": False,
        }

    def _field(self, f: BodyField) -> dict[str, Any]:
        schema = dict(f.kind.schema)
        if f.kind.enumerable and self.objectives:
            schema = {"enum": sorted(self.objectives)}
        elif not f.required and isinstance(schema.get("type"), str):
            schema["type"] = [schema["type"], "null"]  # absent, or null (read as absent)
        if f.description is not None:
            schema["description"] = f.description
        return schema


def _bare(hint: Any) -> Any:
    """An answer key's type without ``Required``/``NotRequired``."""
    while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
        (hint,) = typing.get_args(hint)
    return hint


def _literal(_schemas: Schemas, args: tuple[Any, ...]) -> dict[str, Any]:
    return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}


def _array(schemas: Schemas, args: tuple[Any, ...]) -> dict[str, Any]:
    return {"type": "array", "items": schemas.of(args[0])}


def _map(schemas: Schemas, args: tuple[Any, ...]) -> dict[str, Any]:
    if args[1] is Any:
        return {"type": "object"}
    return {"type": "object", "additionalProperties": schemas.of(args[1])}


_GENERIC: dict[Any, Callable[[Schemas, tuple[Any, ...]], dict[str, Any]]] = {
    Literal: _literal,
    list: _array,
    dict: _map,
}
_PLAIN: dict[Any, Mapping[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    bool: {"type": "boolean"},
    Any: {},
}

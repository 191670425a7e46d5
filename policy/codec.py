"""The IR's field tables and its encoding as a normalized declaration.

:func:`field_table` describes, once per IR class, each declared field: its declaration key, its
kind (from the type hint), its constraint and whether the declaration may omit it. The compiler
reads it to check and lower declarations; :func:`to_declaration` reads it to encode IR values.
The encoding omits a field whose value equals its default (so a tool-free project carries no
tool field at all) and never carries derived values.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy.constraints import Constraint
from policy.json.canonical import canonical_cbor
from policy.json.value import FrozenMap, JsonValue, thaw


@dataclass(frozen=True, slots=True)
class Kind:
    """What a field holds: ``scalar`` (str, int, bool), ``json``, ``node`` (an IR class),
    ``tuple`` or ``mapping`` of ``item``, or a ``union`` of ``options``; ``nullable`` when
    ``None`` is allowed."""

    tag: str
    py: type | None = None
    item: Kind | None = None
    options: tuple[Kind, ...] = ()
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    key: str
    kind: Kind
    check: Constraint | None
    has_default: bool
    default: Any
    may_omit: bool
    must_declare: bool


def _kind(hint: Any) -> Kind:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        if len(args) == 1:
            return dataclasses.replace(_kind(args[0]), nullable=nullable)
        return Kind("union", options=tuple(_kind(a) for a in args), nullable=nullable)
    if origin is tuple:
        return Kind("tuple", item=_kind(typing.get_args(hint)[0]))
    if origin in (Mapping, dict, typing.Mapping):
        return Kind("mapping", item=_kind(typing.get_args(hint)[1]))
    if hint is FrozenMap:
        return Kind("json", py=dict)
    if hint in (str, int, bool):
        return Kind("scalar", py=hint)
    if dataclasses.is_dataclass(hint):
        return Kind("node", py=hint)  # type: ignore[arg-type]  # hint is a dataclass class
    return Kind("json")


@functools.cache
def field_table(cls: type) -> tuple[FieldSpec, ...]:
    """The declared fields of an IR class, in declaration order."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("derived"):
            continue
        has_default = f.default is not dataclasses.MISSING
        specs.append(
            FieldSpec(
                name=f.name,
                key=f.metadata["key"],
                kind=_kind(hints[f.name]),
                check=f.metadata.get("check"),
                has_default=has_default,
                default=f.default if has_default else None,
                may_omit=(has_default and not f.metadata.get("required")) or f.metadata["optional"],
                must_declare=bool(f.metadata.get("required")),
            )
        )
    return tuple(specs)


def to_declaration(value: Any) -> JsonValue:
    """The normalized declaration of an IR value: plain JSON, defaults omitted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for spec in field_table(type(value)):
            item = getattr(value, spec.name)
            if spec.has_default and item == spec.default:
                continue
            out[spec.key] = to_declaration(item)
        return out
    if isinstance(value, Mapping):
        return {k: to_declaration(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [to_declaration(v) for v in value]
    return thaw(value)


def encode(value: Any) -> bytes:
    """Canonical CBOR of :func:`to_declaration`."""
    return canonical_cbor(to_declaration(value))

"""Request bodies as typed values: each route's body is a frozen dataclass whose fields are
annotated with a :class:`Kind` (``Annotated[str, ID]``), and :func:`decode` checks a JSON object
against it, closed (a field it does not declare is refused), in the order the class declares
its fields, with the messages clients have always been given:

- ``unknown field `NAME```, ``missing field `NAME``` (a field that is null is missing), and
  ``` `NAME` must be RULE``` for a value of the wrong kind;
- every refusal is 400 ``BAD_REQUEST`` (:class:`~servers.wire.errors.Refused`).

A field's wire name is its attribute's name in camelCase (``context_ref`` -> ``contextRef``);
``field(metadata={"doc": ...})`` gives it a description in the document.
The same annotations give each body's JSON Schema (:mod:`servers.wire.schema`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar

from servers.support.visible import has_visible
from servers.wire.errors import ErrorCode, Refused
from servers.wire.limits import MAX_ID_LENGTH, MAX_TEXT_LENGTH

T = TypeVar("T")

ID_RULE: Final = f"a non-empty string of at most {MAX_ID_LENGTH} characters, none of them NUL"


def is_id(value: object) -> bool:
    """A name a client gives (an id, a call id, a coordinate): a non-empty string of at most
    :data:`MAX_ID_LENGTH` characters, none of them NUL (which no store's text can hold)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and "\x00" not in value


def _is_text(value: object) -> bool:
    """A reason: at most :data:`MAX_TEXT_LENGTH` characters, one of them visible (one made only
    of spaces, controls, zero-width or blank characters is no reason:
    :func:`servers.support.visible.has_visible`)."""
    return isinstance(value, str) and len(value) <= MAX_TEXT_LENGTH and has_visible(value)


def _is_names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _anything(_value: object) -> bool:
    return True


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: it holds a schema
class Kind:
    """What one body field holds: the check of its JSON value, the rule a refusal names
    (``` `NAME` must be RULE```), its JSON Schema, and for a choice the values it takes."""

    fits: Callable[[object], bool]
    rule: str
    schema: Mapping[str, Any]
    choices: tuple[str, ...] = ()
    enumerable: bool = False
    """An objective: the document of one build lists the build's objectives instead."""

    def problem(self, name: str, value: object) -> str:
        """What is wrong with ``value`` as the field ``name`` (it does not fit)."""
        if not self.fits(value):
            return f"`{name}` must be {self.rule}"
        return f"`{name}` must be " + " or ".join(f"`{c}`" for c in self.choices)


ID_SCHEMA: Final = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH}
ID: Final = Kind(is_id, ID_RULE, ID_SCHEMA)
OBJECTIVE: Final = Kind(is_id, ID_RULE, ID_SCHEMA, enumerable=True)
TEXT: Final = Kind(
    _is_text,
    f"a string of at most {MAX_TEXT_LENGTH} characters with a visible character",
    {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_LENGTH, "pattern": r"\S"},
)
NAMES: Final = Kind(
    _is_names, "a list of names", {"type": "array", "items": {"type": "string", "minLength": 1}}
)
VALUE: Final = Kind(_anything, "a JSON value", {"not": {"type": "null"}})
"""Any JSON value but null (a required field that is null is missing)."""


def choice(*choices: str) -> Kind:
    """An identifier that is one of ``choices``."""
    return Kind(is_id, ID_RULE, {"enum": list(choices)}, choices=choices)


Id = Annotated[str, ID]
Objective = Annotated[str, OBJECTIVE]
Text = Annotated[str, TEXT]
Names = Annotated[list[str], NAMES]
Value = Annotated[Any, VALUE]


def wire_name(attribute: str) -> str:
    """``context_ref`` -> ``contextRef``."""
    head, *rest = attribute.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class BodyField:
    """One field of a request body: its attribute, its wire name, its kind, and whether it
    must be present (the attribute has no default)."""

    attribute: str
    name: str
    kind: Kind
    required: bool
    description: str | None = None


_FIELDS: dict[type, tuple[BodyField, ...]] = {}
_NAMES: dict[type, frozenset[str]] = {}


def body_fields(cls: type) -> tuple[BodyField, ...]:
    """The fields of the request class ``cls``, in declared order (read once per class)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        found = _FIELDS[cls] = tuple(_field(f, hints[f.name]) for f in dataclasses.fields(cls))
        _NAMES[cls] = frozenset(f.name for f in found)
    return found


def _field(f: dataclasses.Field[Any], hint: Any) -> BodyField:
    required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    return BodyField(f.name, wire_name(f.name), kind_of(hint), required, f.metadata.get("doc"))


def kind_of(hint: Any) -> Kind:
    """The :class:`Kind` of an annotation: ``Annotated[T, kind]``, or that or None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    kinds = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Kind)]
    if len(kinds) != 1:
        raise TypeError(f"a request field is annotated with one Kind, not {hint!r}")
    return kinds[0]


def decode(cls: type[T], body: Mapping[str, Any]) -> T:
    """``body`` as a ``cls``: closed, each field checked in declared order; absent optional
    fields take their defaults (None)."""
    declared = body_fields(cls)
    names = _NAMES[cls]
    for key in body:
        if key not in names:
            raise Refused(ErrorCode.BAD_REQUEST, f"unknown field `{key[:64]}`")
    values: dict[str, Any] = {}
    for f in declared:
        value = body.get(f.name)
        if value is None:
            if f.required:
                raise Refused(ErrorCode.BAD_REQUEST, f"missing field `{f.name}`")
            continue
        kind = f.kind
        if not kind.fits(value) or (kind.choices and value not in kind.choices):
            raise Refused(ErrorCode.BAD_REQUEST, kind.problem(f.name, value))
        values[f.attribute] = value
    return cls(**values)

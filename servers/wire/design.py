"""The request bodies of the Design workstation's ``/api/...`` routes (``seif design``), decoded
by the runtime's decoder (:func:`servers.wire.fields.decode`) with the workstation's own kinds:
an identifier it names (``Name``: 1..256 characters), free text (``Text``: any string up to
the body's size: a schema, arguments, a path), a flag, a list of strings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final

from servers.wire.fields import Kind
from servers.wire.limits import MAX_BODY_BYTES, MAX_ID_LENGTH


def _is_name(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH


def _is_text(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_BODY_BYTES


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


NAME: Final = Kind(
    _is_name,
    f"a non-empty string of at most {MAX_ID_LENGTH} characters",
    {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH},
)
TEXT: Final = Kind(_is_text, "a string", {"type": "string", "maxLength": MAX_BODY_BYTES})
FLAG: Final = Kind(_is_bool, "true or false", {"type": "boolean"})
STRINGS: Final = Kind(
    _is_strings, "a list of strings", {"type": "array", "items": {"type": "string"}}
)

Name = Annotated[str, NAME]
Text = Annotated[str, TEXT]
Flag = Annotated[bool, FLAG]
Strings = Annotated[list[str], STRINGS]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTool:
    """``POST /api/tools/new`` (``seif tool new``)."""

    template: Name
    id: Name
    fields: Strings | None = None
    schema: Text | None = None
    name: Name | None = None
    description: Text | None = None
    version: Name | None = None
    effect: Name | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncludeTool:
    """``POST /api/tools/include`` (``seif tool include``)."""

    tool: Name
    profile: Name
    required: Flag | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectTool:
    """``POST /api/tools/protect`` (``seif tool protect``)."""

    tool: Name


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckCall:
    """``POST /api/tools/check-call`` (``seif tool check-call``): the arguments as JSON text and
    the simulated context's coordinates (an empty one is absent)."""

    objective: Name
    tool: Name
    arguments: Text
    approved: Flag | None = None
    fixtures: Name | None = None
    consumer: Text | None = None
    environment: Text | None = None
    deployment: Text | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Starter:
    """``POST /api/starter`` (``seif starter``): the directory to write to."""

    tool: Name
    lang: Name
    out: Text


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """``POST /api/release`` (``seif release``)."""

    environment: Name
    registry: Text | None = None
    bindings: Text | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenBindings:
    """``POST /api/bindings/open``: a bindings file to edit."""

    file: Text


@dataclass(frozen=True, slots=True, kw_only=True)
class SaveBinding:
    """``POST /api/bindings``: one tool's endpoint and secretRef."""

    tool: Name
    endpoint: Text
    secret_ref: Text | None = None
